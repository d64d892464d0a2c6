package handshake

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"strings"
	"testing"

	"golang.org/x/crypto/nacl/box"

	"github.com/raet-go/raet/keys"
)

// party is one side of a handshake: its long-term and short-term pairs and
// its uid for the other side.
type party struct {
	long, short keys.Box
	uid         uint32 // this side's uid for the other (its nuid of it)
	fqdn        string
}

func genBox(t testing.TB) keys.Box {
	t.Helper()
	b, err := keys.GenerateBox()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newPair(t testing.TB) (i, r party) {
	t.Helper()
	i = party{long: genBox(t), short: genBox(t), uid: 0xca, fqdn: "other.example.com"}
	r = party{long: genBox(t), short: genBox(t), uid: 0x66, fqdn: "main.example.com"}
	return i, r
}

// flow is one complete handshake: the three bodies and what each side kept.
type flow struct {
	i, r     party
	hello    []byte
	cookie   []byte
	oreo     Oreo
	initiate []byte
}

func (f *flow) want() InitiateWant {
	return InitiateWant{IShortPub: f.i.short.Public, Oreo: f.oreo, ILongPub: f.i.long.Public, FQDN: f.r.fqdn}
}

func newFlow(t testing.TB) *flow {
	t.Helper()
	f := &flow{}
	f.i, f.r = newPair(t)
	var err error
	if f.hello, _, err = MakeHello(nil, f.i.short, f.r.long.Public); err != nil {
		t.Fatal(err)
	}
	if f.cookie, f.oreo, err = MakeCookie(nil, boxKey(f.r.long.Private, f.i.short.Public), f.r.short.Public, f.r.uid, f.i.uid); err != nil {
		t.Fatal(err)
	}
	if f.initiate, _, err = MakeInitiate(nil, f.i.short, f.i.long, f.r.short.Public, f.r.long.Public, f.oreo, f.r.fqdn); err != nil {
		t.Fatal(err)
	}
	return f
}

// wantErr fails unless err is an *Error of step and what that wraps target.
func wantErr(t *testing.T, err error, step Step, what string, target error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s %s %v", step, what, target)
	}
	var he *Error
	if !errors.As(err, &he) {
		t.Fatalf("error %T %v is not *Error", err, err)
	}
	if he.Step != step || he.What != what || !errors.Is(err, target) {
		t.Fatalf("error %q (step %s, what %q), want step %s, what %q, wrapping %v", err, he.Step, he.What, step, what, target)
	}
}

func TestSizes(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"HelloSize", HelloSize, 200},
		{"CookieSize", CookieSize, 104},
		{"InitiateSize", InitiateSize, 328},
		{"cookie stuff", cookieStuffLen, 64},
		{"initiate stuff", initiateStuffLen, 232},
		{"vouch box", vouchBoxLen, 48},
		{"initiate box", initiateBoxLen, 248},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	f := newFlow(t)
	if len(f.hello) != 200 || len(f.cookie) != 104 || len(f.initiate) != 328 {
		t.Fatalf("body sizes %d/%d/%d, want 200/104/328", len(f.hello), len(f.cookie), len(f.initiate))
	}
}

func TestRoundTrip(t *testing.T) {
	for n := 0; n < 20; n++ {
		f := newFlow(t)

		// R receives the hello.
		iShortPub, _, err := OpenHello(f.hello, f.r.long.Private)
		if err != nil {
			t.Fatal(err)
		}
		if iShortPub != f.i.short.Public {
			t.Fatalf("OpenHello gave %v, want %v", iShortPub, f.i.short.Public)
		}
		if !bytes.Equal(f.hello[:64], []byte(strings.Repeat("0", 64))) {
			t.Fatalf("hello plain %q", f.hello[:64])
		}

		// I receives the cookie: it expects seid = its fuid of R = R's uid for
		// I, deid = its nuid of R.
		c, err := OpenCookie(f.cookie, boxKey(f.i.short.Private, f.r.long.Public), f.r.uid, f.i.uid)
		if err != nil {
			t.Fatal(err)
		}
		want := Cookie{RShortPub: f.r.short.Public, SEID: f.r.uid, DEID: f.i.uid, Oreo: f.oreo}
		if c != want {
			t.Fatalf("OpenCookie gave %+v, want %+v", c, want)
		}

		// R receives the initiate.
		in, _, err := OpenInitiate(f.initiate, f.r.short.Private, f.r.long.Private, f.want())
		if err != nil {
			t.Fatal(err)
		}
		wantIn := Initiate{ILongPub: f.i.long.Public, FQDN: f.r.fqdn, FQDNMatch: true}
		if in != wantIn {
			t.Fatalf("OpenInitiate gave %+v, want %+v", in, wantIn)
		}
		if !bytes.Equal(f.initiate[:32], f.i.short.Public[:]) || !bytes.Equal(f.initiate[32:56], f.oreo[:]) {
			t.Fatal("initiate does not start with I's short pub and the oreo")
		}
	}
}

