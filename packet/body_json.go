package packet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/raet-go/raet/codec"
)

// JSONBody is the serializer of body kind json (1).
//
// Marshal writes what the reference's json.dumps(body, separators=(',',':'))
// writes for the same ordered mapping: no spaces; every character outside
// printable ASCII (and DEL) escaped as \uXXXX in lowercase hex, with UTF-16
// surrogate pairs above U+FFFF; \" \\ \b \f \n \r \t as short escapes;
// '<', '>', '&' and '/' as they are; floats as Python's repr (1.0, 1e-05,
// 1e+16; shortest round-trip digits; the shortest float32 digits for a
// float32); integers in decimal. This holds for nil, bool, string, the Go
// integer and float types, json.Number, *big.Int, map[string]any,
// map[string]string, OrderedMap, []any and []string, at any nesting. Any
// other value (a struct, []byte, json.Marshaler, ...) is encoded by
// encoding/json and then escaped the same way, so its strings match Python
// but its numbers follow encoding/json (a float64 3.0 becomes 3). NaN and
// ±Inf are ErrUnsupportedValue (Python would write the non-JSON NaN or
// Infinity). Invalid UTF-8 in a string is written as \ufffd.
//
// Unmarshal accepts any valid UTF-8 JSON object. Invalid UTF-8, the
// non-JSON literals NaN and Infinity (accepted by Python), numbers beyond
// float64 and trailing data are ErrMalformedBody. Integers (no fraction or
// exponent) decode as int64, uint64 or *big.Int, other numbers as float64,
// so a body from the reference re-encodes to the same bytes through an
// OrderedMap.
type JSONBody struct{}

// Kind returns codec.BodyKindJSON.
func (JSONBody) Kind() codec.BodyKind { return codec.BodyKindJSON }

// Marshal appends the compact, ASCII-only JSON of the mapping v to dst.
func (JSONBody) Marshal(dst []byte, v any) ([]byte, error) {
	if isEmptyMapping(v) {
		return dst, nil
	}
	start := len(dst)
	out, err := appendJSON(dst, v, 0)
	if err != nil {
		return dst, bodyErr(codec.BodyKindJSON, "marshal", err)
	}
	enc := out[start:]
	if len(enc) == 0 || enc[0] != '{' {
		return dst, bodyErr(codec.BodyKindJSON, "marshal", fmt.Errorf("%w: got %T", ErrNotMapping, v))
	}
	if len(enc) == 2 { // {}
		return dst, nil
	}
	return out, nil
}

// Unmarshal decodes the JSON object data into v.
func (b JSONBody) Unmarshal(data []byte, v any) error { return unmarshalMapping(b, data, v) }

func (JSONBody) emptyMap() []byte { return []byte("{}") }

// checkMapping leaves the checks to the decoders: scanJSON ranks invalid
// UTF-8 before a top level that is not an object.
func (JSONBody) checkMapping([]byte) error { return nil }

func (JSONBody) decodeMap(data []byte) (map[string]any, error) { return unmarshalJSONMap(data) }

func (JSONBody) decodeOrdered(data []byte) (OrderedMap, error) { return unmarshalJSONOrdered(data) }

func (JSONBody) decodeInto(data []byte, v any) error {
	if err := scanJSON(data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return malformed(err)
	}
	return nil
}

