package packet

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/raet-go/raet/codec"
)

// Keys of raet-protocol.md §7.4.
const (
	otherSigHex      = "29d9b81c6a449f5b730e1071ab4451cc409f6b0fa25acd7045c01954922c1e6b"
	otherVerHex      = "516b4dd774b4eeabdc8b0b2a9e7392c6cc5a6573cc7f86715ebd62e2fa15a402"
	mainSigHex       = "378f61b6b73cb051458624f9f970e4853ecc58308e69d719738ca3ed7db36ec1"
	mainVerHex       = "551238481fe3504ca9c287ae062e72a2cf3c82cbb4fa16e3b1a24f3db75ec62e"
	otherShortPriHex = "211f3b713dfa4e8c79327b7a17a775eec955823d76af31047a5e0930eb0574f0"
	otherShortPubHex = "ea798c24f06f4436d8adc1327ff28506fcfa4cfde84c7b37ff677d30935c9163"
	mainShortPriHex  = "714f9552809f71545c6efe6b24a8e8b3d2a2e2e6c928f5920c748dc1e38e1f58"
	mainShortPubHex  = "799a4818ec3d54dae1fb3122cf2cd18c4a7aeb5f25a17fe33576730cbaf6be7a"

	// de of the captured packets: main's uid for other (0x66).
	vectorDe = 0x66
	// Offsets in the captured packets.
	aliveHeadLen = 82
	msgHeadLen   = 72
	msgCoatLen   = 85
)

// key32 decodes a 64-hex-digit key.
func key32(tb testing.TB, s string) *[32]byte {
	tb.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		tb.Fatalf("bad key %q: %v", s, err)
	}
	return (*[32]byte)(b)
}

// vectorHex reads an annotated hexdump from testdata: '#' starts a comment
// that runs to the end of the line; white space is ignored.
func vectorHex(tb testing.TB, name string) []byte {
	tb.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	var digits strings.Builder
	for line := range strings.Lines(string(text)) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	return b
}

// raceEnabled reports whether the test binary was built with -race, where
// sync.Pool drops items at random and allocation counts mean nothing.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// resolverFor returns a resolver that knows one verify key, for vectorDe.
func resolverFor(tb testing.TB, verHex string) VerifyKeyResolver {
	key := key32(tb, verHex)
	return func(de uint32) (*[32]byte, bool) {
		if de != vectorDe {
			return nil, false
		}
		return key, true
	}
}

func otherFoot(tb testing.TB) *NaClFoot {
	return NewNaClFoot(key32(tb, otherSigHex), resolverFor(tb, otherVerHex))
}

func TestSeedMatchesVerifyKey(t *testing.T) {
	for _, k := range []struct{ sig, ver string }{{otherSigHex, otherVerHex}, {mainSigHex, mainVerHex}} {
		pub := ed25519.NewKeyFromSeed(key32(t, k.sig)[:]).Public().(ed25519.PublicKey)
		if hex.EncodeToString(pub) != k.ver {
			t.Errorf("seed %s gives verify key %x, want %s", k.sig[:8], pub, k.ver)
		}
	}
}

// §7.4 (a): the captured alive request verifies, and signing it again
// reproduces its foot.
func TestNaClFootAliveVector(t *testing.T) {
	pkt := vectorHex(t, "alive_request.hex")
	if len(pkt) != 146 {
		t.Fatalf("vector is %d bytes, want 146", len(pkt))
	}
	f := otherFoot(t)
	head, sig := pkt[:aliveHeadLen], pkt[aliveHeadLen:]
	orig := bytes.Clone(pkt)
	if err := f.Verify(head, sig, vectorDe); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if !bytes.Equal(pkt, orig) {
		t.Fatal("Verify did not restore the packet buffer")
	}
	signed, err := f.Sign(bytes.Clone(head))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(signed, pkt) {
		t.Fatalf("re-signed packet differs:\n got %x\nwant %x", signed, pkt)
	}
	// Main's key must not verify other's packet.
	wrong := NewNaClFoot(nil, resolverFor(t, mainVerHex))
	if err := wrong.Verify(head, sig, vectorDe); !errors.Is(err, ErrFootVerify) {
		t.Fatalf("verify with main's key: %v, want ErrFootVerify", err)
	}
}