// Each side's short-term keys are fresh per handshake, so two handshakes
// with the same long-term keys share no nonce, oreo or box.
func TestFreshRandomness(t *testing.T) {
	i, r := newPair(t)
	h1, _, _ := MakeHello(nil, i.short, r.long.Public)
	h2, _, _ := MakeHello(nil, i.short, r.long.Public)
	if bytes.Equal(h1[176:], h2[176:]) {
		t.Fatal("two hellos with the same nonce")
	}
	_, o1, _ := MakeCookie(nil, boxKey(r.long.Private, i.short.Public), r.short.Public, 1, 2)
	_, o2, _ := MakeCookie(nil, boxKey(r.long.Private, i.short.Public), r.short.Public, 1, 2)
	if o1 == o2 {
		t.Fatal("two cookies with the same oreo")
	}
}

// sharedKey must be crypto_box_beforenm, i.e. what box.Precompute gives.
func TestSharedKeyIsPrecompute(t *testing.T) {
	for n := 0; n < 20; n++ {
		a, b := genBox(t), genBox(t)
		got, err := sharedKey(a.Private, b.Public, StepHello, "box")
		if err != nil {
			t.Fatal(err)
		}
		var want [32]byte
		box.Precompute(&want, (*[32]byte)(&b.Public), (*[32]byte)(&a.Private))
		if *got != want {
			t.Fatal("sharedKey differs from box.Precompute")
		}
		other, _ := sharedKey(b.Private, a.Public, StepHello, "box")
		if *other != *got {
			t.Fatal("sharedKey is not symmetric")
		}
	}
}

// lowOrder is a Curve25519 point of order 8 (from the list of Bernstein's
// Curve25519 page); X25519 with it gives all zeros for every scalar.
var lowOrder = keys.PublicKey{
	0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a,
	0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00,
}

func TestLowOrderKeys(t *testing.T) {
	i, r := newPair(t)
	for _, pub := range []keys.PublicKey{{}, {1}, lowOrder} {
		_, _, err := MakeHello(nil, i.short, pub)
		wantErr(t, err, StepHello, "box", ErrKey)
		_, _, err = MakeInitiate(nil, i.short, i.long, pub, r.long.Public, Oreo{}, "x")
		wantErr(t, err, StepInitiate, "box", ErrKey)
		_, _, err = MakeInitiate(nil, i.short, i.long, r.short.Public, pub, Oreo{}, "x")
		wantErr(t, err, StepInitiate, "vouch", ErrKey)

		// A hello carrying a low-order short-term key.
		h, _, err := MakeHello(nil, i.short, r.long.Public)
		if err != nil {
			t.Fatal(err)
		}
		copy(h[64:96], pub[:])
		_, _, err = OpenHello(h, r.long.Private)
		wantErr(t, err, StepHello, "box", ErrKey)
		// (The cookie's box is under the hello's key, refused here.)
	}
}

// boxKey is the Key of priv and pub, for the boxes of a test.
func boxKey(priv keys.PrivateKey, pub keys.PublicKey) *Key {
	k, err := priv.SharedKey(pub)
	if err != nil {
		panic(err)
	}
	return &k
}

