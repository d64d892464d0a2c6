// Package wire holds the small value formatters and scanners that the
// generated head codecs share. Nothing here allocates.
package wire

import (
	"math"
	"strconv"
)

const hexDigits = "0123456789abcdef"

// AppendHex appends v as lowercase hex without padding.
func AppendHex(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 16) }

// AppendHexFixed appends the low width hex digits of v, zero padded.
func AppendHexFixed(b []byte, v uint64, width int) []byte {
	for i := width - 1; i >= 0; i-- {
		b = append(b, hexDigits[(v>>(4*uint(i)))&0xf])
	}
	return b
}

// PutHexFixed writes v as len(dst) lowercase hex digits, zero padded.
func PutHexFixed(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = hexDigits[v&0xf]
		v >>= 4
	}
}

// FitsHex reports whether v fits in width hex digits.
func FitsHex(v uint64, width int) bool {
	return width >= 16 || v < 1<<(4*uint(width))
}

// ParseHex parses 1 to 16 hex digits (either case) into a value of at most
// bits bits. It returns the index of the first bad byte on failure, or
// len(s) when s is empty or the value overflows.
func ParseHex(s []byte, bits int) (uint64, int) {
	if len(s) == 0 {
		return 0, 0
	}
	var v uint64
	for i, c := range s {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, i
		}
		if v>>(uint(bits)-4) != 0 {
			return 0, i
		}
		v = v<<4 | uint64(d)
	}
	return v, -1
}

// ParseDecimal parses a JSON non-negative integer (no sign, no leading zero,
// no fraction or exponent) of at most bits bits. It returns the index of the
// first bad byte on failure, or len(s) on overflow.
func ParseDecimal(s []byte, bits int) (uint64, int) {
	if len(s) == 0 {
		return 0, 0
	}
	if s[0] == '0' && len(s) > 1 {
		return 0, 1
	}
	var v uint64
	max := uint64(math.MaxUint64)
	if bits < 64 {
		max = 1<<uint(bits) - 1
	}
	for i, c := range s {
		if c < '0' || c > '9' {
			return 0, i
		}
		d := uint64(c - '0')
		if v > (max-d)/10 {
			return 0, i
		}
		v = v*10 + d
	}
	return v, -1
}

// ScanDecimal returns the length of the run of ASCII digits at the start of s.
func ScanDecimal(s []byte) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// ParseFloat parses a float written by AppendFloat6 or pyjson.AppendFloat, or any
// decimal float. ok is false for anything else, including NaN and infinities
// spelt out.
func ParseFloat(s []byte) (float64, bool) {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E') {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(string(s), 64)
	return f, err == nil
}

// ParseFloat6 parses a float written as Python's "%f" (and AppendFloat6)
// writes it: an optional minus, digits, a point and exactly six decimals.
// Nothing else is accepted, so what it accepts is written back the same.
func ParseFloat6(s []byte) (float64, bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	d := ScanDecimal(s[i:])
	if d == 0 || d > 300 || len(s) != i+d+7 || s[i+d] != '.' || ScanDecimal(s[i+d+1:]) != 6 {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(s), 64)
	return f, err == nil
}

// AppendFloat6 appends f as Python's "%f" does: six decimals.
func AppendFloat6(b []byte, f float64) []byte { return strconv.AppendFloat(b, f, 'f', 6, 64) }

// NonASCII returns the index of the first byte of s that is not 7-bit
// ASCII, or -1.
func NonASCII(s []byte) int {
	for i, c := range s {
		if c >= 0x80 {
			return i
		}
	}
	return -1
}
