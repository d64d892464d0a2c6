package keys

import (
	"bytes"
	"crypto/ed25519"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"
)

// Vectors captured from the reference (raet-protocol.md §7.4).
var vectors = []struct {
	name                           string
	sighex, verhex, prihex, pubhex string
}{
	{
		name:   "other",
		sighex: "29d9b81c6a449f5b730e1071ab4451cc409f6b0fa25acd7045c01954922c1e6b",
		verhex: "516b4dd774b4eeabdc8b0b2a9e7392c6cc5a6573cc7f86715ebd62e2fa15a402",
		prihex: "fb47b518e7ecdc67b5a197a7f189c77ad0ffc71d302fb1f6a60aaab5e3bfb56c",
		pubhex: "05d61b6746820505ee55768ddb5e38bc4c80e052dc1b26b7ea9db6b2c26d5a26",
	},
	{
		name:   "main",
		sighex: "378f61b6b73cb051458624f9f970e4853ecc58308e69d719738ca3ed7db36ec1",
		verhex: "551238481fe3504ca9c287ae062e72a2cf3c82cbb4fa16e3b1a24f3db75ec62e",
		prihex: "8985d11cb2e2fecb083005f376c829b18d8f76ef7e22354a639e5682876562c5",
		pubhex: "67ae79935472c98f2c086138e83a90043bed87f04c373ba9ef52b08b4096791c",
	},
	{
		// Short-term pairs of the same capture: Curve25519 only.
		name:   "other-short-term",
		prihex: "211f3b713dfa4e8c79327b7a17a775eec955823d76af31047a5e0930eb0574f0",
		pubhex: "ea798c24f06f4436d8adc1327ff28506fcfa4cfde84c7b37ff677d30935c9163",
	},
	{
		name:   "main-short-term",
		prihex: "714f9552809f71545c6efe6b24a8e8b3d2a2e2e6c928f5920c748dc1e38e1f58",
		pubhex: "799a4818ec3d54dae1fb3122cf2cd18c4a7aeb5f25a17fe33576730cbaf6be7a",
	},
}

func TestVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			if v.sighex != "" {
				seed, err := ParseSigningSeed(v.sighex)
				if err != nil {
					t.Fatalf("ParseSigningSeed: %v", err)
				}
				if got := seed.VerifyKey().Hex(); got != v.verhex {
					t.Errorf("verhex = %s, want %s", got, v.verhex)
				}
				pair := NewSigning(seed)
				if pair.Verify.Hex() != v.verhex || !pair.Seed.Equal(seed) {
					t.Errorf("NewSigning = %s, want verhex %s", pair.Verify.Hex(), v.verhex)
				}
				if got := seed.Hex(); got != v.sighex {
					t.Errorf("sighex round trip = %s, want %s", got, v.sighex)
				}
			}
			pri, err := ParsePrivateKey(v.prihex)
			if err != nil {
				t.Fatalf("ParsePrivateKey: %v", err)
			}
			pub, err := pri.PublicKey()
			if err != nil {
				t.Fatalf("PublicKey: %v", err)
			}
			if pub.Hex() != v.pubhex {
				t.Errorf("pubhex = %s, want %s", pub.Hex(), v.pubhex)
			}
			bx, err := NewBox(pri)
			if err != nil {
				t.Fatalf("NewBox: %v", err)
			}
			if bx.Public.Hex() != v.pubhex || !bx.Private.Equal(pri) {
				t.Errorf("NewBox public = %s, want %s", bx.Public.Hex(), v.pubhex)
			}
		})
	}
}

