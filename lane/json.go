package lane

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/raet-go/raet/packet"
)

// decodeJSON decodes a JSON body into a map with the value types of
// packet.JSONBody (int64, uint64, float64, string, bool, nil, []any,
// map[string]any). It is a fast path for the reader goroutine: packet's
// decoder goes through encoding/json's streaming decoder, several times
// slower than a datagram round trip. It returns ok false, without a reason,
// for anything it does not handle (errors, big integers, lone surrogates,
// deep nesting), and the caller then asks packet.JSONBody, which decides.
// FuzzJSONBody checks that whenever it succeeds, packet agrees.
func decodeJSON(data []byte) (map[string]any, bool) {
	if len(data) == 0 {
		return map[string]any{}, true
	}
	if !utf8.Valid(data) {
		return nil, false
	}
	d := jsonDecoder{data: data}
	d.space()
	if d.i >= len(d.data) || d.data[d.i] != '{' {
		return nil, false
	}
	m, ok := d.object(1)
	if !ok {
		return nil, false
	}
	d.space()
	return m, d.i == len(d.data)
}

type jsonDecoder struct {
	data []byte
	i    int
	buf  []byte // scratch for strings with escapes
}

func (d *jsonDecoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// object decodes an object at d.i ('{'); depth counts it.
func (d *jsonDecoder) object(depth int) (map[string]any, bool) {
	if depth > packet.MaxBodyDepth {
		return nil, false
	}
	d.i++ // '{'
	m := make(map[string]any)
	d.space()
	if d.i < len(d.data) && d.data[d.i] == '}' {
		d.i++
		return m, true
	}
	for {
		if d.i >= len(d.data) || d.data[d.i] != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.space()
		if d.i >= len(d.data) || d.data[d.i] != ':' {
			return nil, false
		}
		d.i++
		d.space()
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		d.space()
		if d.i >= len(d.data) {
			return nil, false
		}
		switch d.data[d.i] {
		case ',':
			d.i++
			d.space()
		case '}':
			d.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (d *jsonDecoder) array(depth int) ([]any, bool) {
	if depth > packet.MaxBodyDepth {
		return nil, false
	}
	d.i++ // '['
	a := []any{}
	d.space()
	if d.i < len(d.data) && d.data[d.i] == ']' {
		d.i++
		return a, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.space()
		if d.i >= len(d.data) {
			return nil, false
		}
		switch d.data[d.i] {
		case ',':
			d.i++
			d.space()
		case ']':
			d.i++
			return a, true
		default:
			return nil, false
		}
	}
}

// value decodes the value at d.i, inside a container at depth.
func (d *jsonDecoder) value(depth int) (any, bool) {
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '"':
		return d.string()
	case c == '{':
		return d.object(depth + 1)
	case c == '[':
		return d.array(depth + 1)
	case c == 't':
		return true, d.literal("true")
	case c == 'f':
		return false, d.literal("false")
	case c == 'n':
		return nil, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, false
}

func (d *jsonDecoder) literal(s string) bool {
	if len(d.data)-d.i < len(s) || string(d.data[d.i:d.i+len(s)]) != s {
		return false
	}
	d.i += len(s)
	return true
}

// number decodes a number with the grammar of RFC 8259: integers as int64
// or uint64 (bigger ones go to the slow path), others as float64.
func (d *jsonDecoder) number() (any, bool) {
	start := d.i
	p := d.data
	if p[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(p) && p[d.i] >= '0' && p[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(p) && p[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return nil, false
	}
	isInt := true
	if d.i < len(p) && p[d.i] == '.' {
		d.i++
		isInt = false
		if digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(p) && (p[d.i] == 'e' || p[d.i] == 'E') {
		d.i++
		isInt = false
		if d.i < len(p) && (p[d.i] == '+' || p[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	s := string(p[start:d.i])
	if isInt {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return n, true
		}
		return nil, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// string decodes the string at d.i ('"').
func (d *jsonDecoder) string() (string, bool) {
	d.i++
	start := d.i
	p := d.data
	q := bytes.IndexByte(p[start:], '"')
	if q < 0 {
		return "", false
	}
	span := p[start : start+q]
	if plainString(span) >= 0 {
		return d.escaped(start)
	}
	d.i = start + q + 1
	return string(span), true
}

// escaped finishes a string with escapes that started at start.
func (d *jsonDecoder) escaped(start int) (string, bool) {
	p := d.data
	b := append(d.buf[:0], p[start:d.i]...)
	for d.i < len(p) {
		c := p[d.i]
		switch {
		case c == '"':
			d.i++
			d.buf = b
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			d.i++
			continue
		}
		if d.i+1 >= len(p) {
			return "", false
		}
		e := p[d.i+1]
		d.i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := d.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				// Only a well-formed pair; the rest is left to packet.
				if d.i+1 >= len(p) || p[d.i] != '\\' || p[d.i+1] != 'u' {
					return "", false
				}
				d.i += 2
				r2, ok := d.hex4()
				if !ok {
					return "", false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", false
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.data)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.i : d.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.i += 4
	return r, true
}

const (
	lsb  = 0x0101010101010101
	msb  = 0x8080808080808080
	bksl = '\\' * lsb
)

// plainString returns the index of the first byte of s that a JSON string
// cannot hold as it is (a backslash or a control character), or -1. It
// looks at eight bytes at a time.
func plainString(s []byte) int {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		y := x ^ bksl
		if ((x-0x20*lsb)&^x|(y-lsb)&^y)&msb != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '\\' {
			return i
		}
	}
	return -1
}