// §7.4 (b): the captured message's signature verifies.
func TestNaClFootMessageVector(t *testing.T) {
	pkt := vectorHex(t, "message_small.hex")
	if len(pkt) != 221 {
		t.Fatalf("vector is %d bytes, want 221", len(pkt))
	}
	f := otherFoot(t)
	n := len(pkt) - NaClFootSize
	if err := f.Verify(pkt[:n], pkt[n:], vectorDe); err != nil {
		t.Fatalf("verify: %v", err)
	}
	signed, err := f.Sign(bytes.Clone(pkt[:n]))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(signed, pkt) {
		t.Fatal("re-signed message differs from the capture")
	}
}

// Any changed bit of head, coat or foot makes the foot fail.
func TestNaClFootTamper(t *testing.T) {
	f := otherFoot(t)
	for _, name := range []string{"alive_request.hex", "message_small.hex"} {
		pkt := vectorHex(t, name)
		n := len(pkt) - NaClFootSize
		for i := range pkt {
			for _, bit := range []byte{0x01, 0x80} {
				pkt[i] ^= bit
				err := f.Verify(pkt[:n], pkt[n:], vectorDe)
				pkt[i] ^= bit
				if !errors.Is(err, ErrFootVerify) {
					t.Fatalf("%s: flipping bit %#x of byte %d: err = %v, want ErrFootVerify", name, bit, i, err)
				}
			}
		}
	}
}

