package keys_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"

	"github.com/raet-go/raet/keys"
)

func ExampleParseSigningSeed() {
	seed, err := keys.ParseSigningSeed("29d9b81c6a449f5b730e1071ab4451cc409f6b0fa25acd7045c01954922c1e6b")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("verhex:", seed.VerifyKey().Hex())
	fmt.Println("seed prints as:", seed)
	// Output:
	// verhex: 516b4dd774b4eeabdc8b0b2a9e7392c6cc5a6573cc7f86715ebd62e2fa15a402
	// seed prints as: [redacted]
}

func ExampleParsePrivateKey() {
	pri, err := keys.ParsePrivateKey("FB47B518E7ECDC67B5A197A7F189C77AD0FFC71D302FB1F6A60AAAB5E3BFB56C")
	if err != nil {
		fmt.Println(err)
		return
	}
	pub, err := pri.PublicKey()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("prihex:", pri.Hex())
	fmt.Println("pubhex:", pub.Hex())
	// Output:
	// prihex: fb47b518e7ecdc67b5a197a7f189c77ad0ffc71d302fb1f6a60aaab5e3bfb56c
	// pubhex: 05d61b6746820505ee55768ddb5e38bc4c80e052dc1b26b7ea9db6b2c26d5a26
}

func ExampleParseVerifyKey_errors() {
	_, err := keys.ParseVerifyKey("516b4d")
	fmt.Println(err, errors.Is(err, keys.ErrLength))
	_, err = keys.ParseVerifyKey("zz6b4dd774b4eeabdc8b0b2a9e7392c6cc5a6573cc7f86715ebd62e2fa15a402")
	fmt.Println(err, errors.Is(err, keys.ErrNotHex))
	// Output:
	// parse verhex: keys: wrong length: got 6 characters, want 64 true
	// parse verhex: keys: not hexadecimal: bad character at offset 0 true
}

func ExampleGenerateSigning() {
	pair := keys.GenerateSigning()
	msg := []byte("hello main")
	sig := ed25519.Sign(pair.Seed.Ed25519(), msg)
	fmt.Println(ed25519.Verify(pair.Verify.Ed25519(), msg, sig))
	// Output: true
}

func ExampleGenerateBox() {
	pair, err := keys.GenerateBox()
	if err != nil {
		fmt.Println(err)
		return
	}
	derived, _ := pair.Private.PublicKey()
	fmt.Println(derived.Equal(pair.Public), len(pair.Public.Hex()))
	// Output: true 64
}

func ExampleVerifyKey_UnmarshalText() {
	var v keys.VerifyKey
	if err := v.UnmarshalText([]byte("551238481FE3504CA9C287AE062E72A2CF3C82CBB4FA16E3B1A24F3DB75EC62E")); err != nil {
		fmt.Println(err)
		return
	}
	text, _ := v.MarshalText()
	fmt.Println(string(text))
	// Output: 551238481fe3504ca9c287ae062e72a2cf3c82cbb4fa16e3b1a24f3db75ec62e
}

// Two estates' Curve25519 pairs give the same crypto_box key, each from its
// own private key and the other's public key: computed once, it seals and
// opens every box between them (golang.org/x/crypto/nacl/box's
// SealAfterPrecomputation and OpenAfterPrecomputation).
func ExamplePrivateKey_SharedKey() {
	a, _ := keys.GenerateBox()
	b, _ := keys.GenerateBox()
	ab, err := a.Private.SharedKey(b.Public)
	if err != nil {
		fmt.Println(err)
		return
	}
	ba, _ := b.Private.SharedKey(a.Public)
	fmt.Println(ab == ba)

	var zero keys.PublicKey // of low order: refused
	_, err = a.Private.SharedKey(zero)
	fmt.Println(err)
	// Output:
	// true
	// keys: low-order public key
}
