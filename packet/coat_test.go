package packet

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/raet-go/raet/codec"

	"golang.org/x/crypto/nacl/box"
)

const vectorBody = `{"subject":"hello main","n":1,"from":"other"}`

// mainCoat opens what other sends (main's short-term private key, other's
// short-term public key); otherCoat seals it.
func mainCoat(tb testing.TB) *NaClCoat {
	tb.Helper()
	c, err := NewNaClCoat(key32(tb, mainShortPriHex), key32(tb, otherShortPubHex), nil)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func otherCoat(tb testing.TB, rand io.Reader) *NaClCoat {
	tb.Helper()
	c, err := NewNaClCoat(key32(tb, otherShortPriHex), key32(tb, mainShortPubHex), rand)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func vectorCoat(tb testing.TB) []byte {
	pkt := vectorHex(tb, "message_small.hex")
	return pkt[msgHeadLen : msgHeadLen+msgCoatLen]
}

// §7.4 (b): the captured coat opens to the body, and sealing the body with
// the captured nonce reproduces the coat.
func TestNaClCoatVector(t *testing.T) {
	coat := vectorCoat(t)
	body, err := mainCoat(t).Open(nil, coat)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if string(body) != vectorBody {
		t.Fatalf("body %q, want %q", body, vectorBody)
	}
	var m OrderedMap
	if err := (JSONBody{}).Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	want := OrderedMap{{"subject", "hello main"}, {"n", int64(1)}, {"from", "other"}}
	if !deepEqual(m, want) {
		t.Fatalf("decoded %#v", m)
	}
	// The body re-encodes to the same bytes.
	if enc, _ := (JSONBody{}).Marshal(nil, m); string(enc) != vectorBody {
		t.Fatalf("re-encoded %q", enc)
	}

	nonce := coat[len(coat)-NaClNonceSize:]
	sealed, err := otherCoat(t, bytes.NewReader(nonce)).Seal(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sealed, coat) {
		t.Fatalf("sealed coat differs:\n got %x\nwant %x", sealed, coat)
	}
	// The sender's own coat opens it too (either private key gives the
	// shared key).
	if got, err := otherCoat(t, nil).Open(nil, coat); err != nil || string(got) != vectorBody {
		t.Fatalf("open with other's keys: %q, %v", got, err)
	}
	// box.Open without precomputation agrees.
	got, ok := box.Open(nil, coat[:61], (*[24]byte)(nonce), key32(t, otherShortPubHex), key32(t, mainShortPriHex))
	if !ok || string(got) != vectorBody {
		t.Fatal("box.Open disagrees")
	}
}

func TestNaClCoatTamper(t *testing.T) {
	coat := bytes.Clone(vectorCoat(t))
	c := mainCoat(t)
	for i := range coat {
		coat[i] ^= 0x20
		out, err := c.Open([]byte("prefix"), coat)
		coat[i] ^= 0x20
		var ce *CoatError
		if !errors.Is(err, ErrCoatOpen) || !errors.As(err, &ce) || ce.Kind != codec.CoatKindNaCl || ce.Len != len(coat) {
			t.Fatalf("byte %d flipped: err = %v, want *CoatError with ErrCoatOpen", i, err)
		}
		if string(out) != "prefix" {
			t.Fatalf("byte %d flipped: dst changed to %q", i, out)
		}
	}
	// Keys of another session fail too.
	c2, _ := NewNaClCoat(key32(t, mainShortPriHex), key32(t, mainShortPubHex), nil)
	if _, err := c2.Open(nil, coat); !errors.Is(err, ErrCoatOpen) {
		t.Fatalf("wrong keys: %v", err)
	}
}

func TestNaClCoatShort(t *testing.T) {
	c := mainCoat(t)
	coat := vectorCoat(t)
	for l := 1; l < NaClOverhead; l++ {
		_, err := c.Open(nil, coat[len(coat)-l:])
		if !errors.Is(err, ErrCoatShort) {
			t.Fatalf("coat of %d bytes: %v, want ErrCoatShort", l, err)
		}
	}
	// Exactly tag + nonce: an empty box, which opens to an empty body.
	empty := otherCoatSealEmptyBox(t)
	out, err := c.Open([]byte("x"), empty)
	if err != nil || string(out) != "x" {
		t.Fatalf("empty box: %q, %v", out, err)
	}
	want := "raet: open nacl coat of 3 bytes: coat shorter than its tag and nonce"
	if _, err := c.Open(nil, []byte{1, 2, 3}); err == nil || err.Error() != want {
		t.Fatalf("message %v, want %q", err, want)
	}
}

// otherCoatSealEmptyBox makes a 40-byte coat holding an empty box, which
// Seal never produces (an empty body gives an empty coat).
func otherCoatSealEmptyBox(t *testing.T) []byte {
	var nonce [24]byte
	sealed := box.Seal(nil, nil, &nonce, key32(t, mainShortPubHex), key32(t, otherShortPriHex))
	return append(sealed, nonce[:]...)
}

func TestNaClCoatEmpty(t *testing.T) {
	c := otherCoat(t, nil)
	out, err := c.Seal([]byte("dst"), nil)
	if err != nil || string(out) != "dst" {
		t.Fatalf("empty body: %q, %v", out, err)
	}
	out, err = mainCoat(t).Open([]byte("dst"), nil)
	if err != nil || string(out) != "dst" {
		t.Fatalf("empty coat: %q, %v", out, err)
	}
}

func TestNaClCoatRoundTrip(t *testing.T) {
	seal, open := otherCoat(t, nil), mainCoat(t)
	if seal.Kind() != codec.CoatKindNaCl || seal.Overhead() != 40 {
		t.Fatal("kind or overhead")
	}
	for _, size := range []int{1, 15, 16, 100, 1024, 70000} {
		plain := make([]byte, size)
		for i := range plain {
			plain[i] = byte(i * 7)
		}
		coat, err := seal.Seal([]byte("head"), plain)
		if err != nil {
			t.Fatal(err)
		}
		if len(coat) != 4+size+NaClOverhead || string(coat[:4]) != "head" {
			t.Fatalf("size %d: coat length %d", size, len(coat))
		}
		got, err := open.Open(nil, coat[4:])
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("size %d: round trip failed: %v", size, err)
		}
		// Fresh nonce each time.
		coat2, _ := seal.Seal(nil, plain)
		if bytes.Equal(coat2[len(coat2)-24:], coat[len(coat)-24:]) {
			t.Fatal("nonce reused")
		}
	}
}

// Overlapping buffers (in place) give correct results instead of the
// panic of secretbox.
func TestNaClCoatOverlap(t *testing.T) {
	seal, open := otherCoat(t, nil), mainCoat(t)
	plain := []byte(vectorBody)

	buf := make([]byte, len(plain), 256)
	copy(buf, plain)
	coat, err := seal.Seal(buf[:0], buf) // dst overlaps plain
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:len(plain)], plain) {
		t.Fatal("Seal clobbered its input")
	}
	cbuf := make([]byte, len(coat), 256)
	copy(cbuf, coat)
	got, err := open.Open(cbuf[:0], cbuf) // dst overlaps coat
	if err != nil || string(got) != vectorBody {
		t.Fatalf("in-place open: %q, %v", got, err)
	}
	// dst's spare capacity covers the input after a prefix.
	big := make([]byte, 512)
	copy(big[10:], coat)
	got, err = open.Open(big[:5], big[10:10+len(coat)])
	if err != nil || string(got[5:]) != vectorBody {
		t.Fatalf("partial overlap: %q, %v", got, err)
	}
}