// TestKeysAgree: the Key MakeHello returns is the one OpenHello returns
// (the cookie's), and MakeInitiate's session Key is OpenInitiate's: both
// sides' crypto_box key of the two short-term pairs.
func TestKeysAgree(t *testing.T) {
	f := newFlow(t)
	_, hk, err := MakeHello(nil, f.i.short, f.r.long.Public)
	if err != nil {
		t.Fatal(err)
	}
	_, rk, err := OpenHello(f.hello, f.r.long.Private)
	if err != nil {
		t.Fatal(err)
	}
	if *hk != *rk || *hk != *boxKey(f.i.short.Private, f.r.long.Public) {
		t.Error("the hello's keys differ")
	}
	_, ik, err := MakeInitiate(nil, f.i.short, f.i.long, f.r.short.Public, f.r.long.Public, f.oreo, f.r.fqdn)
	if err != nil {
		t.Fatal(err)
	}
	_, sk, err := OpenInitiate(f.initiate, f.r.short.Private, f.r.long.Private, f.want())
	if err != nil {
		t.Fatal(err)
	}
	if *ik != *sk || *sk != *boxKey(f.r.short.Private, f.i.short.Public) {
		t.Error("the session keys differ")
	}
}

// errReader fails after giving n bytes.
type errReader struct {
	n   int
	err error
}

func (r *errReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	for j := range p[:k] {
		p[j] = 0xaa
	}
	r.n -= k
	return k, nil
}

func TestRandomFailure(t *testing.T) {
	i, r := newPair(t)
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		n    int
		step Step
		what string
		run  func(io.Reader) error
	}{
		{"hello nonce", 0, StepHello, "box nonce", func(rd io.Reader) error {
			_, _, err := MakeHello(rd, i.short, r.long.Public)
			return err
		}},
		{"cookie oreo", 10, StepCookie, "oreo", func(rd io.Reader) error {
			_, _, err := MakeCookie(rd, boxKey(r.long.Private, i.short.Public), r.short.Public, 1, 2)
			return err
		}},
		{"cookie nonce", 24, StepCookie, "box nonce", func(rd io.Reader) error {
			_, _, err := MakeCookie(rd, boxKey(r.long.Private, i.short.Public), r.short.Public, 1, 2)
			return err
		}},
		{"vouch nonce", 0, StepInitiate, "vouch nonce", func(rd io.Reader) error {
			_, _, err := MakeInitiate(rd, i.short, i.long, r.short.Public, r.long.Public, Oreo{}, "x")
			return err
		}},
		{"initiate nonce", 30, StepInitiate, "box nonce", func(rd io.Reader) error {
			_, _, err := MakeInitiate(rd, i.short, i.long, r.short.Public, r.long.Public, Oreo{}, "x")
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.run(&errReader{n: c.n, err: boom})
			wantErr(t, err, c.step, c.what, ErrRandom)
			if !errors.Is(err, boom) {
				t.Fatalf("%v does not wrap the reader's error", err)
			}
		})
	}
	// A reader that runs dry mid-value gives io.ErrUnexpectedEOF.
	_, _, err := MakeHello(bytes.NewReader(make([]byte, 10)), i.short, r.long.Public)
	if !errors.Is(err, ErrRandom) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short reader: %v", err)
	}
}

func TestLengths(t *testing.T) {
	f := newFlow(t)
	for _, c := range []struct {
		step Step
		body []byte
		open func([]byte) error
	}{
		{StepHello, f.hello, func(b []byte) error { _, _, err := OpenHello(b, f.r.long.Private); return err }},
		{StepCookie, f.cookie, func(b []byte) error {
			_, err := OpenCookie(b, boxKey(f.i.short.Private, f.r.long.Public), f.r.uid, f.i.uid)
			return err
		}},
		{StepInitiate, f.initiate, func(b []byte) error {
			_, _, err := OpenInitiate(b, f.r.short.Private, f.r.long.Private, f.want())
			return err
		}},
	} {
		for _, n := range []int{0, 1, len(c.body) - 1, len(c.body) + 1, 2 * len(c.body)} {
			b := make([]byte, n)
			copy(b, c.body)
			wantErr(t, c.open(b), c.step, "length", ErrLength)
		}
		if err := c.open(nil); !errors.Is(err, ErrLength) {
			t.Fatalf("%s nil body: %v", c.step, err)
		}
		if err := c.open(c.body); err != nil {
			t.Fatalf("%s: %v", c.step, err)
		}
	}
}

