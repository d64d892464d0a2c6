package packet

import (
	"encoding/binary"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/raet-go/raet/internal/pyjson"
)

// The JSON body decoder: one recursive-descent pass over the bytes that
// builds map[string]any or OrderedMap directly. It accepts what scanJSON
// followed by encoding/json (with UseNumber) accepts, with the same error
// class, and produces the same values: strict RFC 8259 syntax, valid UTF-8
// throughout, a lone or invalid \u surrogate decoded as U+FFFD (as
// encoding/json's unquote does), numbers as JSONBody documents. One
// difference: a number out of range is malformed even in the value of a
// duplicate key that a later one replaces, which the encoding/json-based
// map decoder (converting numbers after decoding) let through.

// unmarshalJSONMap decodes the JSON object data into a map[string]any.
func unmarshalJSONMap(data []byte) (map[string]any, error) {
	d := newJSONDecoder(data, false)
	var m map[string]any
	err := d.top()
	if err == nil {
		m = d.popMap(0)
	}
	d.release()
	if err != nil {
		return nil, jsonDecodeErr(data, err)
	}
	return m, nil
}

// unmarshalJSONOrdered decodes the JSON object data into an OrderedMap,
// nested objects included.
func unmarshalJSONOrdered(data []byte) (OrderedMap, error) {
	d := newJSONDecoder(data, true)
	var m OrderedMap
	err := d.top()
	if err == nil {
		m = d.popOrdered(0)
	}
	d.release()
	if err != nil {
		return nil, jsonDecodeErr(data, err)
	}
	return m, nil
}

// jsonDecodeErr gives the checks of scanJSON (invalid UTF-8 anywhere, not an
// object, nesting too deep anywhere) precedence over the decoder's error,
// which stops at the first fault, so that each input keeps the error class it
// had when scanJSON ran before the decoder. Only failures pay for the scan.
func jsonDecodeErr(data []byte, err error) error {
	if e := scanJSON(data); e != nil {
		return e
	}
	return err
}

// jsonDecoder holds the state of one decoding. The entries of the objects
// and the elements of the arrays being decoded are collected on two stacks
// (the innermost container's on top), so that each container is allocated
// once with its final size.
type jsonDecoder struct {
	data    []byte
	ordered bool   // nested objects become OrderedMap, not map[string]any
	kvs     []KV   // entries of the open objects
	vals    []any  // elements of the open arrays
	buf     []byte // a string being unescaped
}

var jsonDecoders = sync.Pool{New: func() any { return new(jsonDecoder) }}

// Stacks larger than this are not kept in the pool.
const maxPooledJSONStack = 4096

func newJSONDecoder(data []byte, ordered bool) *jsonDecoder {
	d := jsonDecoders.Get().(*jsonDecoder)
	d.data, d.ordered = data, ordered
	return d
}

// release resets d and returns it to the pool.
func (d *jsonDecoder) release() {
	d.reset()
	if cap(d.kvs) > maxPooledJSONStack || cap(d.vals) > maxPooledJSONStack || cap(d.buf) > 16*maxPooledJSONStack {
		return
	}
	jsonDecoders.Put(d)
}

// reset drops every reference into the input and decoded values (a failed
// decoding leaves entries on the stacks).
func (d *jsonDecoder) reset() {
	clear(d.kvs)
	clear(d.vals)
	d.kvs, d.vals, d.data = d.kvs[:0], d.vals[:0], nil
}

// top decodes the whole input, an object and optional white space around
// it, leaving the object's entries on d.kvs.
func (d *jsonDecoder) top() error {
	data := d.data
	i := skipJSONSpace(data, 0)
	if i == len(data) {
		return malformedf("no JSON value")
	}
	if data[i] != '{' {
		return ErrNotMapping
	}
	i, err := d.members(i+1, 1)
	if err != nil {
		return err
	}
	if i = skipJSONSpace(data, i); i != len(data) {
		return malformedf("data after the JSON object at offset %d", i)
	}
	return nil
}

func skipJSONSpace(data []byte, i int) int {
	for i < len(data) && pyjson.IsSpace(data[i]) {
		i++
	}
	return i
}

