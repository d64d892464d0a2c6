package pyjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	// What Python 3.11's json.dumps(s) writes.
	cases := map[string]string{
		"":                    `""`,
		"plain / <&>":         `"plain / <&>"`,
		"\"\\\b\f\n\r\t":      `"\"\\\b\f\n\r\t"`,
		"\x00\x01\x1f\x7f":    `"\u0000\u0001\u001f\u007f"`,
		"é€":                  `"\u00e9\u20ac"`,
		"😀":                   `"\ud83d\ude00"`,
		"\U0010ffff":          `"\udbff\udfff"`,
		"bad \xff utf-8 \xc0": `"bad \ufffd utf-8 \ufffd"`,
	}
	for in, want := range cases {
		if got := AppendString([]byte("x"), in); string(got) != "x"+want {
			t.Errorf("%q: got %s, want %s", in, got[1:], want)
		}
	}
}

func TestAppendASCII(t *testing.T) {
	in := []byte("{\"é\":[\"😀\x7f\",1]}")
	if got, want := string(AppendASCII(nil, in)), `{"\u00e9":["\ud83d\ude00\u007f",1]}`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestAppendFloat(t *testing.T) {
	// What Python 3.11's repr(float) writes; float32 values as the shortest
	// float32 digits (what the reference's msgpack float32 reads back as is
	// not at issue here: this is the JSON body's float32 rule).
	cases := []struct {
		f    float64
		bits int
		want string
	}{
		{0, 64, "0.0"}, {math.Copysign(0, -1), 64, "-0.0"}, {1, 64, "1.0"}, {-2.5, 64, "-2.5"},
		{1e15, 64, "1000000000000000.0"}, {9999999999999998, 64, "9999999999999998.0"},
		{1e16, 64, "1e+16"}, {1.5e300, 64, "1.5e+300"}, {0.001, 64, "0.001"}, {0.0001, 64, "0.0001"},
		{0.00001, 64, "1e-05"}, {math.Nextafter(0.0001, 0), 64, "9.999999999999999e-05"},
		{1.7976931348623157e308, 64, "1.7976931348623157e+308"}, {5e-324, 64, "5e-324"},
		{123.456, 64, "123.456"}, {1 / 3.0, 64, "0.3333333333333333"}, {2e-308, 64, "2e-308"},
		{float64(float32(0.1)), 32, "0.1"}, {float64(float32(1e-4)), 32, "0.0001"},
		{float64(float32(1e16)), 32, "1e+16"}, {float64(math.Nextafter32(1e16, 0)), 32, "9999999000000000.0"},
		{float64(math.Nextafter32(1e-4, 0)), 32, "9.999999e-05"},
	}
	for _, c := range cases {
		if got := string(AppendFloat(nil, c.f, c.bits)); got != c.want {
			t.Errorf("%v (%d bits): got %s, want %s", c.f, c.bits, got, c.want)
		}
	}
}

func TestScanNumber(t *testing.T) {
	cases := []struct {
		in      string
		n       int
		integer bool
	}{
		{"0", 1, true}, {"-0", 2, true}, {"123,", 3, true}, {"01", 1, true}, {"-12}", 3, true},
		{"1.5", 3, false}, {"1e5", 3, false}, {"1E+5 ", 4, false}, {"-1.5e-07x", 8, false},
		{"", 0, false}, {"-", 0, false}, {"+1", 0, false}, {".5", 0, false}, {"1.", 0, false},
		{"1.e5", 0, false}, {"1e", 0, false}, {"1e+", 0, false}, {"x", 0, false}, {"NaN", 0, false},
	}
	for _, c := range cases {
		n, integer := ScanNumber([]byte(c.in))
		if n != c.n || integer != c.integer {
			t.Errorf("%q: got %d %v, want %d %v", c.in, n, integer, c.n, c.integer)
		}
	}
	if !IsInt([]byte("-12")) || IsInt([]byte("12.0")) || IsInt([]byte("12 ")) || !IsNumber([]byte("1e3")) || IsNumber([]byte("1e3 ")) {
		t.Fatal("IsInt or IsNumber")
	}
}

// pyExponent is the rule as Python states it, from the decimal exponent of
// the shortest digits: AppendFloat's comparisons must agree with it.
func pyExponent(f float64, bits int) bool {
	e := strconv.FormatFloat(f, 'e', -1, bits)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	return exp < -4 || exp >= 16
}

// FuzzAppendFloat checks each float's text: Python's notation rule, a whole
// JSON number that is not an integer, and the same float read back.
func FuzzAppendFloat(f *testing.F) {
	for _, v := range []float64{0, 1, 1e-4, 1e16, 5e-324, math.MaxFloat64, 0.1, -1e-5} {
		f.Add(math.Float64bits(v))
		f.Add(math.Float64bits(math.Nextafter(v, 0)))
		f.Add(uint64(math.Float32bits(float32(v))))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		check := func(v float64, size int) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return
			}
			out := AppendFloat(nil, v, size)
			sci := bytes.IndexByte(out, 'e') >= 0
			if sci != pyExponent(v, size) {
				t.Fatalf("%v (%d bits): %s, wrong notation", v, size, out)
			}
			if n, integer := ScanNumber(out); n != len(out) || integer {
				t.Fatalf("%v (%d bits): %s scans as %d bytes, integer %v", v, size, out, n, integer)
			}
			back, err := strconv.ParseFloat(string(out), size)
			if err != nil || back != v || math.Signbit(back) != math.Signbit(v) {
				t.Fatalf("%v (%d bits): %s reads back as %v, %v", v, size, out, back, err)
			}
		}
		check(math.Float64frombits(bits), 64)
		check(float64(math.Float32frombits(uint32(bits))), 32)
	})
}