// region is a part of a body and the error a changed byte in it causes.
type region struct {
	name     string
	from, to int
	what     string
	target   error
}

// flipEach flips one bit (of bits 0..6, in turn) of every byte of body and
// checks open reports the error of the byte's region. Bit 7 is left alone:
// for the last byte of a public key it is ignored by X25519 (see
// TestHelloTopBit).
func flipEach(t *testing.T, step Step, body []byte, regions []region, open func([]byte) error) {
	t.Helper()
	covered := 0
	for _, rg := range regions {
		for k := rg.from; k < rg.to; k++ {
			b := bytes.Clone(body)
			b[k] ^= 0x01 << (k % 7)
			err := open(b)
			if err == nil {
				t.Fatalf("%s: byte %d (%s) changed, still accepted", step, k, rg.name)
			}
			var he *Error
			if !errors.As(err, &he) || he.Step != step || he.What != rg.what || !errors.Is(err, rg.target) {
				t.Fatalf("%s: byte %d (%s) changed: %v, want %s / %v", step, k, rg.name, err, rg.what, rg.target)
			}
			covered++
		}
	}
	if covered != len(body) {
		t.Fatalf("%s: regions cover %d bytes of %d", step, covered, len(body))
	}
}

func TestHelloChecks(t *testing.T) {
	f := newFlow(t)
	open := func(b []byte) error { _, _, err := OpenHello(b, f.r.long.Private); return err }
	flipEach(t, StepHello, f.hello, []region{
		{"plain", 0, 64, "plain", ErrMismatch},
		{"I short pub", 64, 96, "box", ErrOpen},
		{"box", 96, 176, "box", ErrOpen},
		{"nonce", 176, 200, "box", ErrOpen},
	}, open)

	// Wrong R long-term private key.
	_, _, err := OpenHello(f.hello, genBox(t).Private)
	wantErr(t, err, StepHello, "box", ErrOpen)
	// Boxed for another R.
	h, _, _ := MakeHello(nil, f.i.short, genBox(t).Public)
	wantErr(t, open(h), StepHello, "box", ErrOpen)
	// A short pub that is not the one of the boxing key.
	h = bytes.Clone(f.hello)
	other := genBox(t).Public
	copy(h[64:96], other[:])
	wantErr(t, open(h), StepHello, "box", ErrOpen)
}

// X25519 ignores the top bit of a public key (RFC 7748 §5), and libsodium
// does the same, so the reference too accepts a hello whose short-term key
// has that bit flipped. The altered key is what OpenHello returns, and the
// initiate, which carries I's real key, then fails its short-term key check.
func TestHelloTopBit(t *testing.T) {
	f := newFlow(t)
	h := bytes.Clone(f.hello)
	h[95] ^= 0x80
	got, _, err := OpenHello(h, f.r.long.Private)
	if err != nil {
		t.Fatalf("top bit flipped: %v", err)
	}
	if got == f.i.short.Public || got[31] != f.i.short.Public[31]^0x80 {
		t.Fatalf("OpenHello gave %v", got)
	}
	w := f.want()
	w.IShortPub = got
	_, _, err = OpenInitiate(f.initiate, f.r.short.Private, f.r.long.Private, w)
	wantErr(t, err, StepInitiate, "short-term key", ErrMismatch)
}