func TestNaClFootErrors(t *testing.T) {
	pkt := vectorHex(t, "alive_request.hex")
	head, sig := pkt[:aliveHeadLen], pkt[aliveHeadLen:]
	f := otherFoot(t)

	for _, foot := range [][]byte{nil, sig[:63], append(bytes.Clone(sig), 0)} {
		err := f.Verify(head, foot, vectorDe)
		var fe *FootError
		if !errors.Is(err, ErrFootLength) || !errors.As(err, &fe) || fe.Kind != codec.FootKindNaCl || fe.Op != "verify" {
			t.Errorf("foot of %d bytes: err = %v, want *FootError with ErrFootLength", len(foot), err)
		}
	}
	if err := f.Verify(head, sig, vectorDe+1); !errors.Is(err, ErrUnknownVerifyKey) {
		t.Errorf("unknown de: err = %v, want ErrUnknownVerifyKey", err)
	}
	if err := NewNaClFoot(nil, nil).Verify(head, sig, vectorDe); !errors.Is(err, ErrUnknownVerifyKey) {
		t.Errorf("nil resolver: err = %v, want ErrUnknownVerifyKey", err)
	}
	nilKey := func(uint32) (*[32]byte, bool) { return nil, true }
	if err := NewNaClFoot(nil, nilKey).Verify(head, sig, vectorDe); !errors.Is(err, ErrUnknownVerifyKey) {
		t.Errorf("nil key: err = %v, want ErrUnknownVerifyKey", err)
	}
	got, err := NewNaClFoot(nil, nil).Sign(head)
	if !errors.Is(err, ErrNoSigningKey) || len(got) != len(head) {
		t.Errorf("verify-only Sign: err = %v, len %d", err, len(got))
	}
	want := "raet: verify nacl foot (de 67): no verify key for the packet's de"
	if err := f.Verify(head, sig, vectorDe+1); err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

// Verify works when head||coat and foot are separate buffers (it copies).
// TestNaClFootExpandsRuns checks the foot's expanded keys (expandedKeys):
// a key is expanded at its second packet in a row in its slot and used
// from then on, with the same answers (a tampered packet still fails); two
// keys taking turns in one slot are verified as given, with no
// allocation, as are the packets under a key that is not a point; and
// the foot stays safe to share between goroutines.
func TestNaClFootExpandsRuns(t *testing.T) {
	// Two signers whose keys share a slot, and one verifying foot that
	// resolves de 1 and 2 to them.
	var seeds [2][32]byte
	var keys [2]*[32]byte
	for i := byte(1); keys[1] == nil; i++ {
		seed := [32]byte{i}
		pub := (*[32]byte)(ed25519.NewKeyFromSeed(seed[:])[32:])
		switch {
		case keys[0] == nil:
			seeds[0], keys[0] = seed, pub
		case pub[0]%expandedSlots == keys[0][0]%expandedSlots:
			seeds[1], keys[1] = seed, pub
		}
	}
	var pkts [2][]byte
	for i := range pkts {
		pkts[i], _ = NewNaClFoot(&seeds[i], nil).Sign(bench1K(NaClFootSize))
	}
	n := len(pkts[0]) - NaClFootSize
	newFoot := func() *NaClFoot {
		return NewNaClFoot(nil, func(de uint32) (*[32]byte, bool) { return keys[de-1], de == 1 || de == 2 })
	}
	slot := keys[0][0] % expandedSlots
	verify := func(f *NaClFoot, i int) {
		t.Helper()
		if err := f.Verify(pkts[i][:n], pkts[i][n:], uint32(i+1)); err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
	}

	f := newFoot()
	verify(f, 0)
	if f.expanded[slot].key.Load() != nil {
		t.Fatal("a key was expanded at its first packet")
	}
	verify(f, 0)
	k := f.expanded[slot].key.Load()
	if k == nil || k.pub != *keys[0] {
		t.Fatal("a key was not expanded at its second packet in a row")
	}
	verify(f, 0)
	bad := bytes.Clone(pkts[0])
	bad[10] ^= 1
	if err := f.Verify(bad[:n], bad[n:], 1); !errors.Is(err, ErrFootVerify) {
		t.Fatalf("a tampered packet with the key expanded: %v, want ErrFootVerify", err)
	}
	if err := f.Verify(pkts[1][:n], pkts[0][n:], 2); !errors.Is(err, ErrFootVerify) {
		t.Fatalf("a signature of another key: %v, want ErrFootVerify", err)
	}

	f = newFoot()
	turns := func() {
		for i := range 6 {
			verify(f, i%2)
		}
	}
	turns()
	if f.expanded[slot].key.Load() != nil {
		t.Fatal("keys taking turns in a slot were expanded")
	}
	if !raceEnabled() {
		if a := testing.AllocsPerRun(5, turns); a != 0 {
			t.Errorf("keys taking turns: %v allocs, want 0", a)
		}
	}

	// A key that is not a point fails every packet, and is tried once.
	notPoint := new([32]byte)
	for i := byte(2); ; i++ {
		notPoint[0] = i
		if _, err := voi.NewExpandedPublicKey(notPoint[:]); err != nil {
			break
		}
	}
	f = NewNaClFoot(nil, func(uint32) (*[32]byte, bool) { return notPoint, true })
	bogus := func() {
		if err := f.Verify(pkts[0][:n], pkts[0][n:], 1); !errors.Is(err, ErrFootVerify) {
			t.Fatalf("a key that is not a point: %v, want ErrFootVerify", err)
		}
	}
	bogus()
	bogus()
	if k := f.expanded[notPoint[0]%expandedSlots].key.Load(); k == nil || k.x != nil {
		t.Fatal("the slot does not keep that a key is not a point")
	}
	if !raceEnabled() {
		// A failure allocates its error, and nothing more.
		good := newFoot()
		refused := testing.AllocsPerRun(5, func() {
			if err := good.Verify(bad[:n], bad[n:], 1); err == nil {
				t.Fatal("a tampered packet verified")
			}
		})
		if a := testing.AllocsPerRun(5, bogus); a != refused {
			t.Errorf("a key that is not a point: %v allocs, want %v (a refused packet's)", a, refused)
		}
	}

	f = newFoot()
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Go(func() {
			for range 4 {
				if err := f.Verify(pkts[g][:n], pkts[g][n:], uint32(g+1)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
}

func TestNaClFootSeparateBuffers(t *testing.T) {
	pkt := vectorHex(t, "alive_request.hex")
	head, sig := bytes.Clone(pkt[:aliveHeadLen]), bytes.Clone(pkt[aliveHeadLen:])
	f := otherFoot(t)
	if err := f.Verify(head, sig, vectorDe); err != nil {
		t.Fatal(err)
	}
	// A head slice with spare capacity that is not the foot.
	buf := make([]byte, aliveHeadLen, 1024)
	copy(buf, head)
	if err := f.Verify(buf, sig, vectorDe); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sig, pkt[aliveHeadLen:]) || !bytes.Equal(buf[aliveHeadLen:aliveHeadLen+64], make([]byte, 64)) {
		t.Fatal("Verify wrote outside the foot")
	}
}

// Sign appends in place when pkt has room, and keeps the caller's prefix.
func TestNaClFootSignInPlace(t *testing.T) {
	pkt := vectorHex(t, "alive_request.hex")
	buf := make([]byte, aliveHeadLen, len(pkt))
	copy(buf, pkt)
	out, err := otherFoot(t).Sign(buf)
	if err != nil {
		t.Fatal(err)
	}
	if &out[0] != &buf[0] || !bytes.Equal(out, pkt) {
		t.Fatal("Sign did not sign in place")
	}
}

func TestFootAllocs(t *testing.T) {
	if raceEnabled() {
		t.Skip("allocation counts are meaningless under -race")
	}
	pkt := vectorHex(t, "message_small.hex")
	n := len(pkt) - NaClFootSize
	f := otherFoot(t)
	buf := make([]byte, n, len(pkt))
	if a := testing.AllocsPerRun(20, func() {
		copy(buf[:n], pkt)
		if _, err := f.Sign(buf[:n]); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("NaClFoot.Sign: %v allocs, want 0", a)
	}
	if a := testing.AllocsPerRun(20, func() {
		if err := f.Verify(pkt[:n], pkt[n:], vectorDe); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("NaClFoot.Verify: %v allocs, want 0", a)
	}
	a, b := macPair(t)
	mbuf := make([]byte, n, n+MACFootSize)
	copy(mbuf, pkt)
	signed, _ := a.Sign(bytes.Clone(mbuf))
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := a.Sign(mbuf[:n]); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("MACFoot.Sign: %v allocs, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if err := b.Verify(signed[:n], signed[n:], 0); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("MACFoot.Verify: %v allocs, want 0", allocs)
	}
}

func TestNadaFoot(t *testing.T) {
	var f NadaFoot
	if f.Kind() != codec.FootKindNada || f.Size() != 0 {
		t.Fatal("kind or size")
	}
	pkt := []byte("head")
	out, err := f.Sign(pkt)
	if err != nil || !bytes.Equal(out, pkt) {
		t.Fatalf("Sign: %q, %v", out, err)
	}
	if err := f.Verify(pkt, nil, 1); err != nil {
		t.Fatal(err)
	}
	if err := f.Verify(pkt, []byte{0}, 1); !errors.Is(err, ErrFootLength) {
		t.Fatalf("non-empty nada foot: %v", err)
	}
}

// macPair returns the MAC feet of the two ends of the §7.4 session:
// a is other's foot for main, b main's foot for other.
func macPair(tb testing.TB) (a, b *MACFoot) {
	tb.Helper()
	a, err := NewMACFoot(key32(tb, otherShortPriHex), key32(tb, mainShortPubHex))
	if err != nil {
		tb.Fatal(err)
	}
	b, err = NewMACFoot(key32(tb, mainShortPriHex), key32(tb, otherShortPubHex))
	if err != nil {
		tb.Fatal(err)
	}
	return a, b
}

func TestMACFoot(t *testing.T) {
	a, b := macPair(t)
	if a.Kind() != codec.FootKindMAC || a.Size() != MACFootSize {
		t.Fatal("kind or size")
	}
	pkt := vectorHex(t, "message_small.hex")
	n := len(pkt) - NaClFootSize // reuse head||coat of the capture
	signed, err := a.Sign(bytes.Clone(pkt[:n]))
	if err != nil {
		t.Fatal(err)
	}
	if len(signed) != n+MACFootSize {
		t.Fatalf("signed length %d", len(signed))
	}
	if err := b.Verify(signed[:n], signed[n:], 0); err != nil {
		t.Fatalf("B verifies A: %v", err)
	}
	// Deterministic.
	again, _ := a.Sign(bytes.Clone(pkt[:n]))
	if !bytes.Equal(again, signed) {
		t.Fatal("MAC not deterministic")
	}
	// Reflection: A's own packet sent back to A does not verify.
	if err := a.Verify(signed[:n], signed[n:], 0); !errors.Is(err, ErrFootVerify) {
		t.Fatalf("reflected packet: %v, want ErrFootVerify", err)
	}
	// The other direction works too, with a different tag.
	fromB, _ := b.Sign(bytes.Clone(pkt[:n]))
	if bytes.Equal(fromB[n:], signed[n:]) {
		t.Fatal("both directions give the same tag")
	}
	if err := a.Verify(fromB[:n], fromB[n:], 0); err != nil {
		t.Fatalf("A verifies B: %v", err)
	}
	// Any flipped bit fails.
	for i := range signed {
		signed[i] ^= 0x04
		if err := b.Verify(signed[:n], signed[n:], 0); !errors.Is(err, ErrFootVerify) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
		signed[i] ^= 0x04
	}
	// Empty head||coat still gets a foot.
	empty, _ := a.Sign(nil)
	if err := b.Verify(nil, empty, 0); err != nil || len(empty) != MACFootSize {
		t.Fatalf("empty packet: %v", err)
	}
	for _, l := range []int{0, 15, 17, 64} {
		if err := b.Verify(signed[:n], make([]byte, l), 0); !errors.Is(err, ErrFootLength) {
			t.Fatalf("foot of %d bytes: %v", l, err)
		}
	}
	// A foot made from unrelated keys does not verify.
	c, err := NewMACFoot(key32(t, mainSigHex), key32(t, mainShortPubHex))
	if err != nil {
		t.Fatal(err)
	}
	forged, _ := c.Sign(bytes.Clone(pkt[:n]))
	if err := b.Verify(forged[:n], forged[n:], 0); !errors.Is(err, ErrFootVerify) {
		t.Fatalf("foreign key: %v", err)
	}
}

// TestMACFootKnownAnswer pins the MAC foot's wire format: the tag that
// other's foot puts on a packet to main, as computed independently by
// testdata/gen_mac_vector.py.
func TestMACFootKnownAnswer(t *testing.T) {
	a, b := macPair(t)
	head := "ri RAET\npl 003d\nhl 2d\nfg 00\nbk 1\nfk 4\nfl 10\n\n"
	pkt, err := a.Sign([]byte(head))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(pkt[len(head):]); got != "2ada2bc756a1eb9e0235923f654da0a7" {
		t.Fatalf("tag %s", got)
	}
	if err := b.Verify(pkt[:len(head)], pkt[len(head):], 0); err != nil {
		t.Fatal(err)
	}
}

func TestMACFootKeys(t *testing.T) {
	priv, pub := key32(t, mainShortPriHex), key32(t, mainShortPubHex)
	var zero [32]byte
	cases := map[string][2]*[32]byte{
		"nil priv":       {nil, pub},
		"nil pub":        {priv, nil},
		"low-order pub":  {priv, &zero},
		"same both ends": {priv, pub},
	}
	for name, k := range cases {
		_, err := NewMACFoot(k[0], k[1])
		var fe *FootError
		if !errors.Is(err, ErrWeakKey) || !errors.As(err, &fe) || fe.Op != "new" {
			t.Errorf("%s: err = %v, want *FootError with ErrWeakKey", name, err)
		}
	}
}

func FuzzNaClFootVerify(f *testing.F) {
	f.Add(vectorHex(f, "alive_request.hex"))
	f.Add(vectorHex(f, "message_small.hex"))
	f.Add(make([]byte, 64))
	f.Add([]byte("short"))
	foot := otherFoot(f)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		orig := bytes.Clone(pkt)
		if len(pkt) >= NaClFootSize {
			n := len(pkt) - NaClFootSize
			err := foot.Verify(pkt[:n], pkt[n:], vectorDe)
			if !bytes.Equal(pkt, orig) {
				t.Fatal("Verify changed the packet")
			}
			want, _ := foot.Sign(bytes.Clone(pkt[:n]))
			if genuine := bytes.Equal(want, pkt); genuine != (err == nil) {
				t.Fatalf("genuine=%v but err=%v", genuine, err)
			}
		} else if err := foot.Verify(nil, pkt, vectorDe); !errors.Is(err, ErrFootLength) {
			t.Fatalf("short foot: %v", err)
		}
		// Round trip: what we sign verifies.
		signed, err := foot.Sign(bytes.Clone(orig))
		if err != nil {
			t.Fatal(err)
		}
		if err := foot.Verify(signed[:len(orig)], signed[len(orig):], vectorDe); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzMACFootVerify(f *testing.F) {
	a, b := macPair(f)
	msg := vectorHex(f, "message_small.hex")
	seed, _ := a.Sign(bytes.Clone(msg[:len(msg)-NaClFootSize]))
	f.Add(seed)
	f.Add(make([]byte, MACFootSize))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if len(pkt) >= MACFootSize {
			n := len(pkt) - MACFootSize
			err := b.Verify(pkt[:n], pkt[n:], 0)
			want, _ := a.Sign(bytes.Clone(pkt[:n]))
			if genuine := bytes.Equal(want, pkt); genuine != (err == nil) {
				t.Fatalf("genuine=%v but err=%v", genuine, err)
			}
		} else if err := b.Verify(nil, pkt, 0); !errors.Is(err, ErrFootLength) {
			t.Fatalf("short foot: %v", err)
		}
		signed, _ := a.Sign(bytes.Clone(pkt))
		if err := b.Verify(signed[:len(pkt)], signed[len(pkt):], 0); err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if err := a.Verify(signed[:len(pkt)], signed[len(pkt):], 0); err == nil {
			t.Fatal("reflected packet verified")
		}
	})
}

// bench1K returns a 1 KiB packet buffer: 1024-size bytes of head||coat
// with room for a foot of size.
func bench1K(size int) []byte {
	buf := make([]byte, 1024-size, 1024)
	for i := range buf {
		buf[i] = byte(i)
	}
	return buf
}

func BenchmarkNaClFootSign1K(b *testing.B) {
	f := otherFoot(b)
	buf := bench1K(NaClFootSize)
	n := len(buf)
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Sign(buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNaClFootVerify1K(b *testing.B) {
	f := otherFoot(b)
	buf := bench1K(NaClFootSize)
	n := len(buf)
	pkt, _ := f.Sign(buf)
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		if err := f.Verify(pkt[:n], pkt[n:], vectorDe); err != nil {
			b.Fatal(err)
		}
	}
}

func benchMAC(b *testing.B, size int, verify bool) {
	fa, fb := macPair(b)
	buf := make([]byte, size-MACFootSize, size)
	n := len(buf)
	pkt, _ := fa.Sign(buf)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if verify {
			if err := fb.Verify(pkt[:n], pkt[n:], 0); err != nil {
				b.Fatal(err)
			}
		} else if _, err := fa.Sign(buf[:n]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMACFootSign1K(b *testing.B)    { benchMAC(b, 1024, false) }
func BenchmarkMACFootVerify1K(b *testing.B)  { benchMAC(b, 1024, true) }
func BenchmarkMACFootSign128(b *testing.B)   { benchMAC(b, 128, false) }
func BenchmarkMACFootVerify128(b *testing.B) { benchMAC(b, 128, true) }
