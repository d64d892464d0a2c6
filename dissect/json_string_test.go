package dissect

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// appendString writes what encoding/json reads back as the string that
// json.Marshal writes (invalid UTF-8 as U+FFFD), without escaping <, >
// and &.
func TestAppendStringRoundTrip(t *testing.T) {
	cases := []string{"", "orders.>", "<b>&amp;</b>", "a\"b\\c", "\n\r\t\x00\x1f\x7f", "é€😀", "\u2028\u2029", "\xff\xfe", "a\xc3"}
	r := rand.New(rand.NewPCG(35, 1))
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		out := appendString(nil, s)
		var got, want string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: %s does not parse: %v", s, out, err)
		}
		m, _ := json.Marshal(s)
		if err := json.Unmarshal(m, &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%q: read back %q, want %q", s, got, want)
		}
		for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`} {
			if strings.Contains(string(out), esc) {
				t.Fatalf("%q: HTML escaped: %s", s, out)
			}
		}
	}
}
