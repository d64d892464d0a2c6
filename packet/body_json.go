package packet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/pyjson"
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
// map[string]string, OrderedMap, []any and []string, at any nesting.
// What JSON cannot carry, []byte, time.Time and CBOR tags, is
// ErrCannotCarry among those values, never a base64 or date string (Python
// refuses bytes and datetimes too). Any other value (a struct,
// json.Marshaler, ...) is encoded by encoding/json and then escaped the same
// way, so its strings match Python but the rest follows encoding/json (a
// float64 3.0 becomes 3, a []byte field base64). NaN and ±Inf are
// ErrUnsupportedValue (Python would write the non-JSON NaN or Infinity).
// Invalid UTF-8 in a string is written as \ufffd.
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
	out, err := appendJSON(dst, v, 0, false)
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
	for i < len(data) && pyjson.IsSpace(data[i]) {
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

// appendJSON appends the Python-compatible JSON of v (see JSONBody).
// lenient leaves what JSON cannot carry to encoding/json (base64 bytes,
// RFC 3339 times), for OrderedMap.MarshalJSON.
func appendJSON(dst []byte, v any, depth int, lenient bool) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return pyjson.AppendString(dst, x), nil
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
		return appendFloat(dst, float64(x), 32)
	case float64:
		return appendFloat(dst, x, 64)
	case json.Number:
		if !pyjson.IsNumber([]byte(x)) {
			return dst, fmt.Errorf("%w: invalid json.Number %q", ErrUnsupportedValue, string(x))
		}
		return append(dst, x...), nil
	case *big.Int:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return x.Append(dst, 10), nil
	case []byte, time.Time, cbor.Tag, cbor.RawTag:
		if lenient {
			break
		}
		if depth == 0 {
			return dst, fmt.Errorf("%w: got %T", ErrNotMapping, v)
		}
		return dst, carryError{fmt.Sprintf("a %T in json", v)}
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
			dst = append(pyjson.AppendString(dst, k), ':')
			var err error
			if dst, err = appendJSON(dst, x[k], depth, lenient); err != nil {
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
			dst = append(pyjson.AppendString(dst, k), ':')
			dst = pyjson.AppendString(dst, x[k])
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
			dst = append(pyjson.AppendString(dst, x[i].Key), ':')
			var err error
			if dst, err = appendJSON(dst, x[i].Value, depth, lenient); err != nil {
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
			if dst, err = appendJSON(dst, e, depth, lenient); err != nil {
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
			dst = pyjson.AppendString(dst, e)
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
	return pyjson.AppendASCII(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// appendFloat appends f as Python writes it (see pyjson.AppendFloat);
// NaN and the infinities, which Python writes as NaN and Infinity, are not
// JSON.
func appendFloat(dst []byte, f float64, bitSize int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%w: %v is not valid JSON", ErrUnsupportedValue, f)
	}
	return pyjson.AppendFloat(dst, f, bitSize), nil
}
