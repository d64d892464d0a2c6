package handshake

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/crypto/nacl/box"

	"github.com/raet-go/raet/keys"
)

// Sizes of the bodies and of their parts, in bytes.
const (
	// HelloSize is the size of a hello body.
	HelloSize = helloPlainLen + keys.Size + helloBoxLen + NonceSize
	// CookieSize is the size of a cookie body.
	CookieSize = cookieBoxLen + NonceSize
	// InitiateSize is the size of an initiate body.
	InitiateSize = keys.Size + OreoSize + initiateBoxLen + NonceSize

	// NonceSize is the size of a crypto_box nonce.
	NonceSize = 24
	// OreoSize is the size of the oreo, the cookie R gives I to send back.
	OreoSize = 24
	// FQDNSize is the size of the fqdn field of an initiate.
	FQDNSize = 128

	helloPlainLen = 64
	helloBoxLen   = box.Overhead + helloPlainLen // 80

	cookieStuffLen = keys.Size + 4 + 4 + OreoSize  // 64
	cookieBoxLen   = box.Overhead + cookieStuffLen // 80

	vouchBoxLen      = box.Overhead + keys.Size                       // 48
	initiateStuffLen = keys.Size + vouchBoxLen + NonceSize + FQDNSize // 232
	initiateBoxLen   = box.Overhead + initiateStuffLen                // 248
)

// Oreo is the random value R puts in its cookie and I returns in its
// initiate, which proves the initiate answers that cookie.
type Oreo [OreoSize]byte

// Step names the body an Error is about. Its values are the packet kinds
// (pk) of those bodies.
type Step uint8

// The steps of the handshake that carry a body.
const (
	StepHello    Step = 6 // hello, I -> R
	StepCookie   Step = 7 // cookie, R -> I
	StepInitiate Step = 8 // initiate, I -> R
)

// String returns "hello", "cookie", "initiate" or "step N".
func (s Step) String() string {
	switch s {
	case StepHello:
		return "hello"
	case StepCookie:
		return "cookie"
	case StepInitiate:
		return "initiate"
	}
	return fmt.Sprintf("step %d", uint8(s))
}

// Sentinel errors, the causes an *Error wraps. Branch on them with errors.Is.
var (
	// ErrLength means a body does not have exactly the size of its kind.
	ErrLength = errors.New("wrong length")
	// ErrOpen means a box failed to authenticate: wrong keys, or bytes
	// changed on the way.
	ErrOpen = errors.New("box does not open")
	// ErrMismatch means a field is well formed but not what it must be: the
	// plain of a hello differs from its box, or a uid, key, oreo or vouch is
	// not the expected one.
	ErrMismatch = errors.New("mismatch")
	// ErrKey means a public key is of low order (the X25519 shared secret
	// would be all zeros), which libsodium, and so the reference, refuses.
	ErrKey = errors.New("low-order public key")
	// ErrRandom means the random source of a Make function failed. The
	// *Error also wraps the source's own error.
	ErrRandom = errors.New("random source failed")
)

// Error reports a failure to make or open a body.
type Error struct {
	// Step is the body concerned.
	Step Step
	// What names the failed check or the field concerned: "length", "box",
	// "plain", "seid", "deid", "short-term key", "oreo", "long-term key",
	// "vouch", "nonce".
	What string
	// Err is the cause: one of the sentinels, possibly wrapped with detail.
	Err error
}

// Error returns "handshake: <step>: <what>: <err>".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("handshake: ")
	b.WriteString(e.Step.String())
	if e.What != "" {
		b.WriteString(": ")
		b.WriteString(e.What)
	}
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(e.Err.Error())
	} else {
		b.WriteString("unknown error")
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func fail(step Step, what string, err error) *Error {
	return &Error{Step: step, What: what, Err: err}
}

func lengthError(step Step, got, want int) *Error {
	return fail(step, "length", fmt.Errorf("%w: got %d bytes, want %d", ErrLength, got, want))
}

// reader returns r, or crypto/rand.Reader when r is nil.
func reader(r io.Reader) io.Reader {
	if r == nil {
		return rand.Reader
	}
	return r
}

// readRandom fills b from r. what names the value for the error.
func readRandom(r io.Reader, b []byte, step Step, what string) error {
	if _, err := io.ReadFull(r, b); err != nil {
		return fail(step, what, fmt.Errorf("%w: %w", ErrRandom, err))
	}
	return nil
}

// Key is the crypto_box key of two pairs (keys.PrivateKey.SharedKey):
// every box between them is sealed and opened with it, either way. A step
// that makes it returns it, so that the next box between the same pairs
// (the cookie after the hello, the session's coat after the initiate)
// costs no second X25519.
type Key = [keys.Size]byte

// sharedKey is the Key of priv and pub; unlike box.Precompute it refuses a
// low-order pub (ErrKey), as libsodium does.
func sharedKey(priv keys.PrivateKey, pub keys.PublicKey, step Step, what string) (*Key, error) {
	k, err := priv.SharedKey(pub)
	if err != nil {
		return nil, fail(step, what, ErrKey)
	}
	return &k, nil
}

// seal writes box(msg) under k into out[:len(msg)+box.Overhead] and a
// fresh nonce, read from r, into nonce. out must not overlap msg.
func seal(out, nonce, msg []byte, k *Key, r io.Reader, step Step, what string) error {
	if err := readRandom(r, nonce, step, what+" nonce"); err != nil {
		return err
	}
	box.SealAfterPrecomputation(out[:0], msg, (*[NonceSize]byte)(nonce), k)
	return nil
}

// open returns the contents of the box sealed under k, whose nonce is
// nonce.
func open(sealed, nonce []byte, k *Key, step Step, what string) ([]byte, error) {
	msg, ok := box.OpenAfterPrecomputation(nil, sealed, (*[NonceSize]byte)(nonce), k)
	if !ok {
		return nil, fail(step, what, ErrOpen)
	}
	return msg, nil
}