// TestCapturedFoot checks the foot of the packet captured from the reference
// (§7.4): it verifies with other's verhex parsed by this package, and re-signing
// with the seed reproduces it byte for byte. (Opening the coat needs nacl/box and
// belongs to the crypto package's tests.)
func TestCapturedFoot(t *testing.T) {
	const packet = "726920524145540a706c20303064640a686c2034380a66672030340a73652063610a64652036360a736920320a746920340a626b20310a636b20310a666b20310a666c2034300a0a7a0455658ca9ff02ad2de08d5d5c13b737a6e3dc6002b6c9ea96b818fbdaf302b3ea2720007d184b14da66f34c4a0949e3541f2075fa2499b12a3d8700d143974c0949c4289c3f5df2050209da443e71846a5a0da528967fdba57d025add56745920be25e0045fcfdf40e4643074b6218b9381d3158bf77bccabf5cfe9d8adc76585c857c8845d8762bf68c050077d3e16574de20e"
	raw := mustHex(t, packet)
	if len(raw) != 221 {
		t.Fatalf("packet length %d, want 221", len(raw))
	}
	foot := raw[len(raw)-64:]
	seed, err := ParseSigningSeed(vectors[0].sighex)
	if err != nil {
		t.Fatal(err)
	}
	signed := append(append([]byte(nil), raw[:len(raw)-64]...), make([]byte, 64)...)
	if !ed25519.Verify(seed.VerifyKey().Ed25519(), signed, foot) {
		t.Error("captured foot does not verify with other's verhex")
	}
	if sig := ed25519.Sign(seed.Ed25519(), signed); !bytes.Equal(sig, foot) {
		t.Error("re-signing does not reproduce the captured foot")
	}
	main, _ := ParseSigningSeed(vectors[1].sighex)
	if ed25519.Verify(main.VerifyKey().Ed25519(), signed, foot) {
		t.Error("captured foot verifies with the wrong key")
	}
}

func mustHex(t *testing.T, s string) []byte {
	t.Helper()
	b := make([]byte, len(s)/2)
	for i := range b {
		var v byte
		if _, err := fmt.Sscanf(s[2*i:2*i+2], "%02x", &v); err != nil {
			t.Fatal(err)
		}
		b[i] = v
	}
	return b
}

// parsers gives each type's parser behind one signature, for table tests.
var parsers = map[string]func(string) (string, error){
	"sighex": func(s string) (string, error) { k, err := ParseSigningSeed(s); return k.Hex(), err },
	"verhex": func(s string) (string, error) { k, err := ParseVerifyKey(s); return k.Hex(), err },
	"prihex": func(s string) (string, error) { k, err := ParsePrivateKey(s); return k.Hex(), err },
	"pubhex": func(s string) (string, error) { k, err := ParsePublicKey(s); return k.Hex(), err },
}

func TestParseErrors(t *testing.T) {
	good := vectors[0].sighex
	cases := []struct {
		name  string
		in    string
		want  error
		where string // substring expected in the message
	}{
		{"empty", "", ErrLength, "got 0 characters"},
		{"short", good[:63], ErrLength, "got 63 characters"},
		{"long", good + "0", ErrLength, "got 65 characters"},
		{"raw 32 bytes", string(make([]byte, 32)), ErrLength, "got 32 characters"},
		{"0x prefix", "0x" + good[2:], ErrNotHex, "offset 1"},
		{"space", " " + good[1:], ErrNotHex, "offset 0"},
		{"g at end", good[:63] + "g", ErrNotHex, "offset 63"},
		{"non-ascii", good[:62] + "é", ErrNotHex, "offset 62"},
	}
	for typ, parse := range parsers {
		for _, c := range cases {
			t.Run(typ+"/"+c.name, func(t *testing.T) {
				got, err := parse(c.in)
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				if !strings.Contains(err.Error(), typ) || !strings.Contains(err.Error(), c.where) {
					t.Errorf("message %q lacks %q or %q", err, typ, c.where)
				}
				if strings.Contains(err.Error(), good[4:20]) {
					t.Errorf("message %q echoes the input", err)
				}
				if got != strings.Repeat("0", HexLen) {
					t.Errorf("value on error = %s, want zero", got)
				}
			})
		}
	}
}

func TestParseUppercase(t *testing.T) {
	for typ, parse := range parsers {
		for _, v := range vectors[:2] {
			in := map[string]string{"sighex": v.sighex, "verhex": v.verhex, "prihex": v.prihex, "pubhex": v.pubhex}[typ]
			got, err := parse(strings.ToUpper(in))
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			if got != in {
				t.Errorf("%s: Hex() = %s, want lowercase %s", typ, got, in)
			}
		}
	}
}

