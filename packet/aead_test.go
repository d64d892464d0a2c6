package packet

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/nacl/box"

	"github.com/raet-go/raet/codec"
	_ "github.com/raet-go/raet/codec/binary"
	"github.com/raet-go/raet/internal/replay"
)

var aeadKinds = []codec.CoatKind{codec.CoatKindAES256GCM, codec.CoatKindChaCha20Poly1305}

// aeadPair returns the AEAD coats of the two ends of the §7.4 session:
// a is other's coat for main, b main's coat for other.
func aeadPair(tb testing.TB, kind codec.CoatKind) (a, b *AEADCoat) {
	tb.Helper()
	a, err := NewAEADCoat(kind, key32(tb, otherShortPriHex), key32(tb, mainShortPubHex))
	if err != nil {
		tb.Fatal(err)
	}
	b, err = NewAEADCoat(kind, key32(tb, mainShortPriHex), key32(tb, otherShortPubHex))
	if err != nil {
		tb.Fatal(err)
	}
	return a, b
}

// aeadHead is a binary message head from other (0xca) to main (de 0x66).
func aeadHead() codec.Head {
	var h codec.Head
	h.Reset()
	h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = 0xca, 0x66, 2, 7
	h.BodyKind = codec.BodyKindJSON
	return h
}

func aeadPacker(tb testing.TB) *Packer {
	tb.Helper()
	c, err := codec.Lookup(codec.HeadKindBinary)
	if err != nil {
		tb.Fatal(err)
	}
	return &Packer{Codec: c, Foot: NadaFoot{}, MaxPacketSize: 65507}
}

// sealPacket packs one AEAD packet of body from a.
func sealPacket(tb testing.TB, pk *Packer, a *AEADCoat, body []byte) []byte {
	tb.Helper()
	h := aeadHead()
	pkt, err := pk.PackAEAD(nil, &h, a, body)
	if err != nil {
		tb.Fatal(err)
	}
	return pkt
}

// openPacket parses pkt and opens its coat with b.
func openPacket(pkt []byte, b *AEADCoat) ([]byte, error) {
	var p Packet
	if err := Parse(pkt, &p); err != nil {
		return nil, err
	}
	return p.OpenAEAD(nil, b)
}

// TestAEADCoatKeys checks the key schedule against a derivation written out
// here from the documented formula: the first packet of other to main, as
// opened by a plain cipher.AEAD keyed that way.
func TestAEADCoatKeys(t *testing.T) {
	labels := map[codec.CoatKind]string{
		codec.CoatKindAES256GCM:        "raet-go aead coat v1 aes-256-gcm",
		codec.CoatKindChaCha20Poly1305: "raet-go aead coat v1 chacha20-poly1305",
	}
	for _, kind := range aeadKinds {
		t.Run(kind.String(), func(t *testing.T) {
			a, _ := aeadPair(t, kind)
			var s [32]byte
			box.Precompute(&s, key32(t, mainShortPubHex), key32(t, otherShortPriHex))
			info := labels[kind] + "\x00" + string(key32(t, otherShortPubHex)[:]) + string(key32(t, mainShortPubHex)[:])
			okm, err := hkdf.Key(sha256.New, s[:], nil, info, 44)
			if err != nil {
				t.Fatal(err)
			}
			var aead cipher.AEAD
			if kind == codec.CoatKindAES256GCM {
				blk, _ := aes.NewCipher(okm[:32])
				aead, _ = cipher.NewGCM(blk)
			} else {
				aead, _ = chacha20poly1305.New(okm[:32])
			}
			head := []byte("a head")
			for n := range uint64(3) {
				coat, err := a.Seal(nil, head, []byte("body"))
				if err != nil {
					t.Fatal(err)
				}
				if got := binary.BigEndian.Uint64(coat); got != n {
					t.Fatalf("counter %d, want %d", got, n)
				}
				nonce := bytes.Clone(okm[32:])
				for i := range 8 {
					nonce[4+i] ^= coat[i]
				}
				plain, err := aead.Open(nil, nonce, coat[AEADCounterSize:], head)
				if err != nil || string(plain) != "body" {
					t.Fatalf("packet %d under the documented keys: %q, %v", n, plain, err)
				}
			}
		})
	}
}

