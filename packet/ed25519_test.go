package packet

// Ed25519 as NaClFoot does it (curve25519-voi with crypto/ed25519's rules)
// against crypto/ed25519 itself, and voi's batch verifier beside them.

import (
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oasisprotocol/curve25519-voi/curve"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// sigCase is a public key, message and signature, and whether the
// standard library accepts it (the reference's libsodium agrees on all but
// the small-order cases, which neither side's honest signer makes).
type sigCase struct {
	name     string
	pub, msg []byte
	sig      []byte
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// rfc8032 are the test vectors of RFC 8032 §7.1 (tests 1 to 3): seed,
// public key, message, signature.
var rfc8032 = [][4]string{
	{"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
		"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
		"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
	{"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
		"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
		"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
	{"c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7",
		"fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
		"6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"},
}

// order8 encodes a point of order 8 and identity the neutral point (both
// checked to be of small order by the test).
var (
	order8   = unhex("c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a")
	identity = unhex("0100000000000000000000000000000000000000000000000000000000000000")
	// groupOrder is L, little-endian.
	groupOrder = unhex("edd3f55c1a631258d69cf7a2def9de1400000000000000000000000000000010")
)

// addL returns s + L (little-endian): the same scalar, not canonical.
func addL(s []byte) []byte {
	out := make([]byte, 32)
	carry := 0
	for i := range out {
		v := int(s[i]) + int(groupOrder[i]) + carry
		out[i], carry = byte(v), v>>8
	}
	return out
}

// sigCases are the RFC 8032 vectors, valid signatures over random 1 KiB
// packets, and the ways a signature is wrong: another message, another
// key, a flipped bit, S not reduced (S+L: malleability), and small-order
// keys where only the verification equation decides.
func sigCases(t testing.TB) []sigCase {
	var cs []sigCase
	for i, v := range rfc8032 {
		seed, pub, msg, sig := unhex(v[0]), unhex(v[1]), unhex(v[2]), unhex(v[3])
		priv := ed25519.NewKeyFromSeed(seed)
		if !bytes.Equal(priv.Public().(ed25519.PublicKey), pub) || !bytes.Equal(ed25519.Sign(priv, msg), sig) {
			t.Fatalf("RFC 8032 test %d: the standard library does not reproduce the vector", i+1)
		}
		cs = append(cs, sigCase{fmt.Sprintf("rfc8032 test %d", i+1), pub, msg, sig})
	}
	rng := rand.NewChaCha8([32]byte{1})
	for i := range 16 {
		seed := make([]byte, 32)
		rng.Read(seed)
		priv := ed25519.NewKeyFromSeed(seed)
		pub := priv.Public().(ed25519.PublicKey)
		msg := make([]byte, 1024)
		rng.Read(msg)
		sig := ed25519.Sign(priv, msg)
		cs = append(cs, sigCase{fmt.Sprintf("valid %d", i), pub, msg, sig})
		other := append([]byte(nil), msg...)
		other[i] ^= 1
		cs = append(cs, sigCase{fmt.Sprintf("other message %d", i), pub, other, sig})
		flipped := append([]byte(nil), sig...)
		flipped[i*4%64] ^= 0x10
		cs = append(cs, sigCase{fmt.Sprintf("flipped bit %d", i), pub, msg, flipped})
		mall := append(append([]byte(nil), sig[:32]...), addL(sig[32:])...)
		cs = append(cs, sigCase{fmt.Sprintf("S+L %d", i), pub, msg, mall})
		otherKey := ed25519.NewKeyFromSeed(append(seed[1:], seed[0])).Public().(ed25519.PublicKey)
		cs = append(cs, sigCase{fmt.Sprintf("other key %d", i), otherKey, msg, sig})
		// A of order 8, R the identity, S = 0: [S]B = R + [k]A holds only
		// when 8 divides k = H(R || A || M); [8][S]B = [8]R + [8][k]A
		// always does.
		cs = append(cs, sigCase{fmt.Sprintf("small-order A %d", i), order8, msg, append(append([]byte(nil), identity...), make([]byte, 32)...)})
		cs = append(cs, sigCase{fmt.Sprintf("identity A %d", i), identity, msg, append(append([]byte(nil), identity...), make([]byte, 32)...)})
	}
	return cs
}

// TestEd25519MatchesStdlib checks the foot's Ed25519 against crypto/ed25519
// on every case: its verification (voi with the standard library's rules)
// must agree everywhere, and its signatures must be the same bytes. voi's
// batch verification is cofactored: it agrees on every case an honest
// signer can make and accepts small-order keys the standard library
// rejects, which is why the foot does not use it.
func TestEd25519MatchesStdlib(t *testing.T) {
	cs := sigCases(t)
	if !smallOrder(order8) || !smallOrder(identity) {
		t.Fatal("order8 is not a small-order point")
	}
	bv := voi.NewBatchVerifier()
	var std []bool
	for _, c := range cs {
		want := ed25519.Verify(c.pub, c.msg, c.sig)
		std = append(std, want)
		checkBothWays(t, c, want)
		bv.AddWithOptions(c.pub, c.msg, c.sig, batchOpts)
	}
	_, valid := bv.Verify(nil)
	divergent := 0
	for i, c := range cs {
		if valid[i] == std[i] {
			continue
		}
		if c.name[:5] != "small" {
			t.Errorf("%s: batch %v, stdlib %v", c.name, valid[i], std[i])
		}
		divergent++
	}
	if divergent == 0 {
		t.Error("batch verification agreed with the stdlib on every small-order case; it is cofactored, so it should not")
	}
	t.Logf("batch verification differs from the stdlib on %d of the 16 order-8-key signatures", divergent)
	for i, c := range cs[:len(rfc8032)+16] { // the vectors' keys, then others
		seed := bytes.Repeat([]byte{byte(i)}, 32)
		if i < len(rfc8032) {
			seed = unhex(rfc8032[i][0])
		}
		var s32 [32]byte
		copy(s32[:], seed)
		got, err := NewNaClFoot(&s32, nil).Sign(bytes.Clone(c.msg))
		want := ed25519.Sign(ed25519.NewKeyFromSeed(seed), append(bytes.Clone(c.msg), make([]byte, NaClFootSize)...))
		if err != nil || !bytes.Equal(got[len(c.msg):], want) {
			t.Errorf("%s: the foot signs %x, stdlib %x (%v)", c.name, got[len(c.msg):], want, err)
		}
	}
}

// checkBothWays checks that the foot's verifier gives the standard
// library's answer want on c with its key as given and, when the key is a
// point, expanded (expandedKeys).
func checkBothWays(t *testing.T, c sigCase, want bool) {
	t.Helper()
	if got := verifyEd25519(c.pub, nil, c.msg, c.sig); got != want {
		t.Errorf("%s: the foot's verifier %v, stdlib %v", c.name, got, want)
	}
	x, err := voi.NewExpandedPublicKey(c.pub)
	if err != nil {
		if want {
			t.Errorf("%s: the stdlib accepts a key voi cannot expand: %v", c.name, err)
		}
		return
	}
	if got := verifyEd25519(c.pub, x, c.msg, c.sig); got != want {
		t.Errorf("%s: the foot's verifier with the key expanded %v, stdlib %v", c.name, got, want)
	}
}

// TestEd25519EdgeVectors runs the edge-case vectors curve25519-voi ships
// (read from its module directory, not copied): C2SP's ed25519vectors (768
// cases: small-order and mixed-order A and R, non-canonical encodings) and
// the 12 cases of "Taming the many EdDSAs". The foot's verifier must give
// the standard library's answer on each; batch verification's
// disagreements are counted.
func TestEd25519EdgeVectors(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/oasisprotocol/curve25519-voi").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "primitives", "ed25519", "testdata")
	var cs []sigCase
	var c2sp []struct{ A, R, S, M string }
	readGz(t, filepath.Join(dir, "ed25519vectors.json.gz"), &c2sp)
	for i, v := range c2sp {
		cs = append(cs, sigCase{fmt.Sprintf("c2sp %d", i), unhex(v.A), []byte(v.M), unhex(v.R + v.S)})
	}
	var spec []struct {
		Message   string `json:"message"`
		PubKey    string `json:"pub_key"`
		Signature string `json:"signature"`
	}
	readGz(t, filepath.Join(dir, "speccheck_cases.json.gz"), &spec)
	for i, v := range spec {
		cs = append(cs, sigCase{fmt.Sprintf("speccheck %d", i), unhex(v.PubKey), unhex(v.Message), unhex(v.Signature)})
	}
	if len(c2sp) != 768 || len(spec) != 12 {
		t.Fatalf("%d C2SP and %d speccheck vectors, want 768 and 12", len(c2sp), len(spec))
	}
	accepted, batchDiffers := 0, 0
	for _, c := range cs {
		want := ed25519.Verify(c.pub, c.msg, c.sig)
		if want {
			accepted++
		}
		checkBothWays(t, c, want)
		bv := voi.NewBatchVerifier()
		bv.AddWithOptions(c.pub, c.msg, c.sig, batchOpts)
		if _, valid := bv.Verify(nil); valid[0] != want {
			batchDiffers++
		}
	}
	t.Logf("%d vectors, %d accepted by the stdlib; batch verification answers %d differently", len(cs), accepted, batchDiffers)
	if batchDiffers == 0 {
		t.Error("batch verification agreed with the stdlib everywhere; it is cofactored, so it should not")
	}
}

func readGz(t *testing.T, path string, v any) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.NewDecoder(zr).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// batchOpts are the closest to the standard library's rules that batch
// verification allows: cofactored, small-order and non-canonical A taken as
// it takes them.
var batchOpts = &voi.Options{Verify: &voi.VerifyOptions{AllowSmallOrderA: true, AllowSmallOrderR: true, AllowNonCanonicalA: true}}

// smallOrder reports whether the encoding is a point of small order.
func smallOrder(enc []byte) bool {
	c, err := curve.NewCompressedEdwardsYFromBytes(enc)
	if err != nil {
		return false
	}
	var p curve.EdwardsPoint
	if _, err := p.SetCompressedY(c); err != nil {
		return false
	}
	return p.IsSmallOrder()
}