func TestCookieChecks(t *testing.T) {
	f := newFlow(t)
	open := func(b []byte) error {
		_, err := OpenCookie(b, boxKey(f.i.short.Private, f.r.long.Public), f.r.uid, f.i.uid)
		return err
	}
	flipEach(t, StepCookie, f.cookie, []region{
		{"box", 0, 80, "box", ErrOpen},
		{"nonce", 80, 104, "box", ErrOpen},
	}, open)

	_, err := OpenCookie(f.cookie, boxKey(genBox(t).Private, f.r.long.Public), f.r.uid, f.i.uid)
	wantErr(t, err, StepCookie, "box", ErrOpen)
	_, err = OpenCookie(f.cookie, boxKey(f.i.short.Private, genBox(t).Public), f.r.uid, f.i.uid)
	wantErr(t, err, StepCookie, "box", ErrOpen)
	// I's long-term key is not the one to open with.
	_, err = OpenCookie(f.cookie, boxKey(f.i.long.Private, f.r.long.Public), f.r.uid, f.i.uid)
	wantErr(t, err, StepCookie, "box", ErrOpen)

	// Wrong uids: the error names the field and the cookie is still given.
	want := Cookie{RShortPub: f.r.short.Public, SEID: f.r.uid, DEID: f.i.uid, Oreo: f.oreo}
	c, err := OpenCookie(f.cookie, boxKey(f.i.short.Private, f.r.long.Public), f.r.uid+1, f.i.uid)
	wantErr(t, err, StepCookie, "seid", ErrMismatch)
	if c != want {
		t.Fatalf("cookie with seid mismatch: %+v", c)
	}
	c, err = OpenCookie(f.cookie, boxKey(f.i.short.Private, f.r.long.Public), f.r.uid, f.i.uid+1)
	wantErr(t, err, StepCookie, "deid", ErrMismatch)
	if c != want {
		t.Fatalf("cookie with deid mismatch: %+v", c)
	}
	// seid and deid crossed over.
	_, err = OpenCookie(f.cookie, boxKey(f.i.short.Private, f.r.long.Public), f.i.uid, f.r.uid)
	wantErr(t, err, StepCookie, "seid", ErrMismatch)
	if !strings.Contains(err.Error(), "got 102, want 202") {
		t.Fatalf("message %q lacks the values", err)
	}
}

// sealInitiate builds an initiate body from its parts, so tests can send
// what MakeInitiate never would.
func sealInitiate(t *testing.T, iShortPub keys.PublicKey, oreo Oreo, iShortPriv keys.PrivateKey, rShortPub keys.PublicKey, stuff []byte) []byte {
	t.Helper()
	body := make([]byte, InitiateSize)
	copy(body, iShortPub[:])
	copy(body[32:], oreo[:])
	if err := seal(body[initiateBoxAt:initiateNonceAt], body[initiateNonceAt:], stuff, boxKey(iShortPriv, rShortPub), rand.Reader, StepInitiate, "box"); err != nil {
		t.Fatal(err)
	}
	return body
}

// makeStuff builds initiate stuff with a vouch for vouched, boxed with
// vouchPriv for rLongPub.
func makeStuff(t *testing.T, longPub keys.PublicKey, vouched keys.PublicKey, vouchPriv keys.PrivateKey, rLongPub keys.PublicKey, fqdn string) []byte {
	t.Helper()
	stuff := make([]byte, initiateStuffLen)
	copy(stuff, longPub[:])
	if err := seal(stuff[stuffVouchAt:stuffVouchNonceAt], stuff[stuffVouchNonceAt:stuffFQDNAt], vouched[:], boxKey(vouchPriv, rLongPub), rand.Reader, StepInitiate, "vouch"); err != nil {
		t.Fatal(err)
	}
	f := PadFQDN(fqdn)
	copy(stuff[stuffFQDNAt:], f[:])
	return stuff
}