// syntaxErr reports an unexpected byte (or the end of the input) at i.
func (d *jsonDecoder) syntaxErr(i int, context string) error {
	if i >= len(d.data) {
		return malformedf("unexpected end of JSON input %s", context)
	}
	return malformedf("invalid character %q at offset %d %s", d.data[i], i, context)
}

// value decodes the value at i (white space already skipped) inside a
// container at depth and returns it with the offset after it.
func (d *jsonDecoder) value(i, depth int) (any, int, error) {
	data := d.data
	if i >= len(data) {
		return nil, i, d.syntaxErr(i, "looking for a value")
	}
	switch c := data[i]; c {
	case '"':
		return d.str(i + 1)
	case '{':
		if depth >= MaxBodyDepth {
			return nil, i, ErrBodyTooDeep
		}
		base := len(d.kvs)
		j, err := d.members(i+1, depth+1)
		if err != nil {
			return nil, j, err
		}
		if d.ordered {
			return d.popOrdered(base), j, nil
		}
		return d.popMap(base), j, nil
	case '[':
		if depth >= MaxBodyDepth {
			return nil, i, ErrBodyTooDeep
		}
		return d.array(i+1, depth+1)
	case 't':
		if len(data)-i >= 4 && string(data[i:i+4]) == "true" {
			return true, i + 4, nil
		}
	case 'f':
		if len(data)-i >= 5 && string(data[i:i+5]) == "false" {
			return false, i + 5, nil
		}
	case 'n':
		if len(data)-i >= 4 && string(data[i:i+4]) == "null" {
			return nil, i + 4, nil
		}
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return d.number(i)
		}
	}
	return nil, i, d.syntaxErr(i, "looking for a value")
}

// members decodes the members of the object whose '{' is at i-1 onto d.kvs
// and returns the offset after its '}'.
func (d *jsonDecoder) members(i, depth int) (int, error) {
	data := d.data
	if i = skipJSONSpace(data, i); i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return i, d.syntaxErr(i, "looking for an object key")
		}
		key, j, err := d.str(i + 1)
		if err != nil {
			return j, err
		}
		if i = skipJSONSpace(data, j); i >= len(data) || data[i] != ':' {
			return i, d.syntaxErr(i, "after an object key")
		}
		val, j, err := d.value(skipJSONSpace(data, i+1), depth)
		if err != nil {
			return j, err
		}
		d.kvs = append(d.kvs, KV{key, val})
		if i = skipJSONSpace(data, j); i < len(data) {
			switch data[i] {
			case ',':
				i = skipJSONSpace(data, i+1)
				continue
			case '}':
				return i + 1, nil
			}
		}
		return i, d.syntaxErr(i, "after an object value")
	}
}

// popMap builds a map from the entries on d.kvs from base on (the last of
// duplicate keys wins) and pops them.
func (d *jsonDecoder) popMap(base int) map[string]any {
	kvs := d.kvs[base:]
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	clear(kvs)
	d.kvs = d.kvs[:base]
	return m
}

// popOrdered builds an OrderedMap from the entries on d.kvs from base on
// (with orderedBuilder's rule for duplicate keys) and pops them.
func (d *jsonDecoder) popOrdered(base int) OrderedMap {
	kvs := d.kvs[base:]
	b := orderedBuilder{m: make(OrderedMap, 0, len(kvs))}
	for _, kv := range kvs {
		b.set(kv.Key, kv.Value)
	}
	clear(kvs)
	d.kvs = d.kvs[:base]
	return b.m
}

// array decodes the elements of the array whose '[' is at i-1, the
// elements being at depth, and returns the offset after its ']'.
func (d *jsonDecoder) array(i, depth int) (any, int, error) {
	data := d.data
	if i = skipJSONSpace(data, i); i < len(data) && data[i] == ']' {
		return []any{}, i + 1, nil
	}
	base := len(d.vals)
	for {
		val, j, err := d.value(i, depth)
		if err != nil {
			return nil, j, err
		}
		d.vals = append(d.vals, val)
		if i = skipJSONSpace(data, j); i < len(data) {
			switch data[i] {
			case ',':
				i = skipJSONSpace(data, i+1)
				continue
			case ']':
				arr := make([]any, len(d.vals)-base)
				copy(arr, d.vals[base:])
				clear(d.vals[base:])
				d.vals = d.vals[:base]
				return arr, i + 1, nil
			}
		}
		return nil, i, d.syntaxErr(i, "after an array element")
	}
}