func TestTextRoundTrip(t *testing.T) {
	sg := GenerateSigning()
	bx, err := GenerateBox()
	if err != nil {
		t.Fatal(err)
	}
	type textKey interface {
		encoding.TextMarshaler
		Hex() string
	}
	cases := []struct {
		name string
		in   textKey
		out  interface {
			encoding.TextUnmarshaler
			Hex() string
		}
	}{
		{"sighex", sg.Seed, new(SigningSeed)},
		{"verhex", sg.Verify, new(VerifyKey)},
		{"prihex", bx.Private, new(PrivateKey)},
		{"pubhex", bx.Public, new(PublicKey)},
	}
	for _, c := range cases {
		text, err := c.in.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		if string(text) != c.in.Hex() || string(text) != strings.ToLower(string(text)) || len(text) != HexLen {
			t.Errorf("%s: MarshalText = %q", c.name, text)
		}
		if err := c.out.UnmarshalText(text); err != nil {
			t.Fatalf("%s: UnmarshalText: %v", c.name, err)
		}
		if c.out.Hex() != c.in.Hex() {
			t.Errorf("%s: round trip %s != %s", c.name, c.out.Hex(), c.in.Hex())
		}
		// A failed UnmarshalText leaves the value unchanged.
		if err := c.out.UnmarshalText([]byte("zz")); !errors.Is(err, ErrLength) {
			t.Errorf("%s: UnmarshalText(bad) = %v", c.name, err)
		}
		if c.out.Hex() != c.in.Hex() {
			t.Errorf("%s: value changed by failed UnmarshalText", c.name)
		}
	}

	// Through encoding/json, as a struct field.
	type doc struct {
		Verify VerifyKey `json:"verhex"`
		Public PublicKey `json:"pubhex"`
	}
	b, err := json.Marshal(doc{sg.Verify, bx.Public})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"verhex":"` + sg.Verify.Hex() + `","pubhex":"` + bx.Public.Hex() + `"}`
	if string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
	var back doc
	if err := json.Unmarshal(b, &back); err != nil || !back.Verify.Equal(sg.Verify) || !back.Public.Equal(bx.Public) {
		t.Errorf("json round trip: %v %+v", err, back)
	}
}

func TestGenerate(t *testing.T) {
	a, b := GenerateSigning(), GenerateSigning()
	if a.Seed.IsZero() || a.Verify.IsZero() || a.Seed.Equal(b.Seed) || a.Verify.Equal(b.Verify) {
		t.Fatal("GenerateSigning gave a zero or repeated key")
	}
	if !a.Verify.Equal(a.Seed.VerifyKey()) {
		t.Error("GenerateSigning verify key does not derive from seed")
	}
	msg := []byte("raet")
	if !ed25519.Verify(a.Verify.Ed25519(), msg, ed25519.Sign(a.Seed.Ed25519(), msg)) {
		t.Error("signature by generated seed does not verify")
	}

	x, err := GenerateBox()
	if err != nil {
		t.Fatal(err)
	}
	y, err := GenerateBox()
	if err != nil {
		t.Fatal(err)
	}
	if x.Private.IsZero() || x.Public.IsZero() || x.Private.Equal(y.Private) {
		t.Fatal("GenerateBox gave a zero or repeated key")
	}
	// Generated pairs agree on a shared secret (the crypto_box beforenm input).
	xy, err1 := curve25519.X25519(x.Private[:], y.Public[:])
	yx, err2 := curve25519.X25519(y.Private[:], x.Public[:])
	if err1 != nil || err2 != nil || !bytes.Equal(xy, yx) {
		t.Errorf("X25519 agreement failed: %v %v", err1, err2)
	}
}

func TestZeroAndEqual(t *testing.T) {
	var s SigningSeed
	var v VerifyKey
	var p PrivateKey
	var q PublicKey
	if !s.IsZero() || !v.IsZero() || !p.IsZero() || !q.IsZero() {
		t.Fatal("zero values are not IsZero")
	}
	for i := 0; i < Size; i++ {
		s2, v2, p2, q2 := s, v, p, q
		s2[i], v2[i], p2[i], q2[i] = 1, 1, 1, 1
		if s2.IsZero() || v2.IsZero() || p2.IsZero() || q2.IsZero() {
			t.Fatalf("byte %d set but IsZero", i)
		}
		if s2.Equal(s) || v2.Equal(v) || p2.Equal(p) || q2.Equal(q) {
			t.Fatalf("byte %d differs but Equal", i)
		}
		if !s2.Equal(s2) || !v2.Equal(v2) || !p2.Equal(p2) || !q2.Equal(q2) {
			t.Fatalf("byte %d: not Equal to itself", i)
		}
	}
}

func TestSecretsRedacted(t *testing.T) {
	seed, _ := ParseSigningSeed(vectors[0].sighex)
	pri, _ := ParsePrivateKey(vectors[0].prihex)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%x", "%X", "%d", "%q"} {
		for _, out := range []string{fmt.Sprintf(verb, seed), fmt.Sprintf(verb, pri),
			fmt.Sprintf(verb, struct{ S SigningSeed }{seed}), fmt.Sprintf(verb, []PrivateKey{pri})} {
			if !strings.Contains(out, "redacted") {
				t.Errorf("%s printed %q without redaction", verb, out)
			}
			for _, secret := range []string{vectors[0].sighex, vectors[0].prihex} {
				if strings.Contains(strings.ToLower(out), secret[:16]) || strings.Contains(out, fmt.Sprint(seed[0])+" "+fmt.Sprint(seed[1])) {
					t.Errorf("%s leaked the secret: %q", verb, out)
				}
			}
		}
	}
	verify := seed.VerifyKey()
	if fmt.Sprint(verify) != vectors[0].verhex {
		t.Errorf("public key prints as %q, want hex", fmt.Sprint(verify))
	}
}

// TestSharedKey checks SharedKey against golang.org/x/crypto's
// crypto_box_beforenm (box.Precompute) and PublicKey against its X25519
// with the base point, for random pairs (the private keys unclamped, their
// top bits set or not, as the reference stores them), and that both sides
// get the same key.
func TestSharedKey(t *testing.T) {
	rnd := mathrand.New(mathrand.NewPCG(1, 2))
	for i := range 64 {
		var a, b PrivateKey
		for j := range Size {
			a[j], b[j] = byte(rnd.Uint32()), byte(rnd.Uint32())
		}
		if i%2 == 0 {
			a[Size-1] |= 0x80 // not clamped: X25519 clamps
		}
		pa, err := a.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		want, err := curve25519.X25519(a[:], curve25519.Basepoint)
		if err != nil || !bytes.Equal(pa[:], want) {
			t.Fatalf("PublicKey = %x, want %x (%v)", pa, want, err)
		}
		pb, _ := b.PublicKey()
		ab, err := a.SharedKey(pb)
		if err != nil {
			t.Fatal(err)
		}
		ba, err := b.SharedKey(pa)
		if err != nil {
			t.Fatal(err)
		}
		var ref [Size]byte
		box.Precompute(&ref, (*[Size]byte)(&pb), (*[Size]byte)(&a))
		if ab != ref || ba != ref {
			t.Fatalf("SharedKey: %x and %x, box.Precompute %x", ab, ba, ref)
		}
	}
}

// TestSharedKeyLowOrder checks that SharedKey refuses the public keys of
// low order, whose shared secret is all zeros, as libsodium does.
func TestSharedKeyLowOrder(t *testing.T) {
	pri, _ := ParsePrivateKey(vectors[0].prihex)
	for _, h := range []string{
		"0000000000000000000000000000000000000000000000000000000000000000", // 0
		"0100000000000000000000000000000000000000000000000000000000000000", // 1
		"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800", // order 8
		"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", // p - 1
	} {
		pub, err := ParsePublicKey(h)
		if err != nil {
			t.Fatal(err)
		}
		if k, err := pri.SharedKey(pub); !errors.Is(err, ErrLowOrder) || k != [Size]byte{} {
			t.Errorf("SharedKey(%s) = %x, %v; want ErrLowOrder", h, k, err)
		}
	}
}
