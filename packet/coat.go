package packet

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keys"

	"golang.org/x/crypto/nacl/box"
)

// Sizes of a nacl coat.
const (
	// NaClNonceSize is the size of the random nonce that ends a nacl coat.
	NaClNonceSize = 24
	// NaClOverhead is what a nacl coat adds to a non-empty body: the
	// 16-byte Poly1305 tag and the nonce.
	NaClOverhead = box.Overhead + NaClNonceSize
)

// Errors of the coat layer. They are wrapped in a *CoatError; test with
// errors.Is.
var (
	// ErrCoatShort: a non-empty nacl coat shorter than NaClOverhead.
	ErrCoatShort = errors.New("raet: coat shorter than its tag and nonce")
	// ErrCoatOpen: the box failed to open (wrong keys or tampered bytes).
	ErrCoatOpen = errors.New("raet: coat failed to open")
	// ErrWeakKey: a missing key, or a Curve25519 public key of low order
	// (the shared secret would be all zeros; libsodium refuses it too).
	ErrWeakKey = errors.New("raet: weak or missing key")
)

// CoatError reports a failure to seal or open a coat.
type CoatError struct {
	Kind codec.CoatKind // coat kind (ck)
	Op   string         // "seal", "open" or "new"
	Len  int            // length of the coat (open) or body (seal)
	Err  error          // ErrCoatShort, ErrCoatOpen, ErrWeakKey or the nonce source's error
}

// Error implements error.
func (e *CoatError) Error() string {
	return "raet: " + e.Op + " " + e.Kind.String() + " coat of " + strconv.Itoa(e.Len) +
		" bytes: " + strings.TrimPrefix(e.Err.Error(), "raet: ")
}

// Unwrap returns the wrapped error.
func (e *CoatError) Unwrap() error { return e.Err }

// Coat seals a serialized body into the coat of a packet, and opens it.
// One Coat serves one remote (its keys are that session's); the
// implementations here are safe for concurrent use (NaClCoat if its nonce
// source is).
//
// An empty body always gives an empty coat and an empty coat opens to an
// empty body, whatever the kind (§3, §7.2).
//
// Aliasing: Seal and Open append to dst and return the extended slice,
// like append. The bytes they append must not share memory with the input;
// when the spare capacity of dst overlaps the input (for instance dst =
// plain[:0], in place), they allocate a new buffer instead, so the result
// is always correct, but only non-overlapping buffers avoid the allocation.
// With enough spare capacity in dst (Overhead more than the body for Seal),
// nothing is allocated. On error they return dst unchanged.
type Coat interface {
	// Kind returns the coat kind (ck).
	Kind() codec.CoatKind
	// Overhead returns how many bytes the coat adds to a non-empty body.
	Overhead() int
	// Seal appends the coat of plain to dst.
	Seal(dst, plain []byte) ([]byte, error)
	// Open appends the body inside coat to dst.
	Open(dst, coat []byte) ([]byte, error)
}

var (
	_ Coat = NadaCoat{}
	_ Coat = (*NaClCoat)(nil)
)

// NadaCoat is coat kind nada (0): the coat is the body.
type NadaCoat struct{}

// Kind returns codec.CoatKindNada.
func (NadaCoat) Kind() codec.CoatKind { return codec.CoatKindNada }

// Overhead returns 0.
func (NadaCoat) Overhead() int { return 0 }

// Seal appends plain to dst.
func (NadaCoat) Seal(dst, plain []byte) ([]byte, error) { return append(dst, plain...), nil }

// Open appends coat to dst.
func (NadaCoat) Open(dst, coat []byte) ([]byte, error) { return append(dst, coat...), nil }

// NaClCoat is coat kind nacl (1) for one remote: crypto_box with the
// shared key of our short-term private key and the remote's short-term
// public key, computed once (box.Precompute) when it is made. Each Seal
// draws a fresh 24-byte nonce and writes box || nonce, the reference's
// layout (the nonce last). Either side's private key gives the same shared
// key, so one NaClCoat seals what we send and opens what we receive.
type NaClCoat struct {
	key  [32]byte
	rand io.Reader
}

// NewNaClCoat precomputes the shared key of ourShortPriv and theirShortPub.
// rand is the nonce source; nil means crypto/rand.Reader (tests inject a
// fixed reader to reproduce a captured coat). It fails with ErrWeakKey if a
// key is nil or theirShortPub is of low order.
func NewNaClCoat(ourShortPriv, theirShortPub *[32]byte, rand io.Reader) (*NaClCoat, error) {
	s, err := NewSessionKey(ourShortPriv, theirShortPub)
	if err != nil {
		return nil, &CoatError{Kind: codec.CoatKindNaCl, Op: "new", Err: err}
	}
	return s.NaClCoat(rand), nil
}

var cryptoRand = rand.Reader

