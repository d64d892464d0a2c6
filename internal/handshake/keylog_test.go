package handshake

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/raet-go/raet/keys"
)

func TestFormatKeyLog(t *testing.T) {
	p := loadGoldenParties(t)
	got := FormatKeyLog(p.iShort.Public, p.iShort.Private, p.rShort.Public)
	want := "RAET_SESSION ea798c24f06f4436d8adc1327ff28506fcfa4cfde84c7b37ff677d30935c9163 " +
		"211f3b713dfa4e8c79327b7a17a775eec955823d76af31047a5e0930eb0574f0 " +
		"799a4818ec3d54dae1fb3122cf2cd18c4a7aeb5f25a17fe33576730cbaf6be7a\n"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestParseKeyLog(t *testing.T) {
	p := loadGoldenParties(t)
	a := KeyLogEntry{p.iShort.Public, p.iShort.Private, p.rShort.Public}
	b := KeyLogEntry{p.rShort.Public, p.rShort.Private, p.iShort.Public}
	la := FormatKeyLog(a.OurShortPub, a.OurShortPriv, a.TheirShortPub)
	lb := FormatKeyLog(b.OurShortPub, b.OurShortPriv, b.TheirShortPub)
	for _, c := range []struct {
		name, text string
		want       []KeyLogEntry
	}{
		{"empty", "", nil},
		{"one", la, []KeyLogEntry{a}},
		{"two, comments and blanks", "# RAET key log\n\n" + la + "   \n\t# indented comment\n" + lb, []KeyLogEntry{a, b}},
		{"no final newline", la + strings.TrimSuffix(lb, "\n"), []KeyLogEntry{a, b}},
		{"CRLF", strings.ReplaceAll(la+lb, "\n", "\r\n"), []KeyLogEntry{a, b}},
		{"tabs and runs of spaces", strings.ReplaceAll(la, " ", " \t  "), []KeyLogEntry{a}},
		{"upper-case hex", "RAET_SESSION" + strings.ToUpper(strings.TrimPrefix(la, "RAET_SESSION")), []KeyLogEntry{a}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseKeyLog(strings.NewReader(c.text))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) || len(got) != len(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
			for k := range got {
				if got[k] != c.want[k] {
					t.Fatalf("entry %d: got %v, want %v", k, got[k], c.want[k])
				}
			}
		})
	}
}

func TestParseKeyLogErrors(t *testing.T) {
	p := loadGoldenParties(t)
	la := FormatKeyLog(p.iShort.Public, p.iShort.Private, p.rShort.Public)
	f := strings.Fields(la)
	for _, c := range []struct {
		name   string
		text   string
		line   int
		target error
	}{
		{"other label", "# c\n" + la + "CLIENT_RANDOM " + strings.Join(f[1:], " ") + "\n", 3, ErrKeyLogSyntax},
		{"three fields", "\n\n" + strings.Join(f[:3], " ") + "\n", 3, ErrKeyLogSyntax},
		{"five fields", la + la[:len(la)-1] + " extra\n", 2, ErrKeyLogSyntax},
		{"label only", "RAET_SESSION\n", 1, ErrKeyLogSyntax},
		{"short key", "RAET_SESSION " + f[1][:63] + " " + f[2] + " " + f[3], 1, keys.ErrLength},
		{"not hex", "RAET_SESSION " + f[1] + " " + f[2][:63] + "g " + f[3], 1, keys.ErrNotHex},
		{"their key bad", "RAET_SESSION " + f[1] + " " + f[2] + " " + f[3] + "00", 1, keys.ErrLength},
		{"pub and priv swapped", "RAET_SESSION " + f[2] + " " + f[1] + " " + f[3], 1, ErrMismatch},
		{"pub of another priv", "RAET_SESSION " + f[3] + " " + f[2] + " " + f[1], 1, ErrMismatch},
		{"comment after fields", strings.TrimSuffix(la, "\n") + " # note\n", 1, ErrKeyLogSyntax},
		{"too long", la + strings.Repeat("#", maxKeyLogLine+1) + "\n", 2, ErrKeyLogSyntax},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseKeyLog(strings.NewReader(c.text))
			var ke *KeyLogError
			if !errors.As(err, &ke) || ke.Line != c.line || !errors.Is(err, c.target) {
				t.Fatalf("error %v, want line %d wrapping %v", err, c.line, c.target)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("handshake: key log line %d: ", c.line)) {
				t.Fatalf("message %q", err)
			}
			if strings.Contains(strings.ToLower(err.Error()), f[2]) {
				t.Fatal("error message holds the private key")
			}
			if c.line > 1 && strings.HasPrefix(c.text, la) && len(got) != 1 {
				t.Fatalf("entries before the bad line: %d, want 1", len(got))
			}
		})
	}
	// A read error is reported with the line it interrupted.
	_, err := ParseKeyLog(iotest.TimeoutReader(strings.NewReader(la + la)))
	var ke *KeyLogError
	if !errors.As(err, &ke) || !errors.Is(err, iotest.ErrTimeout) {
		t.Fatalf("read error: %v", err)
	}
}

func TestKeyLogEntryRedacted(t *testing.T) {
	p := loadGoldenParties(t)
	e := KeyLogEntry{p.iShort.Public, p.iShort.Private, p.rShort.Public}
	for _, s := range []string{fmt.Sprint(e), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
		if strings.Contains(s, p.iShort.Private.Hex()) {
			t.Fatalf("%q shows the private key", s)
		}
	}
}