func TestAEADCoatRoundTrip(t *testing.T) {
	pk := aeadPacker(t)
	for _, kind := range aeadKinds {
		t.Run(kind.String(), func(t *testing.T) {
			a, b := aeadPair(t, kind)
			if a.Kind() != kind || a.Overhead() != AEADOverhead {
				t.Fatal("kind or overhead")
			}
			for _, size := range []int{0, 1, 64, 1024, 16384} {
				body := bytes.Repeat([]byte{byte(size)}, size)
				pkt := sealPacket(t, pk, a, body)
				var p Packet
				if err := Parse(pkt, &p); err != nil {
					t.Fatal(err)
				}
				if p.Head.CoatKind != kind || p.Head.FootKind != codec.FootKindNada || len(p.Foot) != 0 ||
					len(p.Coat) != size+AEADOverhead || int(p.Head.PacketLength) != len(pkt) {
					t.Fatalf("size %d: head %+v, coat %d, foot %d", size, p.Head, len(p.Coat), len(p.Foot))
				}
				got, err := p.OpenAEAD(nil, b)
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("size %d: %v", size, err)
				}
			}
			// The other direction: b's packets open at a.
			pkt := sealPacket(t, pk, b, []byte("back"))
			if got, err := openPacket(pkt, a); err != nil || string(got) != "back" {
				t.Fatalf("b to a: %q, %v", got, err)
			}
		})
	}
}

// TestAEADCoatTamper flips every bit of a packet, head and coat, one at a
// time: none opens, and the packet itself still opens afterwards (refused
// packets do not move the window).
func TestAEADCoatTamper(t *testing.T) {
	pk := aeadPacker(t)
	for _, kind := range aeadKinds {
		t.Run(kind.String(), func(t *testing.T) {
			a, b := aeadPair(t, kind)
			pkt := sealPacket(t, pk, a, []byte(`{"route":"x","content":"hello"}`))
			for i := range len(pkt) * 8 {
				bad := bytes.Clone(pkt)
				bad[i/8] ^= 1 << (i % 8)
				if got, err := openPacket(bad, b); err == nil {
					t.Fatalf("bit %d flipped (byte %d of %d) opened: %q", i, i/8, len(pkt), got)
				}
			}
			for _, cut := range []int{1, AEADTagSize, AEADOverhead} {
				var p Packet
				if err := Parse(pkt, &p); err != nil {
					t.Fatal(err)
				}
				p.Coat = p.Coat[:len(p.Coat)-cut]
				if _, err := b.Open(nil, p.Raw[:len(p.Raw)-len(p.Coat)-cut], p.Coat); err == nil {
					t.Fatalf("coat cut by %d opened", cut)
				}
			}
			if _, err := openPacket(pkt, b); err != nil {
				t.Fatalf("the packet itself: %v", err)
			}
		})
	}
}

func TestAEADCoatReplay(t *testing.T) {
	pk := aeadPacker(t)
	for _, kind := range aeadKinds {
		t.Run(kind.String(), func(t *testing.T) {
			a, b := aeadPair(t, kind)
			pkts := make([][]byte, 200)
			for i := range pkts {
				pkts[i] = sealPacket(t, pk, a, []byte{byte(i)})
			}
			if _, err := openPacket(pkts[0], b); err != nil {
				t.Fatal(err)
			}
			if _, err := openPacket(pkts[0], b); !errors.Is(err, ErrReplayed) {
				t.Fatalf("replayed packet: %v, want ErrReplayed", err)
			}
			// Reordered within the window: each accepted once.
			order := rand.New(rand.NewPCG(5, 6)).Perm(len(pkts) - 1)
			for _, i := range order {
				got, err := openPacket(pkts[i+1], b)
				if err != nil || len(got) != 1 || got[0] != byte(i+1) {
					t.Fatalf("packet %d out of order: %v", i+1, err)
				}
			}
			for _, i := range order {
				if _, err := openPacket(pkts[i+1], b); !errors.Is(err, ErrReplayed) {
					t.Fatalf("replay of %d: %v, want ErrReplayed", i+1, err)
				}
			}
		})
	}
}

