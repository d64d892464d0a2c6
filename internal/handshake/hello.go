package handshake

import (
	"bytes"
	"crypto/subtle"
	"io"

	"github.com/raet-go/raet/keys"
)

// Offsets in a hello body.
const (
	helloPlainAt = 0
	helloPubAt   = helloPlainAt + helloPlainLen
	helloBoxAt   = helloPubAt + keys.Size
	helloNonceAt = helloBoxAt + helloBoxLen
)

// HelloPlainSize is the size of a hello's plain text.
const HelloPlainSize = helloPlainLen

// helloPlain is the plain text of the reference's every hello: the hex of
// 32 zero bytes.
var helloPlain = [helloPlainLen]byte(bytes.Repeat([]byte{'0'}, helloPlainLen))

// IsZeroPlain reports whether plain is the reference's hello plain text.
func IsZeroPlain(plain [HelloPlainSize]byte) bool { return plain == helloPlain }

// HelloPlain returns the plain text of hello body (of HelloSize bytes; the
// zero plain otherwise), which OpenHello checked against its box.
func HelloPlain(body []byte) [HelloPlainSize]byte {
	if len(body) != HelloSize {
		return helloPlain
	}
	return [HelloPlainSize]byte(body[helloPlainAt:helloPubAt])
}

// MakeHello returns the hello body I sends to start an allow: the plain
// text, iShort.Public, and the plain boxed with iShort.Private for rLongPub
// (R's joined long-term key), followed by its nonce; and the Key of that
// box, which the cookie that answers it opens with (OpenCookie). iShort is
// I's fresh short-term pair for this handshake; its Public must derive
// from its Private.
//
// rnd is the nonce source (crypto/rand.Reader when nil). Errors: ErrKey for a
// low-order rLongPub, ErrRandom when rnd fails.
func MakeHello(rnd io.Reader, iShort keys.Box, rLongPub keys.PublicKey) ([]byte, *Key, error) {
	return MakeHelloPlain(rnd, iShort, rLongPub, helloPlain)
}

// MakeHelloPlain is MakeHello with plain as the plain text: the reference
// (and OpenHello) require only that the box opens to the plain the hello
// carries, so it may carry 64 bytes of the allower's choosing, which the
// hello's signature authenticates.
func MakeHelloPlain(rnd io.Reader, iShort keys.Box, rLongPub keys.PublicKey, plain [HelloPlainSize]byte) ([]byte, *Key, error) {
	k, err := sharedKey(iShort.Private, rLongPub, StepHello, "box")
	if err != nil {
		return nil, nil, err
	}
	body := make([]byte, HelloSize)
	copy(body[helloPlainAt:], plain[:])
	copy(body[helloPubAt:], iShort.Public[:])
	if err := seal(body[helloBoxAt:helloNonceAt], body[helloNonceAt:], plain[:], k, reader(rnd), StepHello, "box"); err != nil {
		return nil, nil, err
	}
	return body, k, nil
}

// OpenHello checks a hello body with R's long-term private key and returns
// I's short-term public key, which R must keep for the initiate, and the
// Key of the hello's box, which R's cookie is boxed with (MakeCookie).
//
// As the reference does, it opens the box with rLongPriv and the short-term
// key the hello carries, and requires the result to equal the plain field;
// it does not otherwise constrain the plain (the reference's initiator
// always sends 64 ASCII '0'). Nor does it check that the short-term key is
// canonical: X25519 and libsodium ignore its top bit, so a hello with that
// bit flipped opens too, and the key returned then differs from the one the
// initiate carries, which OpenInitiate refuses. Errors: ErrLength, ErrKey (a low-order short
// key), ErrOpen, ErrMismatch (What "plain").
func OpenHello(body []byte, rLongPriv keys.PrivateKey) (keys.PublicKey, *Key, error) {
	if len(body) != HelloSize {
		return keys.PublicKey{}, nil, lengthError(StepHello, len(body), HelloSize)
	}
	iShortPub := keys.PublicKey(body[helloPubAt:helloBoxAt])
	k, err := sharedKey(rLongPriv, iShortPub, StepHello, "box")
	if err != nil {
		return keys.PublicKey{}, nil, err
	}
	msg, err := open(body[helloBoxAt:helloNonceAt], body[helloNonceAt:], k, StepHello, "box")
	if err != nil {
		return keys.PublicKey{}, nil, err
	}
	if subtle.ConstantTimeCompare(msg, body[helloPlainAt:helloPubAt]) != 1 {
		return keys.PublicKey{}, nil, fail(StepHello, "plain", ErrMismatch)
	}
	return iShortPub, k, nil
}