// FuzzScanNumber checks the scanner against encoding/json's grammar, on
// seeds from AppendFloat and integers.
func FuzzScanNumber(f *testing.F) {
	for _, v := range []float64{0, -1.5, 1e-7, 1e300, 123456789.25} {
		f.Add(AppendFloat(nil, v, 64))
	}
	for _, s := range []string{"0", "-0", "18446744073709551616", "1e", "01", "1.e5"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		n, integer := ScanNumber(s)
		if n > len(s) {
			t.Fatalf("length %d > %d", n, len(s))
		}
		// A lone number is valid JSON exactly when it scans whole.
		lone := len(s) > 0 && (s[0] == '-' || '0' <= s[0] && s[0] <= '9') && !IsSpace(s[len(s)-1]) && json.Valid(s)
		if lone != (n == len(s) && n > 0) {
			t.Fatalf("%q: scanned %d, json.Valid %v", s, n, json.Valid(s))
		}
		if n > 0 {
			if !json.Valid(s[:n]) {
				t.Fatalf("%q: prefix %q is no JSON", s, s[:n])
			}
			if integer != !bytes.ContainsAny(s[:n], ".eE") {
				t.Fatalf("%q: integer %v", s[:n], integer)
			}
		}
	})
}

// FuzzAppendString checks that what AppendString writes is printable ASCII
// and reads back (through encoding/json) as the string, with invalid UTF-8
// replaced.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x7f\n", "é€😀", "\xff\xc0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := AppendString(nil, s)
		for _, c := range out {
			if c < ' ' || c > '~' {
				t.Fatalf("%q: byte %#x in %s", s, c, out)
			}
		}
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%q: %s: %v", s, out, err)
		}
		if !utf8.ValidString(s) {
			return
		}
		if back != s {
			t.Fatalf("%q: read back %q", s, back)
		}
		// encoding/json escapes only what JSON requires; AppendASCII turns
		// that into Python's text.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if got := AppendASCII(nil, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))); !bytes.Equal(got, out) {
			t.Fatalf("%q: AppendASCII gives %s, AppendString %s", s, got, out)
		}
	})
}

// Special8 agrees with a byte-wise test on words built from the bytes
// around its boundaries, in all positions.
func TestSpecial8(t *testing.T) {
	special := func(c byte) bool { return c < ' ' || c == '"' || c == '\\' || c >= 0x7f }
	edge := []byte{0x00, 0x01, 0x1f, ' ', '!', '"', '#', '[', '\\', ']', 'x', 0x7e, 0x7f, 0x80, 0x81, 0x9f,
		0xa0, 0xa1, 0xdc, 0xff}
	rng := rand.New(rand.NewPCG(3, 4))
	var w [8]byte
	for range 1_000_000 {
		want := false
		for i := range w {
			if rng.IntN(3) == 0 {
				w[i] = edge[rng.IntN(len(edge))]
			} else {
				w[i] = byte(rng.IntN(256))
			}
			want = want || special(w[i])
		}
		if got := Special8(binary.LittleEndian.Uint64(w[:])); got != want {
			t.Fatalf("% x: got %v, want %v", w, got, want)
		}
	}
	for c := range 256 {
		for pos := range 8 {
			w = [8]byte{'x', 'x', 'x', 'x', 'x', 'x', 'x', 'x'}
			w[pos] = byte(c)
			if got := Special8(binary.LittleEndian.Uint64(w[:])); got != special(byte(c)) {
				t.Fatalf("% x: got %v", w, got)
			}
		}
	}
}

// BenchmarkAppendString appends strings that need no escape (the common
// body), of 64 B and 16 KiB, and one with an escape in every 16 bytes.
func BenchmarkAppendString(b *testing.B) {
	for _, tc := range []struct{ name, s string }{
		{"plain64", strings.Repeat("x", 64)},
		{"plain16KiB", strings.Repeat("x", 16<<10)},
		{"escapes16KiB", strings.Repeat("xxxxxxxxxxxxxx\"\n", 1<<10)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dst := make([]byte, 0, 2*len(tc.s)+2)
			b.SetBytes(int64(len(tc.s)))
			for b.Loop() {
				dst = AppendString(dst[:0], tc.s)
			}
		})
	}
}
