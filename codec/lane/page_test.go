package lane

import (
	"bytes"
	"errors"
	"testing"

	"github.com/raet-go/raet/codec"
)

// The page captured from the reference (raet-protocol.md §11).
const capturedHead = "ri RAET\nvn 0\npk 0\nsn alpha\ndn beta\nsi 661752e96abf6110ed\nbi 1\npn 0000\npc 0001\n\n"
const capturedBody = `{"subject":"lane hello","n":1}`

func capturedValues() Head {
	var h Head
	h.Reset()
	h.PackKind = codec.PackKindJSON
	h.Source, h.Destination, h.SessionID = "alpha", "beta", "661752e96abf6110ed"
	h.BookID = 1
	return h
}

func TestCapturedPage(t *testing.T) {
	h := capturedValues()
	enc, err := Append(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	if string(enc) != capturedHead {
		t.Fatalf("encoded %q\nwant    %q", enc, capturedHead)
	}
	var got Head
	n, err := Decode([]byte(capturedHead+capturedBody), &got)
	if err != nil {
		t.Fatal(err)
	}
	if n != len(capturedHead) || got != h {
		t.Fatalf("decoded n=%d %+v, want n=%d %+v", n, got, len(capturedHead), h)
	}
}

func TestBadPageHeads(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		field    string
		want     error
	}{
		{"not a page", "hello\n\n", "ri", codec.ErrPrefix},
		{"no terminator", "ri RAET\nvn 0\npk 0", "", codec.ErrShort},
		{"missing field", "ri RAET\nvn 0\npk 0\nsn a\ndn b\nsi 661752e96abf6110ed\nbi 1\npn 0000\n\n", "pc", codec.ErrMissing},
		{"duplicate", "ri RAET\nvn 0\nvn 0\n\n", "vn", codec.ErrDuplicateKey},
		{"unknown key", "ri RAET\nzz 0\n\n", "", codec.ErrUnknownKey},
		{"two spaces", "ri RAET\nsn a b\n\n", "", codec.ErrSyntax},
		{"short si", "ri RAET\nsi 6617\n\n", "si", codec.ErrValue},
		{"bad hex", "ri RAET\nbi 1g\n\n", "bi", codec.ErrValue},
		{"non-ASCII", "ri RAET\nsn \xc3\xa9\n\n", "", codec.ErrNonASCII},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Head
			_, err := Decode([]byte(tc.in), &h)
			var le *Error
			if !errors.As(err, &le) || !errors.Is(err, tc.want) || le.Field != tc.field {
				t.Fatalf("got %v (%#v), want %v in field %q", err, le, tc.want, tc.field)
			}
		})
	}
}

func TestAppendRefusesBadStrings(t *testing.T) {
	for _, mod := range []func(*Head){
		func(h *Head) { h.Source = "has space" },
		func(h *Head) { h.Destination = "" },
		func(h *Head) { h.SessionID = "short" },
		func(h *Head) { h.Source = "new\nline" },
	} {
		h := capturedValues()
		mod(&h)
		if _, err := Append(nil, &h); !errors.Is(err, codec.ErrValue) {
			t.Errorf("%+v: got %v, want ErrValue", h, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(capturedHead + capturedBody))
	h := capturedValues()
	h.PageNumber, h.PageCount, h.BookID, h.PackKind = 2, 3, 0xffffffff, codec.PackKindPack
	enc, _ := Append(nil, &h)
	f.Add(enc)
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Head
		n, err := Decode(b, &h)
		if err != nil {
			var le *Error
			if !errors.As(err, &le) {
				t.Fatalf("error %v is not a *lane.Error", err)
			}
			return
		}
		if n > len(b) || !bytes.HasSuffix(b[:n], []byte(terminator)) {
			t.Fatalf("Decode returned n=%d for %d bytes", n, len(b))
		}
		enc, err := Append(nil, &h)
		if err != nil {
			t.Fatalf("accepted %q but cannot re-encode %+v: %v", b[:n], h, err)
		}
		var again Head
		if _, err := Decode(enc, &again); err != nil || again != h {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, h)
		}
	})
}