// SessionKey is what the coats and feet of a session derive their keys
// from: the crypto_box key of the two short-term pairs
// (crypto_box_beforenm, keys.PrivateKey.SharedKey) and both short-term
// public keys. Making it costs one X25519 (NewSessionKey), or none when
// the allow handshake computed the key for its own boxes (SessionKeyOf);
// the coats and feet made from it cost none.
type SessionKey struct {
	shared, ours, theirs [32]byte
}

// NewSessionKey computes the session key of our short-term private key and
// the remote's short-term public key. It fails with ErrWeakKey if a key is
// nil or theirShortPub is of low order.
func NewSessionKey(ourShortPriv, theirShortPub *[32]byte) (*SessionKey, error) {
	if ourShortPriv == nil || theirShortPub == nil {
		return nil, ErrWeakKey
	}
	priv := keys.PrivateKey(*ourShortPriv)
	shared, err := priv.SharedKey(keys.PublicKey(*theirShortPub))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWeakKey, err)
	}
	ours, err := priv.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrWeakKey, err)
	}
	return &SessionKey{shared: shared, ours: ours, theirs: *theirShortPub}, nil
}

// SessionKeyOf is the session key whose crypto_box key (that of our
// short-term pair and the remote's short-term public key) is already
// known: shared must be crypto_box_beforenm of those keys, as the allow
// handshake computes it for the initiate's box.
func SessionKeyOf(shared, ourShortPub, theirShortPub *[32]byte) *SessionKey {
	return &SessionKey{shared: *shared, ours: *ourShortPub, theirs: *theirShortPub}
}

// NaClCoat is the session's nacl coat; rand is its nonce source, as for
// NewNaClCoat.
func (s *SessionKey) NaClCoat(rand io.Reader) *NaClCoat {
	c := &NaClCoat{key: s.shared, rand: rand}
	if c.rand == nil {
		c.rand = cryptoRand
	}
	return c
}

// Kind returns codec.CoatKindNaCl.
func (c *NaClCoat) Kind() codec.CoatKind { return codec.CoatKindNaCl }

// Overhead returns NaClOverhead.
func (c *NaClCoat) Overhead() int { return NaClOverhead }

// Seal appends box(plain) || nonce to dst; an empty plain appends nothing.
// The nonce is read from the nonce source straight into its place in the
// output.
func (c *NaClCoat) Seal(dst, plain []byte) ([]byte, error) {
	if len(plain) == 0 {
		return dst, nil
	}
	n, total := len(dst), len(plain)+NaClOverhead
	out := slices.Grow(dst, total)
	if anyOverlap(out[n:n+total], plain) {
		out = make([]byte, n, n+total)
		copy(out, dst)
	}
	nonce := out[n+total-NaClNonceSize : n+total]
	if _, err := io.ReadFull(c.rand, nonce); err != nil {
		return dst, &CoatError{Kind: codec.CoatKindNaCl, Op: "seal", Len: len(plain),
			Err: fmt.Errorf("nonce: %w", err)}
	}
	out = box.SealAfterPrecomputation(out[:n], plain, (*[NaClNonceSize]byte)(nonce), &c.key)
	return out[:n+total], nil
}

// Open appends the body inside coat (box || nonce) to dst; an empty coat
// appends nothing. A coat shorter than NaClOverhead is ErrCoatShort, one
// that does not authenticate ErrCoatOpen.
func (c *NaClCoat) Open(dst, coat []byte) ([]byte, error) {
	if len(coat) == 0 {
		return dst, nil
	}
	if len(coat) < NaClOverhead {
		return dst, &CoatError{Kind: codec.CoatKindNaCl, Op: "open", Len: len(coat), Err: ErrCoatShort}
	}
	sealed, nonce := coat[:len(coat)-NaClNonceSize], coat[len(coat)-NaClNonceSize:]
	n, m := len(dst), len(sealed)-box.Overhead
	out := slices.Grow(dst, m)
	if anyOverlap(out[n:n+m], coat) {
		out = make([]byte, n, n+m)
		copy(out, dst)
	}
	out, ok := box.OpenAfterPrecomputation(out[:n], sealed, (*[NaClNonceSize]byte)(nonce), &c.key)
	if !ok {
		return dst, &CoatError{Kind: codec.CoatKindNaCl, Op: "open", Len: len(coat), Err: ErrCoatOpen}
	}
	return out, nil
}

// anyOverlap reports whether x and y share memory. secretbox panics on
// overlapping buffers; we check first and allocate instead.
func anyOverlap(x, y []byte) bool {
	return len(x) > 0 && len(y) > 0 &&
		uintptr(unsafe.Pointer(&x[0])) <= uintptr(unsafe.Pointer(&y[len(y)-1])) &&
		uintptr(unsafe.Pointer(&y[0])) <= uintptr(unsafe.Pointer(&x[len(x)-1]))
}
