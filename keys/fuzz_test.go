package keys

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseHex checks every hex parser: no panic, an error for anything that is
// not exactly 64 hex digits, and for accepted input a lowercase Hex that equals
// the lowered input and parses back to the same key.
func FuzzParseHex(f *testing.F) {
	for _, v := range vectors {
		for _, s := range []string{v.sighex, v.verhex, v.prihex, v.pubhex} {
			if s != "" {
				f.Add(s)
				f.Add(strings.ToUpper(s))
				f.Add(s[:HexLen-1] + "x")
			}
		}
	}
	f.Add("")
	f.Add(strings.Repeat("0", HexLen+1))
	f.Fuzz(func(t *testing.T, s string) {
		valid := len(s) == HexLen
		for i := 0; valid && i < len(s); i++ {
			valid = isHexDigit(s[i])
		}
		for typ, parse := range parsers {
			got, err := parse(s)
			if !valid {
				if err == nil {
					t.Fatalf("%s: accepted invalid %q", typ, s)
				}
				if !errors.Is(err, ErrLength) && !errors.Is(err, ErrNotHex) {
					t.Fatalf("%s: untyped error %v", typ, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: rejected valid %q: %v", typ, s, err)
			}
			if got != strings.ToLower(s) {
				t.Fatalf("%s: Hex() = %q, want %q", typ, got, strings.ToLower(s))
			}
			again, err := parse(got)
			if err != nil || again != got {
				t.Fatalf("%s: reparse %q = %q, %v", typ, got, again, err)
			}
		}
	})
}