// number decodes the number at i: a literal without fraction or exponent is
// an integer (see intFromString), anything else a float64.
func (d *jsonDecoder) number(i int) (any, int, error) {
	data := d.data
	n, integer := pyjson.ScanNumber(data[i:])
	if n == 0 {
		return nil, i, d.syntaxErr(i, "in a number")
	}
	lit := data[i : i+n]
	if integer {
		digits := lit
		if digits[0] == '-' {
			digits = digits[1:]
		}
		if len(digits) <= 18 { // fits int64
			var v int64
			for _, c := range digits {
				v = v*10 + int64(c-'0')
			}
			if len(digits) != n {
				v = -v
			}
			return v, i + n, nil
		}
		v, err := intFromString(string(lit))
		return v, i + n, err
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return nil, i + n, malformedf("number %q at offset %d out of range", lit, i)
	}
	return f, i + n, nil
}

// str decodes the string whose opening quote is at i-1 and returns it with
// the offset after its closing quote.
func (d *jsonDecoder) str(i int) (string, int, error) {
	data := d.data
	start := i
	for {
		for len(data)-i >= 8 && !pyjson.Special8(binary.LittleEndian.Uint64(data[i:])) {
			i += 8
		}
		if i >= len(data) {
			return "", i, d.syntaxErr(i, "in a string")
		}
		switch c := data[i]; {
		case c == '"':
			return string(data[start:i]), i + 1, nil
		case c == '\\':
			return d.strEscaped(start, i)
		case c < ' ':
			return "", i, d.syntaxErr(i, "in a string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return "", i, malformedf("invalid UTF-8 at offset %d", i)
			}
			i += size
		}
	}
}

// jsonPlain marks the bytes that a string holds as they are.
var jsonPlain = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// strEscaped continues str at the first backslash, at i, of the string
// whose contents start at start.
func (d *jsonDecoder) strEscaped(start, i int) (string, int, error) {
	data := d.data
	buf := append(d.buf[:0], data[start:i]...)
	for i < len(data) {
		j := i
		for j < len(data) && jsonPlain[data[j]] {
			j++
		}
		buf = append(buf, data[i:j]...)
		if i = j; i >= len(data) {
			break
		}
		switch c := data[i]; {
		case c == '"':
			d.buf = buf // keep the grown buffer
			return string(buf), i + 1, nil
		case c == '\\':
			if i+1 >= len(data) {
				return "", i + 1, d.syntaxErr(i+1, "in a string escape")
			}
			switch e := data[i+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r := jsonHex4(data, i+2)
				if r < 0 {
					return "", i, malformedf("invalid \\u escape at offset %d", i)
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// As encoding/json: a pair only if a valid \u escape
					// follows at once; else U+FFFD, and what follows is
					// decoded on its own.
					next := rune(-1)
					if len(data)-i >= 2 && data[i] == '\\' && data[i+1] == 'u' {
						next = jsonHex4(data, i+2)
					}
					if dec := utf16.DecodeRune(r, next); dec != utf8.RuneError {
						buf = utf8.AppendRune(buf, dec)
						i += 6
						continue
					}
					r = utf8.RuneError
				}
				buf = utf8.AppendRune(buf, r)
				continue
			default:
				return "", i + 1, d.syntaxErr(i+1, "in a string escape")
			}
			i += 2
		case c < ' ':
			return "", i, d.syntaxErr(i, "in a string")
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				return "", i, malformedf("invalid UTF-8 at offset %d", i)
			}
			buf = append(buf, data[i:i+size]...)
			i += size
		}
	}
	return "", i, d.syntaxErr(i, "in a string")
}

// jsonHex4 returns the value of the 4 hex digits at data[i:], or -1.
func jsonHex4(data []byte, i int) rune {
	if len(data)-i < 4 {
		return -1
	}
	var r rune
	for _, c := range data[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