func TestInitiateChecks(t *testing.T) {
	f := newFlow(t)
	open := func(b []byte) error {
		_, _, err := OpenInitiate(b, f.r.short.Private, f.r.long.Private, f.want())
		return err
	}
	flipEach(t, StepInitiate, f.initiate, []region{
		{"I short pub", 0, 32, "short-term key", ErrMismatch},
		{"oreo", 32, 56, "oreo", ErrMismatch},
		{"box", 56, 304, "box", ErrOpen},
		{"nonce", 304, 328, "box", ErrOpen},
	}, open)

	w := f.want()
	// R's expectations differ from what I sent.
	bad := w
	bad.IShortPub = genBox(t).Public
	_, _, err := OpenInitiate(f.initiate, f.r.short.Private, f.r.long.Private, bad)
	wantErr(t, err, StepInitiate, "short-term key", ErrMismatch)
	bad = w
	bad.Oreo[23] ^= 0x80
	_, _, err = OpenInitiate(f.initiate, f.r.short.Private, f.r.long.Private, bad)
	wantErr(t, err, StepInitiate, "oreo", ErrMismatch)
	bad = w
	bad.ILongPub = genBox(t).Public
	in, _, err := OpenInitiate(f.initiate, f.r.short.Private, f.r.long.Private, bad)
	wantErr(t, err, StepInitiate, "long-term key", ErrMismatch)
	if in.ILongPub != f.i.long.Public || in.FQDN != f.r.fqdn {
		t.Fatalf("long-term key mismatch: got %+v, want the received values", in)
	}

	// Wrong private keys at R.
	_, _, err = OpenInitiate(f.initiate, genBox(t).Private, f.r.long.Private, w)
	wantErr(t, err, StepInitiate, "box", ErrOpen)
	_, _, err = OpenInitiate(f.initiate, f.r.short.Private, genBox(t).Private, w)
	wantErr(t, err, StepInitiate, "vouch", ErrOpen)

	// Inner tampering, re-sealed with the right short-term keys, so only the
	// inner checks can catch it.
	reseal := func(stuff []byte) []byte {
		return sealInitiate(t, f.i.short.Public, f.oreo, f.i.short.Private, f.r.short.Public, stuff)
	}
	good := makeStuff(t, f.i.long.Public, f.i.short.Public, f.i.long.Private, f.r.long.Public, f.r.fqdn)
	if _, _, err := OpenInitiate(reseal(good), f.r.short.Private, f.r.long.Private, w); err != nil {
		t.Fatalf("re-sealed good stuff: %v", err)
	}
	for k := range initiateStuffLen {
		s := bytes.Clone(good)
		s[k] ^= 0x04
		_, _, err := OpenInitiate(reseal(s), f.r.short.Private, f.r.long.Private, w)
		switch {
		case k < stuffVouchAt:
			wantErr(t, err, StepInitiate, "long-term key", ErrMismatch)
		case k < stuffFQDNAt:
			wantErr(t, err, StepInitiate, "vouch", ErrOpen)
		default: // fqdn: reported, not an error
			if err != nil {
				t.Fatalf("fqdn byte %d changed: %v", k-stuffFQDNAt, err)
			}
		}
	}
	// A long-term key that vouches for another short-term key.
	s := makeStuff(t, f.i.long.Public, genBox(t).Public, f.i.long.Private, f.r.long.Public, f.r.fqdn)
	_, _, err = OpenInitiate(reseal(s), f.r.short.Private, f.r.long.Private, w)
	wantErr(t, err, StepInitiate, "vouch", ErrMismatch)
	// An impostor: its own long-term key, and a vouch from it.
	mallory := genBox(t)
	s = makeStuff(t, mallory.Public, f.i.short.Public, mallory.Private, f.r.long.Public, f.r.fqdn)
	_, _, err = OpenInitiate(reseal(s), f.r.short.Private, f.r.long.Private, w)
	wantErr(t, err, StepInitiate, "long-term key", ErrMismatch)
	// The joined long-term key with a vouch from another key.
	s = makeStuff(t, f.i.long.Public, f.i.short.Public, mallory.Private, f.r.long.Public, f.r.fqdn)
	_, _, err = OpenInitiate(reseal(s), f.r.short.Private, f.r.long.Private, w)
	wantErr(t, err, StepInitiate, "vouch", ErrOpen)
	// A vouch boxed for another R.
	s = makeStuff(t, f.i.long.Public, f.i.short.Public, f.i.long.Private, genBox(t).Public, f.r.fqdn)
	_, _, err = OpenInitiate(reseal(s), f.r.short.Private, f.r.long.Private, w)
	wantErr(t, err, StepInitiate, "vouch", ErrOpen)
	// An initiate from another short-term pair that R never saw a hello of.
	eve := genBox(t)
	_, _, err = OpenInitiate(sealInitiate(t, eve.Public, f.oreo, eve.Private, f.r.short.Public, good), f.r.short.Private, f.r.long.Private, w)
	wantErr(t, err, StepInitiate, "short-term key", ErrMismatch)
	// The right short pub in clear, but boxed by another pair.
	_, _, err = OpenInitiate(sealInitiate(t, f.i.short.Public, f.oreo, eve.Private, f.r.short.Public, good), f.r.short.Private, f.r.long.Private, w)
	wantErr(t, err, StepInitiate, "box", ErrOpen)
}

