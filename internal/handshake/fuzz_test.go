package handshake

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/raet-go/raet/keys"
)

// The fuzz targets open bodies with the golden keys, seeded with the golden
// bodies (which open) and variants of them. Any input must give a result or
// an *Error wrapping one of the sentinels, never a panic; a body that opens
// must be consistent with what was returned.

// fuzzBodies returns the golden hello, cookie and initiate and their oreo.
func fuzzBodies(f *testing.F) (p goldenParties, hello, cookie, initiate []byte, oreo Oreo) {
	p = loadGoldenParties(f)
	rnd := goldenRandom()
	var err error
	if hello, _, err = MakeHello(rnd, p.iShort, p.rLong.Public); err != nil {
		f.Fatal(err)
	}
	if cookie, oreo, err = MakeCookie(rnd, boxKey(p.rLong.Private, p.iShort.Public), p.rShort.Public, goldenSEID, goldenDEID); err != nil {
		f.Fatal(err)
	}
	if initiate, _, err = MakeInitiate(rnd, p.iShort, p.iLong, p.rShort.Public, p.rLong.Public, oreo, goldenFQDN); err != nil {
		f.Fatal(err)
	}
	return p, hello, cookie, initiate, oreo
}

// addVariants seeds f with body, a truncated and an extended copy, and
// copies with one byte changed in each region that starts at an offset in at.
func addVariants(f *testing.F, body []byte, at ...int) {
	f.Add(body)
	f.Add(body[:len(body)-1])
	f.Add(append(bytes.Clone(body), 0))
	f.Add([]byte{})
	for _, k := range at {
		b := bytes.Clone(body)
		b[k] ^= 0xff
		f.Add(b)
	}
}

func checkTyped(t *testing.T, err error, step Step) {
	t.Helper()
	var he *Error
	if !errors.As(err, &he) || he.Step != step {
		t.Fatalf("error %v is not an *Error of %s", err, step)
	}
	for _, s := range []error{ErrLength, ErrOpen, ErrMismatch, ErrKey} {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error %v wraps no sentinel", err)
}

func FuzzOpenHello(f *testing.F) {
	p, hello, _, _, _ := fuzzBodies(f)
	addVariants(f, hello, 0, 64, 96, 176)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, _, err := OpenHello(body, p.rLong.Private)
		if err != nil {
			checkTyped(t, err, StepHello)
			return
		}
		if len(body) != HelloSize || got != keys.PublicKey(body[64:96]) {
			t.Fatalf("accepted a %d-byte hello, returned %v", len(body), got)
		}
	})
}

func FuzzOpenCookie(f *testing.F) {
	p, _, cookie, _, oreo := fuzzBodies(f)
	addVariants(f, cookie, 0, 79, 80, 103)
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := OpenCookie(body, boxKey(p.iShort.Private, p.rLong.Public), goldenSEID, goldenDEID)
		if err != nil {
			checkTyped(t, err, StepCookie)
			return
		}
		// Only R's long-term key can make a cookie that opens; with a
		// fuzzer's input, it can only be the golden one.
		if !bytes.Equal(body, cookie) || c.Oreo != oreo || c.SEID != goldenSEID || c.DEID != goldenDEID {
			t.Fatalf("accepted %x as %+v", body, c)
		}
	})
}

func FuzzOpenInitiate(f *testing.F) {
	p, _, _, initiate, oreo := fuzzBodies(f)
	addVariants(f, initiate, 0, 32, 56, 200, 304)
	want := InitiateWant{IShortPub: p.iShort.Public, Oreo: oreo, ILongPub: p.iLong.Public, FQDN: goldenFQDN}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, _, err := OpenInitiate(body, p.rShort.Private, p.rLong.Private, want)
		if err != nil {
			checkTyped(t, err, StepInitiate)
			return
		}
		if !bytes.Equal(body, initiate) || in.ILongPub != p.iLong.Public || !in.FQDNMatch {
			t.Fatalf("accepted %x as %+v", body, in)
		}
	})
}

func FuzzParseKeyLog(f *testing.F) {
	p := loadGoldenParties(f)
	line := FormatKeyLog(p.iShort.Public, p.iShort.Private, p.rShort.Public)
	f.Add(line)
	f.Add("# comment\n\n" + line + strings.TrimSuffix(FormatKeyLog(p.rShort.Public, p.rShort.Private, p.iShort.Public), "\n"))
	f.Add(strings.ToUpper(line))
	f.Add(strings.ReplaceAll(line, " ", "\t  "))
	f.Add(strings.ReplaceAll(line, "\n", "\r\n"))
	f.Add(line[:100])
	f.Add("RAET_SESSION a b c\n")
	f.Add(strings.Repeat("x", maxKeyLogLine+1))
	f.Fuzz(func(t *testing.T, text string) {
		entries, err := ParseKeyLog(strings.NewReader(text))
		if err != nil {
			var ke *KeyLogError
			if !errors.As(err, &ke) || ke.Line < 1 {
				t.Fatalf("error %v is not a *KeyLogError with a line", err)
			}
			if strings.Contains(err.Error(), p.iShort.Private.Hex()) {
				t.Fatal("error message contains the private key")
			}
		}
		// Whatever was read reformats to lines that read back the same.
		var b strings.Builder
		for _, e := range entries {
			b.WriteString(FormatKeyLog(e.OurShortPub, e.OurShortPriv, e.TheirShortPub))
		}
		again, err := ParseKeyLog(strings.NewReader(b.String()))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("reformatted log: %d entries, %v; want %d", len(again), err, len(entries))
		}
		for k := range entries {
			if again[k] != entries[k] {
				t.Fatalf("entry %d changed on the round trip", k)
			}
		}
	})
}