func TestNaClCoatAllocs(t *testing.T) {
	if raceEnabled() {
		t.Skip("allocation counts are meaningless under -race")
	}
	seal, open := otherCoat(t, zeroReader{}), mainCoat(t)
	plain := make([]byte, 1024)
	dst := make([]byte, 0, 1024+NaClOverhead)
	coat, _ := seal.Seal(nil, plain)
	out := make([]byte, 0, 1024)
	if a := testing.AllocsPerRun(50, func() { _, _ = seal.Seal(dst, plain) }); a != 0 {
		t.Errorf("Seal: %v allocs, want 0", a)
	}
	if a := testing.AllocsPerRun(50, func() { _, _ = open.Open(out, coat) }); a != 0 {
		t.Errorf("Open: %v allocs, want 0", a)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type failReader struct{}

func (failReader) Read([]byte) (int, error) { return 0, errors.New("entropy gone") }

func TestNaClCoatErrors(t *testing.T) {
	_, err := otherCoat(t, failReader{}).Seal([]byte("d"), []byte("body"))
	var ce *CoatError
	if !errors.As(err, &ce) || ce.Op != "seal" || ce.Err == nil {
		t.Fatalf("failing nonce source: %v", err)
	}
	short := bytes.NewReader(make([]byte, 10))
	if _, err := otherCoat(t, short).Seal(nil, []byte("body")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short nonce source: %v", err)
	}
	priv, pub := key32(t, mainShortPriHex), key32(t, otherShortPubHex)
	var zero [32]byte
	for name, k := range map[string][2]*[32]byte{
		"nil priv": {nil, pub}, "nil pub": {priv, nil}, "low-order pub": {priv, &zero},
	} {
		if _, err := NewNaClCoat(k[0], k[1], nil); !errors.Is(err, ErrWeakKey) {
			t.Errorf("%s: %v, want ErrWeakKey", name, err)
		}
	}
}

func TestNadaCoat(t *testing.T) {
	var c NadaCoat
	if c.Kind() != codec.CoatKindNada || c.Overhead() != 0 {
		t.Fatal("kind or overhead")
	}
	out, _ := c.Seal([]byte("a"), []byte("bc"))
	back, _ := c.Open(nil, out[1:])
	if string(out) != "abc" || string(back) != "bc" {
		t.Fatalf("%q %q", out, back)
	}
	buf := []byte("inplace")
	if out, _ := c.Seal(buf[:0], buf); string(out) != "inplace" {
		t.Fatalf("in place: %q", out)
	}
}

func FuzzNaClCoatOpen(f *testing.F) {
	seal, open := otherCoat(f, nil), mainCoat(f)
	f.Add(vectorCoat(f))
	for _, s := range []string{"", "x", vectorBody, string(make([]byte, 300))} {
		c, _ := seal.Seal(nil, []byte(s))
		f.Add(c)
	}
	f.Add(make([]byte, 39))
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := open.Open([]byte("p"), data)
		switch {
		case len(data) == 0:
			if err != nil || string(out) != "p" {
				t.Fatalf("empty coat: %q, %v", out, err)
			}
		case len(data) < NaClOverhead:
			if !errors.Is(err, ErrCoatShort) {
				t.Fatalf("short coat: %v", err)
			}
		case err != nil:
			if !errors.Is(err, ErrCoatOpen) || string(out) != "p" {
				t.Fatalf("bad coat: %q, %v", out, err)
			}
		default:
			if len(out) != 1+len(data)-NaClOverhead {
				t.Fatalf("opened %d bytes from %d", len(out), len(data))
			}
		}
		// Round trip, treating data as a body.
		coat, err := seal.Seal(nil, data)
		if err != nil {
			t.Fatal(err)
		}
		back, err := open.Open(nil, coat)
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func benchCoat(b *testing.B, openIt bool) {
	seal, open := otherCoat(b, nil), mainCoat(b)
	plain := make([]byte, 1024)
	coat, _ := seal.Seal(nil, plain)
	dst := make([]byte, 0, len(coat))
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if openIt {
			_, err = open.Open(dst, coat)
		} else {
			_, err = seal.Seal(dst, plain)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNaClCoatSeal1K(b *testing.B) { benchCoat(b, false) }
func BenchmarkNaClCoatOpen1K(b *testing.B) { benchCoat(b, true) }

// For comparison: box.Seal and box.Open without a precomputed key, as
// libnacl's crypto_box does for every packet in the reference.
func BenchmarkBoxSealNoPrecompute1K(b *testing.B) {
	priv, pub := key32(b, otherShortPriHex), key32(b, mainShortPubHex)
	plain := make([]byte, 1024)
	var nonce [24]byte
	dst := make([]byte, 0, 1024+box.Overhead)
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		box.Seal(dst, plain, &nonce, pub, priv)
	}
}

func BenchmarkBoxOpenNoPrecompute1K(b *testing.B) {
	priv, pub := key32(b, mainShortPriHex), key32(b, otherShortPubHex)
	var nonce [24]byte
	sealed := box.Seal(nil, make([]byte, 1024), &nonce, key32(b, mainShortPubHex), key32(b, otherShortPriHex))
	dst := make([]byte, 0, 1024)
	b.SetBytes(1024)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := box.Open(dst, sealed, &nonce, pub, priv); !ok {
			b.Fatal("open failed")
		}
	}
}

// One coat and one foot serve many goroutines (run with -race).
func TestConcurrentUse(t *testing.T) {
	seal, open := otherCoat(t, nil), mainCoat(t)
	a, b := macPair(t)
	nf := otherFoot(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				body := []byte{byte(g), byte(i), 1, 2, 3}
				coat, err := seal.Seal(nil, body)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := open.Open(nil, coat); err != nil || !bytes.Equal(got, body) {
					t.Errorf("open: %v", err)
					return
				}
				pkt, _ := a.Sign(bytes.Clone(coat))
				if err := b.Verify(pkt[:len(coat)], pkt[len(coat):], 0); err != nil {
					t.Errorf("mac: %v", err)
					return
				}
				if i%10 == 0 {
					pkt, _ = nf.Sign(bytes.Clone(coat))
					if err := nf.Verify(pkt[:len(coat)], pkt[len(coat):], vectorDe); err != nil {
						t.Errorf("nacl: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