func TestPadFQDN(t *testing.T) {
	long := strings.Repeat("abcdefgh", 20) // 160
	for _, c := range []struct{ in, want string }{
		{"", strings.Repeat(" ", 128)},
		{"main.example.com", "main.example.com" + strings.Repeat(" ", 112)},
		{long, long[:128]},
		{long[:128], long[:128]},
		{long[:127] + "é", long[:127] + " "},
		{"héllo.例え.com", "hllo..com" + strings.Repeat(" ", 119)},
		{"bad\xff\xfe.utf8", "bad.utf8" + strings.Repeat(" ", 120)},
		{"a\tb ", "a\tb" + strings.Repeat(" ", 125)},
	} {
		got := PadFQDN(c.in)
		if string(got[:]) != c.want {
			t.Errorf("PadFQDN(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestInitiateFQDN(t *testing.T) {
	i, r := newPair(t)
	long := strings.Repeat("x", 130) + ".example.com"
	for _, c := range []struct {
		sent, local string // I's idea of R's name, R's own name
		got         string // Initiate.FQDN
		match       bool
	}{
		{"main.example.com", "main.example.com", "main.example.com", true},
		{"main.example.com", "other.example.com", "main.example.com", false},
		{"", "", "", true},
		{"", "main", "", false},
		{long, long, long[:128], true},             // both cut to 128
		{long, long[:128] + "y", long[:128], true}, // equal after the cut
		{"main.example.com   ", "main.example.com", "main.example.com", true}, // trailing spaces are padding
		{"mäin", "min", "min", true},                                          // non-ASCII dropped on both sides
		{"Main.example.com", "main.example.com", "Main.example.com", false},   // compared byte for byte, as the reference
	} {
		b, _, err := MakeInitiate(nil, i.short, i.long, r.short.Public, r.long.Public, Oreo{7}, c.sent)
		if err != nil {
			t.Fatal(err)
		}
		in, _, err := OpenInitiate(b, r.short.Private, r.long.Private,
			InitiateWant{IShortPub: i.short.Public, Oreo: Oreo{7}, ILongPub: i.long.Public, FQDN: c.local})
		if err != nil {
			t.Fatalf("sent %q: %v", c.sent, err)
		}
		if in.FQDN != c.got || in.FQDNMatch != c.match {
			t.Errorf("sent %q, local %q: FQDN %q match %v, want %q %v", c.sent, c.local, in.FQDN, in.FQDNMatch, c.got, c.match)
		}
	}
}

func TestErrorText(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&Error{Step: StepHello, What: "plain", Err: ErrMismatch}, "handshake: hello: plain: mismatch"},
		{lengthError(StepCookie, 3, 104), "handshake: cookie: length: wrong length: got 3 bytes, want 104"},
		{&Error{Step: StepInitiate, What: "vouch", Err: ErrOpen}, "handshake: initiate: vouch: box does not open"},
		{&Error{Step: 9}, "handshake: step 9: unknown error"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

// A hello may carry a plain of the allower's choosing (the reference checks
// only that its box opens to it): OpenHello takes it and HelloPlain reads
// it; the reference's plain is the zero plain.
func TestHelloPlain(t *testing.T) {
	iShort, _ := keys.GenerateBox()
	rLong, _ := keys.GenerateBox()
	var plain [HelloPlainSize]byte
	copy(plain[:], "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	body, _, err := MakeHelloPlain(nil, iShort, rLong.Public, plain)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := OpenHello(body, rLong.Private); err != nil {
		t.Fatal(err)
	}
	if got := HelloPlain(body); got != plain || IsZeroPlain(got) {
		t.Fatalf("plain %q", got)
	}
	body[0] ^= 1 // the plain no longer what the box holds
	if _, _, err := OpenHello(body, rLong.Private); err == nil {
		t.Fatal("a plain changed in transit was taken")
	}
	ref, _, err := MakeHello(nil, iShort, rLong.Public)
	if err != nil {
		t.Fatal(err)
	}
	if !IsZeroPlain(HelloPlain(ref)) {
		t.Fatal("the reference's plain is not the zero plain")
	}
}