func TestAEADCoatBeyondWindow(t *testing.T) {
	pk := aeadPacker(t)
	a, b := aeadPair(t, codec.CoatKindChaCha20Poly1305)
	first := sealPacket(t, pk, a, []byte("first"))
	edge := sealPacket(t, pk, a, []byte("edge")) // counter 1
	a.next.Store(1 + replay.Window)
	inside := sealPacket(t, pk, a, []byte("inside")) // counter Window+1
	a.next.Store(1 + replay.Window + 1000)
	last := sealPacket(t, pk, a, []byte("last"))
	if _, err := openPacket(inside, b); err != nil {
		t.Fatal(err)
	}
	// Counter 1 is Window behind Window+1: out.
	if _, err := openPacket(edge, b); !errors.Is(err, ErrTooOld) {
		t.Fatalf("packet a window behind: %v, want ErrTooOld", err)
	}
	if _, err := openPacket(last, b); err != nil {
		t.Fatal(err)
	}
	if _, err := openPacket(first, b); !errors.Is(err, ErrTooOld) {
		t.Fatalf("packet far behind: %v, want ErrTooOld", err)
	}
}

func TestAEADCoatRekey(t *testing.T) {
	for _, kind := range aeadKinds {
		t.Run(kind.String(), func(t *testing.T) {
			a, b := aeadPair(t, kind)
			head := []byte("head")
			a.next.Store(AEADCounterLimit - 1)
			coat, err := a.Seal(nil, head, []byte("last"))
			if err != nil {
				t.Fatalf("last counter: %v", err)
			}
			if got, err := b.Open(nil, head, coat); err != nil || string(got) != "last" {
				t.Fatalf("open last counter: %v", err)
			}
			for range 3 {
				dst := []byte("kept")
				out, err := a.Seal(dst, head, []byte("x"))
				var ce *CoatError
				if !errors.Is(err, ErrRekey) || !errors.As(err, &ce) || ce.Op != "seal" || string(out) != "kept" {
					t.Fatalf("seal past the limit: %q, %v, want ErrRekey", out, err)
				}
			}
		})
	}
	// AES-GCM also stops at its block limit; ChaCha20-Poly1305 does not.
	a, _ := aeadPair(t, codec.CoatKindAES256GCM)
	a.blocks.Store(AES256GCMBlockLimit - 2)
	if _, err := a.Seal(nil, nil, make([]byte, 16)); err != nil {
		t.Fatalf("up to the block limit: %v", err)
	}
	if _, err := a.Seal(nil, nil, nil); !errors.Is(err, ErrRekey) {
		t.Fatalf("past the block limit: %v, want ErrRekey", err)
	}
	c, _ := aeadPair(t, codec.CoatKindChaCha20Poly1305)
	c.blocks.Store(AES256GCMBlockLimit)
	if _, err := c.Seal(nil, nil, nil); err != nil {
		t.Fatalf("chacha has no block limit: %v", err)
	}
}

// TestAEADCoatWrongKey: a packet opened with the wrong direction's key (a
// reflection), another session's, or the other cipher's, fails.
func TestAEADCoatWrongKey(t *testing.T) {
	pk := aeadPacker(t)
	a, b := aeadPair(t, codec.CoatKindAES256GCM)
	pkt := sealPacket(t, pk, a, []byte("to main"))
	if _, err := openPacket(pkt, a); !errors.Is(err, ErrCoatOpen) {
		t.Fatalf("reflected to its sender: %v, want ErrCoatOpen", err)
	}
	other, err := NewAEADCoat(codec.CoatKindAES256GCM, key32(t, mainSigHex), key32(t, otherShortPubHex))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := openPacket(pkt, other); !errors.Is(err, ErrCoatOpen) {
		t.Fatalf("another session's key: %v, want ErrCoatOpen", err)
	}
	_, chacha := aeadPair(t, codec.CoatKindChaCha20Poly1305)
	if _, err := openPacket(pkt, chacha); !errors.Is(err, ErrCoatOpen) {
		t.Fatalf("the other cipher: %v, want ErrCoatOpen", err)
	}
	// The same bytes under the right key still open: failures moved nothing.
	if got, err := openPacket(pkt, b); err != nil || string(got) != "to main" {
		t.Fatalf("right key: %q, %v", got, err)
	}
	// A packet with a foot is not an AEAD packet.
	var p Packet
	if err := Parse(pkt, &p); err != nil {
		t.Fatal(err)
	}
	p.Foot = p.Raw[len(p.Raw):]
	p.Head.CoatKind = codec.CoatKindNaCl
	if _, err := p.OpenAEAD(nil, b); !errors.Is(err, ErrCoatOpen) {
		t.Fatalf("kind mismatch: %v", err)
	}
}

