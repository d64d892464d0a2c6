package packet_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	mrand "math/rand/v2"
	"reflect"
	"testing"

	"github.com/raet-go/raet/codec"
	_ "github.com/raet-go/raet/codec/binary"
	_ "github.com/raet-go/raet/codec/json"
	"github.com/raet-go/raet/codec/native"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// pair is the two ends of a session: long-term signing keys and short-term
// box keys, with the coat and foot each end uses.
type pair struct {
	aSign, bSign keys.Signing
	aBox, bBox   keys.Box
}

func newPair(t testing.TB) *pair {
	t.Helper()
	p := &pair{aSign: keys.GenerateSigning(), bSign: keys.GenerateSigning()}
	var err error
	if p.aBox, err = keys.GenerateBox(); err != nil {
		t.Fatal(err)
	}
	if p.bBox, err = keys.GenerateBox(); err != nil {
		t.Fatal(err)
	}
	return p
}

// end is a's side towards b (packer and coat) and b's coat and foot for
// what a sends (b's foot resolves a's verify key for any de).
type end struct {
	pk    *packet.Packer
	coatA packet.Coat
	coatB packet.Coat
	footB packet.Foot
}

func (p *pair) packerA(t testing.TB, hk codec.HeadKind, ck codec.CoatKind, fk codec.FootKind) end {
	t.Helper()
	c, err := codec.Lookup(hk)
	if err != nil {
		t.Fatal(err)
	}
	var coatA, coatB packet.Coat = packet.NadaCoat{}, packet.NadaCoat{}
	if ck == codec.CoatKindNaCl {
		a, err := packet.NewNaClCoat((*[32]byte)(&p.aBox.Private), (*[32]byte)(&p.bBox.Public), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := packet.NewNaClCoat((*[32]byte)(&p.bBox.Private), (*[32]byte)(&p.aBox.Public), nil)
		if err != nil {
			t.Fatal(err)
		}
		coatA, coatB = a, b
	}
	var footA, footB packet.Foot = packet.NadaFoot{}, packet.NadaFoot{}
	switch fk {
	case codec.FootKindNaCl:
		ver := p.aSign.Verify
		footA = packet.NewNaClFoot((*[32]byte)(&p.aSign.Seed), nil)
		footB = packet.NewNaClFoot(nil, func(uint32) (*[32]byte, bool) { return (*[32]byte)(&ver), true })
	case codec.FootKindMAC:
		a, err := packet.NewMACFoot((*[32]byte)(&p.aBox.Private), (*[32]byte)(&p.bBox.Public))
		if err != nil {
			t.Fatal(err)
		}
		b, err := packet.NewMACFoot((*[32]byte)(&p.bBox.Private), (*[32]byte)(&p.aBox.Public))
		if err != nil {
			t.Fatal(err)
		}
		footA, footB = a, b
	}
	return end{pk: &packet.Packer{Codec: c, Foot: footA}, coatA: coatA, coatB: coatB, footB: footB}
}

func messageHead(bk codec.BodyKind) codec.Head {
	var h codec.Head
	h.Reset()
	h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = 0xca, 0x66, 2, 7
	h.BodyKind = bk
	return h
}

// sendMessage serializes and seals body and packs it as one packet or as
// segments, the way a messenger does.
func sendMessage(t testing.TB, e end, h codec.Head, body any) [][]byte {
	t.Helper()
	ser, err := packet.SerializerFor(h.BodyKind)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := ser.Marshal(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	coat, err := e.coatA.Seal(nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	h.CoatKind = codec.CoatKind(e.coatA.Kind())
	pk := e.pk
	segSize, count, err := pk.Segments(&h, len(coat))
	if err != nil {
		t.Fatal(err)
	}
	var pkts [][]byte
	for i := range count {
		hh := h
		pkt, err := pk.PackSegment(nil, &hh, coat, i, segSize, count)
		if err != nil {
			t.Fatalf("segment %d of %d: %v", i, count, err)
		}
		if len(pkt) > codec.MaxPacketSize {
			t.Fatalf("segment %d is %d bytes", i, len(pkt))
		}
		pkts = append(pkts, pkt)
	}
	return pkts
}

// receiveMessage parses and verifies every datagram, reassembles, opens and
// unmarshals: what a messengent does.
func receiveMessage(t testing.TB, pkts [][]byte, coat packet.Coat, foot packet.Foot, out any) {
	t.Helper()
	ra := packet.NewReassembler[int, uint32](nil)
	var whole []byte
	var bk codec.BodyKind
	complete := false
	for _, b := range pkts {
		var p packet.Packet
		if err := packet.Parse(b, &p); err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(foot); err != nil {
			t.Fatal(err)
		}
		bk = p.Head.BodyKind
		if p.Head.SegmentCount <= 1 && !p.Head.Segment() {
			whole, complete = append([]byte(nil), p.Coat...), true
			continue
		}
		got, _, err := ra.Add(0, p.Head.TransactionID, &p.Head, p.Coat)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			whole, complete = got, true
		}
	}
	if !complete {
		t.Fatal("message not reassembled")
	}
	plain, err := coat.Open(nil, whole)
	if err != nil {
		t.Fatal(err)
	}
	ser, err := packet.SerializerFor(bk)
	if err != nil {
		t.Fatal(err)
	}
	if err := ser.Unmarshal(plain, out); err != nil {
		t.Fatal(err)
	}
}

// Random bodies of 0 B to 5 MiB, every body kind, both coat kinds, all three
// head kinds, through pack → segment → shuffle → duplicate → reassemble →
// parse.
func TestMessageProperty(t *testing.T) {
	r := mrand.New(mrand.NewPCG(3, 4))
	p := newPair(t)
	sizes := []int{0, 1, 100, 900, 1024, 5000, 100_075, 1 << 20, 5 << 20}
	if testing.Short() {
		sizes = sizes[:6]
	}
	i := 0
	for _, hk := range []codec.HeadKind{codec.HeadKindRaet, codec.HeadKindJSON, codec.HeadKindBinary} {
		for _, ck := range []codec.CoatKind{codec.CoatKindNada, codec.CoatKindNaCl} {
			for _, bk := range []codec.BodyKind{codec.BodyKindJSON, codec.BodyKindRaw, codec.BodyKindMsgpack, codec.BodyKindCBOR} {
				size := sizes[i%len(sizes)]
				i++
				e := p.packerA(t, hk, ck, codec.FootKindNaCl)
				var body, got any
				if bk == codec.BodyKindRaw {
					raw := make([]byte, size)
					rand.Read(raw)
					body = raw
					got = new([]byte)
				} else {
					blob := make([]byte, size)
					rand.Read(blob)
					m := map[string]any{}
					if size > 0 {
						m["blob"] = hex.EncodeToString(blob)[:size]
						m["n"] = int64(size)
					}
					body = m
					got = new(map[string]any)
				}
				pkts := sendMessage(t, e, messageHead(bk), body)
				// Shuffle and duplicate some.
				r.Shuffle(len(pkts), func(a, b int) { pkts[a], pkts[b] = pkts[b], pkts[a] })
				for d := 0; d < len(pkts)/10; d++ {
					pkts = append(pkts, pkts[r.IntN(len(pkts))])
				}
				r.Shuffle(len(pkts), func(a, b int) { pkts[a], pkts[b] = pkts[b], pkts[a] })
				receiveMessage(t, pkts, e.coatB, e.footB, got)
				want := body
				if bk == codec.BodyKindRaw {
					if !bytes.Equal(*got.(*[]byte), body.([]byte)) {
						t.Fatalf("%v/%v/%v %d B: raw body differs", hk, ck, bk, size)
					}
					continue
				}
				if m := *got.(*map[string]any); len(m) != len(want.(map[string]any)) || (size > 0 && m["blob"] != want.(map[string]any)["blob"]) {
					t.Fatalf("%v/%v/%v %d B: body differs", hk, ck, bk, size)
				}
			}
		}
	}
}

// The §8.5 capture: a 100,075-byte coat behind a native head of 72 bytes
// went out as 117 segments of 861 bytes, the first 1012 bytes long.
func TestSegmentsMatchTheReference(t *testing.T) {
	p := newPair(t)
	pk := p.packerA(t, codec.HeadKindRaet, codec.CoatKindNaCl, codec.FootKindNaCl).pk
	h := messageHead(codec.BodyKindJSON)
	h.CoatKind = codec.CoatKindNaCl
	segSize, count, err := pk.Segments(&h, 100_075)
	if err != nil {
		t.Fatal(err)
	}
	if segSize != 861 || count != 117 {
		t.Fatalf("segments of %d, count %d; want 861, 117", segSize, count)
	}
	coat := make([]byte, 100_075)
	first, err := pk.PackSegment(nil, &h, coat, 0, segSize, count)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 1012 {
		t.Fatalf("first segment is %d bytes, want 1012", len(first))
	}
	want := "ri RAET\npl 03f4\nhl 57\nfg 08\nse ca\nde 66\nsi 2\nti 7\nsc 75\nml 186eb\nbk 1\nck 1\nfk 1\nfl 40\n\n"
	if string(first[:len(want)]) != want {
		t.Fatalf("first head %q", first[:len(want)])
	}
}

// The §4.1 (c) alive request parses, and its foot verifies with other's key.
func TestCapturedAliveParses(t *testing.T) {
	raw, _ := hex.DecodeString("726920524145540a706c20303039320a686c2035320a66672030300a706b20340a73652063610a64652036360a736920320a746920330a746b20340a626b20310a636b20310a666b20310a666c2034300a0a" +
		"e9243edbf4302dc4d453f40cfd1afe1facf95d1c62ebff3e88fd3526ad263e612dae7a061fe009acfd55e4fd4e32340c9b8fec9f0aec9c3b9033107cb1a4b303")
	var p packet.Packet
	if err := packet.Parse(raw, &p); err != nil {
		t.Fatal(err)
	}
	if p.Head.PacketKind != codec.PacketKindRequest || p.Head.TransactionKind != codec.TransactionKindAlive || len(p.Coat) != 0 || len(p.Foot) != 64 {
		t.Fatalf("parsed %+v coat %d foot %d", p.Head, len(p.Coat), len(p.Foot))
	}
	ver, _ := keys.ParseVerifyKey("516b4dd774b4eeabdc8b0b2a9e7392c6cc5a6573cc7f86715ebd62e2fa15a402")
	foot := packet.NewNaClFoot(nil, func(de uint32) (*[32]byte, bool) { return (*[32]byte)(&ver), de == 0x66 })
	if err := p.Verify(foot); err != nil {
		t.Fatal(err)
	}
	if !ed25519.Verify(ver.Ed25519(), append(append([]byte(nil), raw[:82]...), make([]byte, 64)...), raw[82:]) {
		t.Fatal("stdlib disagrees")
	}
}

// A tampered byte anywhere in a signed packet is rejected, and so is a foot
// of the wrong length.
func TestTamperedPacketsAreRejected(t *testing.T) {
	p := newPair(t)
	for _, fk := range []codec.FootKind{codec.FootKindNaCl, codec.FootKindMAC} {
		e := p.packerA(t, codec.HeadKindRaet, codec.CoatKindNaCl, fk)
		footB := e.footB
		pkts := sendMessage(t, e, messageHead(codec.BodyKindJSON), map[string]any{"subject": "hello", "n": 1})
		orig := pkts[0]
		for i := range orig {
			b := bytes.Clone(orig)
			b[i] ^= 0x01
			var pp packet.Packet
			if err := packet.Parse(b, &pp); err != nil {
				continue // the head no longer parses: rejected too
			}
			if err := pp.Verify(footB); err == nil {
				t.Fatalf("%v: flipping byte %d of %d went unnoticed", fk, i, len(orig))
			}
		}
		// fl that does not fit the foot kind.
		h := messageHead(codec.BodyKindJSON)
		h.FootKind, h.FootLength = fk, 10
		b, err := native.Codec{}.Append(nil, &h)
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, make([]byte, 10)...)
		if err := (native.Codec{}).SetPacketLength(b, len(b)); err != nil {
			t.Fatal(err)
		}
		var pp packet.Packet
		if err := packet.Parse(b, &pp); !errors.Is(err, packet.ErrFootKind) {
			t.Fatalf("%v: fl 10 parsed: %v", fk, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	p := newPair(f)
	for _, hk := range []codec.HeadKind{codec.HeadKindRaet, codec.HeadKindJSON, codec.HeadKindBinary} {
		for _, b := range sendMessage(f, p.packerA(f, hk, codec.CoatKindNaCl, codec.FootKindNaCl), messageHead(codec.BodyKindJSON), map[string]any{"a": "b"}) {
			f.Add(b)
		}
	}
	e := p.packerA(f, codec.HeadKindRaet, codec.CoatKindNaCl, codec.FootKindNaCl)
	coatB, footB := e.coatB, e.footB
	f.Fuzz(func(t *testing.T, b []byte) {
		var pp packet.Packet
		if err := packet.Parse(b, &pp); err != nil {
			var pe *packet.PacketError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(pp.Coat)+len(pp.Foot)+int(pp.Head.HeadLength) != len(b) {
			t.Fatal("slices do not add up")
		}
		_ = pp.Verify(footB) // must not panic
		if _, err := pp.Open(nil, coatB); err == nil && !reflect.DeepEqual(pp.Head.CoatKind, codec.CoatKindNaCl) && len(pp.Coat) > 0 {
			t.Fatal("opened with the wrong coat kind")
		}
	})
}
