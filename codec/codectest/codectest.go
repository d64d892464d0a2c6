// Package codectest holds the checks every head codec must pass: random
// round trips, one sample per spec field, and the fuzz round trip. The random
// heads and samples are generated from the spec, so a new field is exercised
// by every codec without a hand edit.
package codectest

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/raet-go/raet/codec"
)

// Sample is a default head with one field set.
type Sample struct {
	Key     string // the field's two-letter key
	Bit     int    // its bit in the binary presence bitmap, or -1
	Leading bool   // always present in every encoding, so never marked
	Head    codec.Head
}

// Marker reports whether an encoded head shows the sample's field.
type Marker func(enc []byte, s Sample) bool

// Packet encodes h with c followed by bodyLen filler bytes, with the packet
// length patched in, as a packer does.
func Packet(c codec.Codec, h *codec.Head, bodyLen int) ([]byte, error) {
	h.PacketLength = 0
	b, err := c.Append(nil, h)
	if err != nil {
		return nil, err
	}
	n := len(b)
	for i := 0; i < bodyLen; i++ {
		b = append(b, byte(i))
	}
	if err := c.SetPacketLength(b[:n], len(b)); err != nil {
		return nil, err
	}
	h.PacketLength = uint32(len(b))
	return b, nil
}

// RoundTrip encodes n random heads with c, decodes them back and checks that
// every value survives.
func RoundTrip(t *testing.T, c codec.Codec, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(c.Kind()), 1))
	tooLong := 0
	for i := range n {
		h := RandomHead(r)
		pkt, err := Packet(c, &h, r.IntN(300))
		if errors.Is(err, codec.ErrTooLong) {
			tooLong++ // a text head of many large values; checked below
			continue
		}
		if err != nil {
			t.Fatalf("head %d: encode %+v: %v", i, h, err)
		}
		var got codec.Head
		hl, err := c.Decode(pkt, &got)
		if err != nil {
			t.Fatalf("head %d: decode %q: %v", i, pkt[:h.HeadLength], err)
		}
		if hl != int(h.HeadLength) || !got.Equal(&h) {
			t.Fatalf("head %d: round trip\n got %+v (hl %d)\nwant %+v", i, got, hl, h)
		}
	}
	if tooLong > n/10 {
		t.Errorf("%d of %d random heads were too long to encode", tooLong, n)
	}
}

// CheckSamples encodes each field sample, checks that the encoding carries the
// field (by mark) and that it decodes back to the same values.
func CheckSamples(t *testing.T, c codec.Codec, mark Marker) {
	t.Helper()
	samples := Samples()
	if len(samples) == 0 {
		t.Fatal("no samples")
	}
	var dflt codec.Head
	dflt.Reset()
	base, err := Packet(c, &dflt, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		h := s.Head
		pkt, err := Packet(c, &h, 0)
		if err != nil {
			t.Fatalf("%s: %v", s.Key, err)
		}
		switch {
		case s.Leading:
			if bytes.Equal(pkt, base) {
				t.Errorf("%s: encoding %q does not change with the field", s.Key, pkt)
			}
		case mark(base, s):
			t.Errorf("%s: the default head already shows the field", s.Key)
		case !mark(pkt, s):
			t.Errorf("%s: encoding %q does not carry the field", s.Key, pkt)
		}
		var got codec.Head
		if _, err := c.Decode(pkt, &got); err != nil {
			t.Fatalf("%s: decode: %v", s.Key, err)
		}
		if !got.Equal(&h) {
			t.Errorf("%s: got %+v want %+v", s.Key, got, h)
		}
	}
}

// FuzzDecode fuzzes c.Decode, seeded with encodings of random heads and of
// every sample. Whatever the decoder accepts must encode again and decode to
// the same values; whatever it refuses must be an *codec.Error.
func FuzzDecode(f *testing.F, c codec.Codec) {
	r := rand.New(rand.NewPCG(7, uint64(c.Kind())))
	for range 32 {
		h := RandomHead(r)
		if pkt, err := Packet(c, &h, r.IntN(8)); err == nil {
			f.Add(pkt)
		}
	}
	for _, s := range Samples() {
		h := s.Head
		if pkt, err := Packet(c, &h, 1); err == nil {
			f.Add(pkt)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var h codec.Head
		n, err := c.Decode(b, &h)
		if err != nil {
			var ce *codec.Error
			if !errors.As(err, &ce) || ce.Err == nil {
				t.Fatalf("error %v is not a *codec.Error with a reason", err)
			}
			return
		}
		if n <= 0 || n > len(b) || n > codec.MaxHeadSize || n != int(h.HeadLength) {
			t.Fatalf("Decode returned n=%d for %d bytes (hl %d)", n, len(b), h.HeadLength)
		}
		again := h
		pkt, err := Packet(c, &again, len(b)-n)
		if err != nil {
			if errors.Is(err, codec.ErrTooLong) && h.DateTime != 0 {
				return // a float may be written longer than it was read
			}
			t.Fatalf("re-encode of accepted %q: %v", b[:n], err)
		}
		var got codec.Head
		if _, err := c.Decode(pkt, &got); err != nil {
			t.Fatalf("decode of re-encoded %q: %v", pkt, err)
		}
		got.PacketLength, got.HeadLength = h.PacketLength, h.HeadLength
		if !got.Equal(&h) {
			t.Fatalf("round trip changed values\n got %+v\nwant %+v", got, h)
		}
	})
}