func TestAEADCoatNew(t *testing.T) {
	priv, pub := key32(t, mainShortPriHex), key32(t, mainShortPubHex)
	var zero [32]byte
	cases := map[string][2]*[32]byte{
		"nil priv":       {nil, pub},
		"nil pub":        {priv, nil},
		"low-order pub":  {priv, &zero},
		"same both ends": {priv, pub},
	}
	for name, k := range cases {
		_, err := NewAEADCoat(codec.CoatKindAES256GCM, k[0], k[1])
		var ce *CoatError
		if !errors.Is(err, ErrWeakKey) || !errors.As(err, &ce) || ce.Op != "new" {
			t.Errorf("%s: err = %v, want *CoatError with ErrWeakKey", name, err)
		}
	}
	for _, kind := range []codec.CoatKind{codec.CoatKindNada, codec.CoatKindNaCl, codec.CoatKindXChaCha} {
		if _, err := NewAEADCoat(kind, priv, key32(t, otherShortPubHex)); !errors.Is(err, ErrNotAEAD) {
			t.Errorf("kind %v: %v, want ErrNotAEAD", kind, err)
		}
	}
}

func TestChooseAEAD(t *testing.T) {
	const (
		aes    = codec.CoatKindAES256GCM
		chacha = codec.CoatKindChaCha20Poly1305
		nacl   = codec.CoatKindNaCl
	)
	type ks = []codec.CoatKind
	cases := []struct {
		a, b ks
		want codec.CoatKind
		ok   bool
	}{
		{ks{nacl, aes, chacha}, ks{nacl, aes, chacha}, aes, true},
		{ks{nacl, aes, chacha}, ks{nacl, chacha, aes}, chacha, true},
		{ks{chacha, aes}, ks{chacha, aes}, chacha, true},
		{ks{aes}, ks{chacha, aes}, aes, true},
		{ks{aes}, ks{chacha}, codec.CoatKindNada, false},
		{ks{chacha}, ks{aes, chacha}, chacha, true},
		{ks{nacl}, ks{aes, chacha}, codec.CoatKindNada, false},
		{nil, nil, codec.CoatKindNada, false},
	}
	for _, c := range cases {
		for _, swap := range []bool{false, true} {
			a, b := c.a, c.b
			if swap {
				a, b = b, a
			}
			if got, ok := ChooseAEAD(a, b); got != c.want || ok != c.ok {
				t.Errorf("ChooseAEAD(%v, %v) = %v, %v; want %v, %v", a, b, got, ok, c.want, c.ok)
			}
		}
	}
	kinds := AEADKinds()
	if len(kinds) != 2 || (kinds[0] == aes) != HasAESHardware() {
		t.Fatalf("AEADKinds() = %v with AES hardware %v", kinds, HasAESHardware())
	}
}

