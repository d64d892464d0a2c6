// Package pyjson holds the rules by which Python's json module writes JSON
// (json.dumps with the default ensure_ascii=True) and the strict JSON
// number syntax, in one place for the packages that must match the
// reference byte for byte: packet's json bodies, the keep's files and the
// JSON head codec. Nothing here allocates beyond the slices it appends to.
package pyjson

import (
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

const lowerHex = "0123456789abcdef"

// AppendString appends s as a JSON string the way Python's json.dumps
// writes it with ensure_ascii=True: '"' and '\\' and the five short
// control escapes (\b \f \n \r \t) as such; every other byte outside
// ' '..'~' (control characters, DEL, anything not ASCII) as \uXXXX with
// lowercase hex digits, characters beyond the BMP as a UTF-16 surrogate
// pair; '/' as it is. Invalid UTF-8 is written as \ufffd.
func AppendString(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s)+2)
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		j := i
		for len(s)-j >= 8 && !Special8(load8(s[j:])) {
			j += 8 // plain, eight at a time
		}
		for j < len(s) && plain[s[j]] {
			j++
		}
		if j > i {
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

// Special8 reports whether one of the 8 bytes in x is not plain (see
// plain): a quote, a backslash, a control character, DEL or not ASCII.
// Each difference sets the high bit of the bytes below its bound (and of
// bytes >= 0x80, which x flags anyway); a borrow into the next byte only
// starts at a byte that matches, so there are no false positives. A
// decoder, for which DEL is plain, takes it as one: it looks at such a
// word byte by byte.
func Special8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ctl := x - ones*' '
	quote := (x ^ ones*'"') - ones
	backslash := (x ^ ones*'\\') - ones
	del := (x ^ ones*0x7f) - ones
	return (ctl|quote|backslash|del|x)&highs != 0
}

// load8 is the first 8 bytes of s, little-endian (one load).
func load8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// plain marks the bytes a Python JSON string holds as they are: printable
// ASCII but for '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// AppendASCII appends the JSON text js, valid UTF-8, with its non-ASCII
// characters and DEL (which JSON allows only inside strings) escaped as
// AppendString escapes them: it turns the output of another JSON encoder
// that escapes only what JSON requires into what Python writes.
func AppendASCII(dst, js []byte) []byte {
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

// appendU appends r as one \uXXXX escape or a surrogate pair of them.
func appendU(dst []byte, r rune) []byte {
	if r >= 0x10000 {
		r1, r2 := utf16.EncodeRune(r)
		return appendU(appendU(dst, r1), r2)
	}
	return append(dst, '\\', 'u',
		lowerHex[r>>12&0xf], lowerHex[r>>8&0xf], lowerHex[r>>4&0xf], lowerHex[r&0xf])
}

// AppendFloat appends f as Python's float repr (and so json.dumps) writes
// it: the shortest digits that read back as the same float of bitSize bits
// (32 or 64); scientific notation, with a sign and at least two exponent
// digits (1e-05, 1.5e+16), when the decimal exponent is below -4 or at
// least 16; otherwise fixed notation that always has a fraction (1.0).
//
// f should be finite. Python writes NaN, Infinity and -Infinity, which are
// not JSON; callers refuse them (AppendFloat appends NaN, +Inf or -Inf).
func AppendFloat(dst []byte, f float64, bitSize int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return strconv.AppendFloat(dst, f, 'g', -1, 64)
	}
	// The shortest digits of f have a decimal exponent of 16 or more
	// exactly when |f| is at least the float nearest to 1e16, and one below
	// -4 exactly when |f| is below the float nearest to 1e-4 (rounding is
	// monotonic, and those two floats print as 1e+16 and 0.0001).
	a := math.Abs(f)
	var sci bool
	if bitSize == 32 {
		sci = a != 0 && (float32(a) < 1e-4 || float32(a) >= 1e16)
	} else {
		sci = a != 0 && (a < 1e-4 || a >= 1e16)
	}
	if sci {
		return strconv.AppendFloat(dst, f, 'e', -1, bitSize)
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, bitSize)
	for _, c := range dst[start:] {
		if c == '.' {
			return dst
		}
	}
	return append(dst, '.', '0')
}

// ScanNumber returns the length of the JSON number literal (RFC 8259: an
// optional minus, no leading zero, an optional fraction and exponent, each
// with at least one digit) at the start of s, and whether it is an integer
// (no fraction, no exponent), which is what Python writes for an int.
// n is 0 when s does not start with a whole literal: "1." and "1e" are not
// numbers, even though "1" would be.
func ScanNumber(s []byte) (n int, integer bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = skipDigits(s, i+1)
	default:
		return 0, false
	}
	integer = true
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return 0, false
		}
		i, integer = j, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := skipDigits(s, j)
		if k == j {
			return 0, false
		}
		i, integer = k, false
	}
	return i, integer
}

// NumberLen is the n of ScanNumber.
func NumberLen(s []byte) int {
	n, _ := ScanNumber(s)
	return n
}

// IsNumber reports whether s is exactly one JSON number literal.
func IsNumber(s []byte) bool {
	n, _ := ScanNumber(s)
	return n > 0 && n == len(s)
}

// IsInt reports whether s is exactly one JSON integer literal.
func IsInt(s []byte) bool {
	n, integer := ScanNumber(s)
	return integer && n > 0 && n == len(s)
}

func skipDigits(s []byte, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// IsSpace reports whether c is JSON white space.
func IsSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