// scanJSON checks, without decoding, that data is valid UTF-8, starts
// (after white space) with an object, and does not nest deeper than
// MaxBodyDepth. Syntax is left to the decoder. It runs before encoding/json
// for other targets than the default ones, and decides the error class when
// the one-pass decoder (jsondec.go) fails.
func scanJSON(data []byte) error {
	if !utf8.Valid(data) {
		return malformedf("invalid UTF-8")
	}
	i := 0
	for i < len(data) && isJSONSpace(data[i]) {
		i++
	}
	if i == len(data) {
		return malformedf("no JSON value")
	}
	if data[i] != '{' {
		return ErrNotMapping
	}
	depth, inString := 0, false
	for ; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > MaxBodyDepth {
				return ErrBodyTooDeep
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// appendJSON appends the Python-compatible JSON of v (see JSONBody).
func appendJSON(dst []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendPyString(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case float32:
		return appendPyFloat(dst, float64(x), 32)
	case float64:
		return appendPyFloat(dst, x, 64)
	case json.Number:
		if !isJSONNumber(string(x)) {
			return dst, fmt.Errorf("%w: invalid json.Number %q", ErrUnsupportedValue, string(x))
		}
		return append(dst, x...), nil
	case *big.Int:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return x.Append(dst, 10), nil
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		if depth++; depth > MaxBodyDepth {
			return dst, ErrBodyTooDeep
		}
		var kb [16]string
		dst = append(dst, '{')
		for i, k := range sortedKeys(x, kb[:]) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendPyString(dst, k), ':')
			var err error
			if dst, err = appendJSON(dst, x[k], depth); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case map[string]string:
		if x == nil {
			return append(dst, "null"...), nil
		}
		var kb [16]string
		dst = append(dst, '{')
		for i, k := range sortedKeys(x, kb[:]) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendPyString(dst, k), ':')
			dst = appendPyString(dst, x[k])
		}
		return append(dst, '}'), nil
	case OrderedMap:
		if x == nil {
			return append(dst, "null"...), nil
		}
		if depth++; depth > MaxBodyDepth {
			return dst, ErrBodyTooDeep
		}
		dst = append(dst, '{')
		for i := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendPyString(dst, x[i].Key), ':')
			var err error
			if dst, err = appendJSON(dst, x[i].Value, depth); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		if depth++; depth > MaxBodyDepth {
			return dst, ErrBodyTooDeep
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSON(dst, e, depth); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case []string:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPyString(dst, e)
		}
		return append(dst, ']'), nil
	}
	return appendJSONFallback(dst, v)
}

// sortedKeys appends the keys of m to buf (a caller's stack array for
// small maps, so that nothing is allocated) and sorts them.
func sortedKeys[V any](m map[string]V, buf []string) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendJSONFallback encodes v with encoding/json and re-escapes the result
// as Python's ensure_ascii would.
func appendJSONFallback(dst []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, fmt.Errorf("%w: %w", ErrUnsupportedValue, err)
	}
	return appendASCII(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// appendASCII copies valid JSON text, escaping its non-ASCII characters
// and DEL (which can only occur inside strings) as \uXXXX.
func appendASCII(dst, js []byte) []byte {
	for i := 0; i < len(js); {
		c := js[i]
		if c < utf8.RuneSelf && c != 0x7f {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(js[i:])
		dst = appendU(dst, r)
		i += size
	}
	return dst
}

const lowerHex = "0123456789abcdef"

// appendU appends r as one \uXXXX escape or a surrogate pair of them.
func appendU(dst []byte, r rune) []byte {
	if r >= 0x10000 {
		r1, r2 := utf16.EncodeRune(r)
		return appendU(appendU(dst, r1), r2)
	}
	return append(dst, '\\', 'u',
		lowerHex[r>>12&0xf], lowerHex[r>>8&0xf], lowerHex[r>>4&0xf], lowerHex[r&0xf])
}

// appendPyString appends s as a JSON string the way Python's json.dumps
// does with ensure_ascii=True.
func appendPyString(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s)+2)
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		if pyPlain[s[i]] {
			j := i + 1
			for j < len(s) && pyPlain[s[j]] {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control characters and DEL
				dst = appendU(dst, rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		dst = appendU(dst, r) // invalid UTF-8 gives U+FFFD
		i += size
	}
	return append(dst, '"')
}

// pyPlain marks the bytes a Python JSON string holds as they are:
// printable ASCII but for '"' and '\\'.
var pyPlain = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendPyFloat appends f as Python's float repr: shortest round-trip
// digits; scientific notation when the decimal exponent is below -4 or at
// least 16, with a sign and two or more exponent digits; otherwise fixed
// notation that always has a fraction (".0").
func appendPyFloat(dst []byte, f float64, bitSize int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%w: %v is not valid JSON", ErrUnsupportedValue, f)
	}
	var scratch [32]byte
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, bitSize)
	exp := 0
	if i := bytes.IndexByte(e, 'e'); i >= 0 {
		exp, _ = strconv.Atoi(string(e[i+1:]))
	}
	if exp < -4 || exp >= 16 {
		return append(dst, e...), nil
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, bitSize)
	if bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, '.', '0')
	}
	return dst, nil
}

// isJSONNumber reports whether s is a JSON number literal.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}