// TestAEADCoatConcurrent: goroutines opening the same packets at once accept
// each one exactly once.
func TestAEADCoatConcurrent(t *testing.T) {
	pk := aeadPacker(t)
	a, b := aeadPair(t, codec.CoatKindChaCha20Poly1305)
	pkts := make([][]byte, 100)
	for i := range pkts {
		pkts[i] = sealPacket(t, pk, a, []byte{byte(i)})
	}
	var mu sync.Mutex
	opened := make([]int, len(pkts))
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i, pkt := range pkts {
				if _, err := openPacket(bytes.Clone(pkt), b); err == nil {
					mu.Lock()
					opened[i]++
					mu.Unlock()
				} else if !errors.Is(err, ErrReplayed) {
					t.Errorf("packet %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	for i, n := range opened {
		if n != 1 {
			t.Fatalf("packet %d opened %d times", i, n)
		}
	}
}

func TestAEADCoatAllocs(t *testing.T) {
	if raceEnabled() {
		t.Skip("allocation counts are meaningless under -race")
	}
	pk := aeadPacker(t)
	for _, kind := range aeadKinds {
		a, b := aeadPair(t, kind)
		body := make([]byte, 1024)
		dst := make([]byte, 0, 2048)
		out := make([]byte, 0, 2048)
		h, p := new(codec.Head), new(Packet) // reused, as a stack would
		if n := testing.AllocsPerRun(50, func() {
			*h = aeadHead()
			pkt, err := pk.PackAEAD(dst, h, a, body)
			if err != nil {
				t.Fatal(err)
			}
			if err := Parse(pkt, p); err != nil {
				t.Fatal(err)
			}
			if _, err := p.OpenAEAD(out, b); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%v: pack, parse and open: %v allocs, want 0", kind, n)
		}
	}
}

// TestAEADCoatOverlap: a dst that overlaps the input still gives the right
// bytes (a copy is made).
func TestAEADCoatOverlap(t *testing.T) {
	a, b := aeadPair(t, codec.CoatKindAES256GCM)
	buf := make([]byte, 64, 256)
	copy(buf, "plaintext in place, sixty-four bytes long, more or less......")
	plain := bytes.Clone(buf)
	coat, err := a.Seal(buf[:0], nil, buf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Open(coat[:0], nil, coat)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("in place: %q, %v", got, err)
	}
}

// FuzzAEADOpen feeds datagrams to a fresh receiver: it never panics, and
// the only datagrams that open are the sealed seeds, to their own bodies.
func FuzzAEADOpen(f *testing.F) {
	pk := aeadPacker(f)
	a, _ := aeadPair(f, codec.CoatKindAES256GCM)
	sealed := map[string]string{}
	for i, body := range []string{"", "x", `{"route":"a","content":"b"}`, string(make([]byte, 600))} {
		a.next.Store(uint64(i * 3000)) // counters far apart, some outside one another's window
		pkt := sealPacket(f, pk, a, []byte(body))
		sealed[string(pkt)] = body
		f.Add(pkt)
	}
	priv, pub := key32(f, mainShortPriHex), key32(f, otherShortPubHex)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		b, err := NewAEADCoat(codec.CoatKindAES256GCM, priv, pub)
		if err != nil {
			t.Fatal(err)
		}
		got, err := openPacket(pkt, b)
		if err != nil {
			return
		}
		want, ok := sealed[string(pkt)]
		if !ok || string(got) != want {
			t.Fatalf("a datagram that was not sealed opened: %x to %q", pkt, got)
		}
		if _, err := openPacket(pkt, b); !errors.Is(err, ErrReplayed) {
			t.Fatalf("the same datagram again: %v, want ErrReplayed", err)
		}
	})
}

// BenchmarkSealOpen compares, per packet with a binary head, the AEAD coats
// (PackAEAD, Parse, OpenAEAD) with the NaCl coat and the MAC foot (Seal,
// Pack, Parse, Verify, Open), for one body size after another:
//
//	go test -run '^$' -bench SealOpen -benchtime 2000x ./packet
func BenchmarkSealOpen(b *testing.B) {
	for _, size := range []int{64, 1024, 16384} {
		body := make([]byte, size)
		pkt := make([]byte, 0, size+256)
		coat := make([]byte, 0, size+NaClOverhead)
		out := make([]byte, 0, size)
		h, p := new(codec.Head), new(Packet)
		for _, kind := range aeadKinds {
			b.Run(kind.String()+"/"+sizeName(size), func(b *testing.B) {
				pk := aeadPacker(b)
				sa, ra := aeadPair(b, kind)
				b.SetBytes(int64(size))
				for b.Loop() {
					*h = aeadHead()
					sealed, err := pk.PackAEAD(pkt, h, sa, body)
					if err != nil {
						b.Fatal(err)
					}
					if err := Parse(sealed, p); err != nil {
						b.Fatal(err)
					}
					if _, err := p.OpenAEAD(out, ra); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run("nacl+mac/"+sizeName(size), func(b *testing.B) {
			macA, macB := macPair(b)
			pk := aeadPacker(b)
			pk.Foot = macA
			coatA, coatB := otherCoat(b, nil), mainCoat(b)
			b.SetBytes(int64(size))
			for b.Loop() {
				*h = aeadHead()
				h.CoatKind = codec.CoatKindNaCl
				sealed, err := coatA.Seal(coat, body)
				if err != nil {
					b.Fatal(err)
				}
				signed, err := pk.Pack(pkt, h, sealed)
				if err != nil {
					b.Fatal(err)
				}
				if err := Parse(signed, p); err != nil {
					b.Fatal(err)
				}
				if err := p.Verify(macB); err != nil {
					b.Fatal(err)
				}
				if _, err := p.Open(out, coatB); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func sizeName(n int) string {
	if n >= 1024 {
		return strconv.Itoa(n/1024) + "KiB"
	}
	return strconv.Itoa(n) + "B"
}

// TestAEADSegments: a body too large for one packet goes in segments that
// are each sealed on their own (every one a new counter), each opens
// alone, and the reassembled pieces are the body; a segment sent again is
// a new packet whose first copy the receiver still refuses as a replay.
func TestAEADSegments(t *testing.T) {
	pk := aeadPacker(t)
	pk.MaxPacketSize = 300
	a, b := aeadPair(t, codec.CoatKindChaCha20Poly1305)
	body := make([]byte, 2000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	h := aeadHead()
	segSize, count, err := pk.SegmentsAEAD(&h, a, len(body))
	if err != nil || count < 2 {
		t.Fatalf("plan: %d segments of %d, %v", count, segSize, err)
	}
	if one, n, err := pk.SegmentsAEAD(&h, a, 100); err != nil || n != 1 || one != 0 {
		t.Fatalf("a small body: %d segments of %d, %v", n, one, err)
	}
	r := NewReassembler[int, int](nil)
	counters := map[uint64]bool{}
	var whole []byte
	var first []byte
	for i := count - 1; i >= 0; i-- { // out of order
		sh := aeadHead()
		pkt, err := pk.PackSegmentAEAD(nil, &sh, a, nil, body, i, segSize, count)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkt) > pk.MaxPacketSize {
			t.Fatalf("segment %d: %d bytes over %d", i, len(pkt), pk.MaxPacketSize)
		}
		if i == count-1 {
			first = pkt
			// Sent again: the same head, a new counter.
			again, err := pk.PackSegmentAEAD(nil, &sh, a, nil, body, i, segSize, count)
			if err != nil || bytes.Equal(again, pkt) {
				t.Fatalf("sent again: same bytes %v, %v", bytes.Equal(again, pkt), err)
			}
		}
		var p Packet
		if err := Parse(pkt, &p); err != nil {
			t.Fatal(err)
		}
		n := binary.BigEndian.Uint64(p.Coat)
		if counters[n] {
			t.Fatalf("counter %d sealed twice", n)
		}
		counters[n] = true
		piece, err := p.OpenAEAD(nil, b)
		if err != nil {
			t.Fatalf("segment %d: %v", i, err)
		}
		got, _, err := r.Add(0, 1, &p.Head, piece)
		if err != nil {
			t.Fatal(err)
		}
		if got != nil {
			whole = got
		}
	}
	if !bytes.Equal(whole, body) {
		t.Fatalf("reassembled %d bytes, want the %d of the body", len(whole), len(body))
	}
	if _, err := openPacket(first, b); !errors.Is(err, ErrReplayed) {
		t.Fatalf("the first copy again: %v, want ErrReplayed", err)
	}
}

// TestAEADOpenInBuffer: opening into the spare capacity of the datagram
// allocates nothing and leaves the datagram intact, also when it fails, so
// that another coat may try it after; with no room it opens in place.
func TestAEADOpenInBuffer(t *testing.T) {
	pk := aeadPacker(t)
	a, b := aeadPair(t, codec.CoatKindAES256GCM)
	wrong, _ := aeadPair(t, codec.CoatKindAES256GCM)
	body := bytes.Repeat([]byte("x"), 500)
	for range 2 {
		pkt := sealPacket(t, pk, a, body)
		buf := make([]byte, len(pkt), 2*len(pkt))
		copy(buf, pkt)
		var p Packet
		if err := Parse(buf, &p); err != nil {
			t.Fatal(err)
		}
		if _, err := p.OpenAEAD(buf[len(buf):], wrong); !errors.Is(err, ErrCoatOpen) {
			t.Fatalf("with the wrong coat: %v", err)
		}
		if !bytes.Equal(buf, pkt) {
			t.Fatal("a failed open changed the datagram")
		}
		got, err := p.OpenAEAD(buf[len(buf):], b)
		if err != nil || !bytes.Equal(got, body) || &got[:1][0] != &buf[:len(buf)+1][len(buf)] {
			t.Fatalf("into the spare room: %v", err)
		}
	}
	// No room after it: opened in place, over the ciphertext.
	pkt := sealPacket(t, pk, a, body)
	tight := bytes.Clone(pkt)[:len(pkt):len(pkt)]
	var p Packet
	if err := Parse(tight, &p); err != nil {
		t.Fatal(err)
	}
	coat := p.Coat
	got, err := p.OpenAEADInBuffer(b)
	if err != nil || !bytes.Equal(got, body) || &got[0] != &coat[AEADCounterSize] {
		t.Fatalf("in place: %v", err)
	}
	if raceEnabled() {
		return
	}
	buf := make([]byte, len(pkt), 2*len(pkt))
	h := new(codec.Head)
	for _, room := range []int{2 * len(pkt), len(pkt)} {
		if n := testing.AllocsPerRun(20, func() {
			*h = aeadHead()
			pkt, err := pk.PackAEAD(buf[:0:room], h, a, body)
			if err != nil {
				t.Fatal(err)
			}
			if err := Parse(pkt, &p); err != nil {
				t.Fatal(err)
			}
			if _, err := p.OpenAEADInBuffer(b); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("open in the buffer (room %d): %v allocs", room, n)
		}
	}
}

// TestAEADCoatRemaining: what a direction may still seal goes down with
// each packet (and, for AES-256-GCM, with each block), and the receiving
// side's use does not count.
func TestAEADCoatRemaining(t *testing.T) {
	for _, kind := range aeadKinds {
		a, b := aeadPair(t, kind)
		full := a.Remaining()
		want := map[codec.CoatKind]uint64{codec.CoatKindAES256GCM: AES256GCMBlockLimit, codec.CoatKindChaCha20Poly1305: AEADCounterLimit}[kind]
		if full != want {
			t.Fatalf("%v: %d left at first, want %d", kind, full, want)
		}
		coat, err := a.Seal(nil, nil, make([]byte, 100)) // 7 blocks and the tag's
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Open(nil, nil, coat); err != nil {
			t.Fatal(err)
		}
		used := map[codec.CoatKind]uint64{codec.CoatKindAES256GCM: 8, codec.CoatKindChaCha20Poly1305: 1}[kind]
		if got := a.Remaining(); got != full-used {
			t.Fatalf("%v: %d left after one packet, want %d", kind, got, full-used)
		}
		if got := b.Remaining(); got != full {
			t.Fatalf("%v: the receiver's own direction went down to %d", kind, got)
		}
	}
}

// TestAEADCoatDrop: the cipher states are built at the first Seal or
// Open, and a dropped coat seals and opens again as before: the counters go
// on (no nonce repeats across a rebuild) and the replay window still
// refuses what it accepted.
func TestAEADCoatDrop(t *testing.T) {
	pk := aeadPacker(t)
	for _, kind := range aeadKinds {
		a, b := aeadPair(t, kind)
		if a.state.Load() != nil {
			t.Fatalf("%v: a coat never used holds cipher states", kind)
		}
		first := sealPacket(t, pk, a, []byte("first"))
		if a.state.Load() == nil {
			t.Fatalf("%v: no cipher states after a seal", kind)
		}
		if _, err := openPacket(first, b); err != nil || b.state.Load() == nil {
			t.Fatalf("%v: open: %v, states %p", kind, err, b.state.Load())
		}
		a.Drop()
		b.Drop()
		if a.state.Load() != nil || b.state.Load() != nil {
			t.Fatalf("%v: states kept after Drop", kind)
		}
		second := sealPacket(t, pk, a, []byte("second"))
		if got, want := binary.BigEndian.Uint64(second[len(second)-len("second")-AEADOverhead:]), uint64(1); got != want {
			t.Errorf("%v: counter after a rebuild %d, want %d", kind, got, want)
		}
		if body, err := openPacket(second, b); err != nil || string(body) != "second" {
			t.Errorf("%v: open after a rebuild: %q, %v", kind, body, err)
		}
		b.Drop()
		if _, err := openPacket(first, b); !errors.Is(err, ErrReplayed) {
			t.Errorf("%v: replay after a rebuild: %v, want ErrReplayed", kind, err)
		}
		if b.state.Load() != nil {
			t.Errorf("%v: a replay refused by the window built the states", kind)
		}
	}
}

// TestAEADCoatDropConcurrent: readers open and the owner seals while the
// states are dropped again and again (run with -race): every packet opens,
// whichever state each goroutine held.
func TestAEADCoatDropConcurrent(t *testing.T) {
	pk := aeadPacker(t)
	const readers, per = 4, 200
	for _, kind := range aeadKinds {
		a, b := aeadPair(t, kind)
		pkts := make([][]byte, readers*per)
		for i := range pkts {
			pkts[i] = sealPacket(t, pk, a, []byte("body"))
		}
		var wg sync.WaitGroup
		errs := make(chan error, readers+1)
		for r := range readers {
			wg.Go(func() {
				for _, pkt := range pkts[r*per : (r+1)*per] {
					if _, err := openPacket(pkt, b); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Go(func() {
			out := make([]byte, 0, 64)
			for range readers * per {
				b.Drop()
				if _, err := b.Seal(out, []byte("head"), []byte("back")); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%v: %v", kind, err)
		}
	}
}

// BenchmarkAEADCoatRebuild measures what a dropped coat's next packet
// costs: sealing 64 bytes with the cipher states built (warm) and right
// after Drop (rebuilt: both directions' states built again). The difference is the rebuild.
//
//	go test -run '^$' -bench AEADCoatRebuild -benchtime 20000x ./packet
func BenchmarkAEADCoatRebuild(b *testing.B) {
	body := make([]byte, 64)
	dst := make([]byte, 0, 256)
	head := []byte("head")
	for _, kind := range aeadKinds {
		for _, drop := range []bool{false, true} {
			name := kind.String() + "/warm"
			if drop {
				name = kind.String() + "/rebuilt"
			}
			b.Run(name, func(b *testing.B) {
				a, _ := aeadPair(b, kind)
				b.ReportAllocs()
				for b.Loop() {
					if drop {
						a.Drop()
					}
					if _, err := a.Seal(dst, head, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestAEADSegmentsPrefixed: a body packed behind a prefix gives the very
// packets of the joined body (two coats of the same keys seal in step),
// with the prefix in one segment, cut across two and over several, sealed
// in place where dst has the room and from a copy where it has not.
func TestAEADSegmentsPrefixed(t *testing.T) {
	pk := aeadPacker(t)
	pk.MaxPacketSize = 300
	body := make([]byte, 2000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, kind := range []codec.CoatKind{codec.CoatKindAES256GCM, codec.CoatKindChaCha20Poly1305} {
		for _, plen := range []int{1, 31, 250, 700} {
			prefix := bytes.Repeat([]byte{byte(plen)}, plen)
			joined := append(slices.Clip(prefix), body...)
			a1, _ := aeadPair(t, kind)
			a2, _ := aeadPair(t, kind)
			h := aeadHead()
			segSize, count, err := pk.SegmentsAEAD(&h, a1, len(joined))
			if err != nil || count < 2 {
				t.Fatalf("plan: %d segments of %d, %v", count, segSize, err)
			}
			for i := range count {
				h1, h2 := aeadHead(), aeadHead()
				want, err := pk.PackSegmentAEAD(nil, &h1, a1, nil, joined, i, segSize, count)
				if err != nil {
					t.Fatal(err)
				}
				dst := []byte{1, 2, 3}
				if i%2 == 0 {
					dst = append(make([]byte, 0, 1024), dst...)
				}
				got, err := pk.PackSegmentAEAD(dst, &h2, a2, prefix, body, i, segSize, count)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got[:3], []byte{1, 2, 3}) || !bytes.Equal(got[3:], want) || h1 != h2 {
					t.Fatalf("%v, prefix of %d, segment %d of %d: not the joined body's packet", kind, plen, i, count)
				}
			}
		}
	}
}
