package packet_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"golang.org/x/crypto/nacl/box"
)

// benchPath packs (seal, head, sign) and parses (parse, verify, open) one
// coated 1 KiB message packet, the way a messenger and a messengent do, into
// reused buffers.
func benchPath(b *testing.B, fk codec.FootKind) {
	p := newPair(b)
	e := p.packerA(b, codec.HeadKindRaet, codec.CoatKindNaCl, fk)
	e.pk.MaxPacketSize = 2048 // one packet for a 1 KiB body
	body := make([]byte, 1024)
	rand.Read(body)
	h := messageHead(codec.BodyKindRaw)
	h.CoatKind = codec.CoatKindNaCl
	coatBuf := make([]byte, 0, 2048)
	pktBuf := make([]byte, 0, 2048)
	plainBuf := make([]byte, 0, 2048)
	var pp packet.Packet
	var hh codec.Head
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		coat, err := e.coatA.Seal(coatBuf[:0], body)
		if err != nil {
			b.Fatal(err)
		}
		hh = h
		pkt, err := e.pk.Pack(pktBuf[:0], &hh, coat)
		if err != nil {
			b.Fatal(err)
		}
		if err := packet.Parse(pkt, &pp); err != nil {
			b.Fatal(err)
		}
		if err := pp.Verify(e.footB); err != nil {
			b.Fatal(err)
		}
		if _, err := pp.Open(plainBuf[:0], e.coatB); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPackParse compares the whole path with its raw crypto in the same
// run: "crypto" is box seal + open and Ed25519 sign + verify of the same
// sizes, with nothing else. The target: nacl within 10% of crypto;
// the MAC foot ≤ 3 µs.
func BenchmarkPackParse(b *testing.B) {
	b.Run("nacl", func(b *testing.B) { benchPath(b, codec.FootKindNaCl) })
	b.Run("mac", func(b *testing.B) { benchPath(b, codec.FootKindMAC) })
	b.Run("crypto", func(b *testing.B) {
		pubA, privA, _ := box.GenerateKey(rand.Reader)
		pubB, privB, _ := box.GenerateKey(rand.Reader)
		var kA, kB [32]byte
		box.Precompute(&kA, pubB, privA)
		box.Precompute(&kB, pubA, privB)
		_, sk, _ := ed25519.GenerateKey(rand.Reader)
		pk := sk.Public().(ed25519.PublicKey)
		body := make([]byte, 1024)
		var nonce [24]byte
		sealed := make([]byte, 0, 2048)
		opened := make([]byte, 0, 2048)
		signed := make([]byte, 72+1024+40+64)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			s := box.SealAfterPrecomputation(sealed[:0], body, &nonce, &kA)
			sig := ed25519.Sign(sk, signed)
			if !ed25519.Verify(pk, signed, sig) {
				b.Fatal("verify")
			}
			if _, ok := box.OpenAfterPrecomputation(opened[:0], s, &nonce, &kB); !ok {
				b.Fatal("open")
			}
		}
	})
}

// BenchmarkSegment1MiB segments a sealed 1 MiB message into signed packets
// and reassembles it from the parsed, verified packets.
func BenchmarkSegment1MiB(b *testing.B) {
	p := newPair(b)
	e := p.packerA(b, codec.HeadKindRaet, codec.CoatKindNaCl, codec.FootKindNaCl)
	body := make([]byte, 1<<20)
	rand.Read(body)
	coat, err := e.coatA.Seal(nil, body)
	if err != nil {
		b.Fatal(err)
	}
	h := messageHead(codec.BodyKindRaw)
	h.CoatKind = codec.CoatKindNaCl
	segSize, count, err := e.pk.Segments(&h, len(coat))
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 0, codec.MaxPacketSize)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ReportMetric(float64(count), "segments")
	for b.Loop() {
		ra := packet.NewReassembler[int, int](nil)
		var whole []byte
		for i := range count {
			hh := h
			pkt, err := e.pk.PackSegment(buf[:0], &hh, coat, i, segSize, count)
			if err != nil {
				b.Fatal(err)
			}
			var pp packet.Packet
			if err := packet.Parse(pkt, &pp); err != nil {
				b.Fatal(err)
			}
			if err := pp.Verify(e.footB); err != nil {
				b.Fatal(err)
			}
			if out, _, err := ra.Add(0, 1, &pp.Head, pp.Coat); err != nil {
				b.Fatal(err)
			} else if out != nil {
				whole = out
			}
		}
		if len(whole) != len(coat) {
			b.Fatalf("reassembled %d of %d", len(whole), len(coat))
		}
	}
}

// BenchmarkJSONUnmarshal decodes a 1 KiB body {"data":"xxx…"} (the road
// stack's typical payload) and a small body of mixed types, into the map
// and the ordered target.
func BenchmarkJSONUnmarshal(b *testing.B) {
	big := []byte(`{"data":"` + strings.Repeat("x", 1024-len(`{"data":""}`)) + `"}`)
	small, err := packet.JSONBody{}.Marshal(nil, packet.OrderedMap{
		{Key: "subject", Value: "hello main"}, {Key: "n", Value: 1}, {Key: "from", Value: "other"},
		{Key: "list", Value: []any{1, 2, 3}}, {Key: "ok", Value: true}, {Key: "f", Value: 1.5},
		{Key: "nested", Value: packet.OrderedMap{{Key: "k", Value: "é"}, {Key: "z", Value: nil}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	for _, in := range []struct {
		name string
		data []byte
	}{{"1KiB", big}, {"small", small}} {
		b.Run(in.name+"/map", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]any
				if err := (packet.JSONBody{}).Unmarshal(in.data, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/ordered", func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				var m packet.OrderedMap
				if err := (packet.JSONBody{}).Unmarshal(in.data, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJSONMarshal encodes the road stack's typical 1 KiB body
// {"data":"xxx…"} into a fresh buffer, as Send does.
func BenchmarkJSONMarshal(b *testing.B) {
	body := map[string]any{"data": strings.Repeat("x", 1024-len(`{"data":""}`))}
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (packet.JSONBody{}).Marshal(nil, body); err != nil {
			b.Fatal(err)
		}
	}
}
