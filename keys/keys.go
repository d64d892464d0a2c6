package keys

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/oasisprotocol/curve25519-voi/primitives/x25519"
	//lint:ignore SA1019 HSalsa20 is NaCl's crypto_box_beforenm key derivation, which the reference's boxes need and x/crypto exposes only here
	"golang.org/x/crypto/salsa20/salsa"
)

// Size is the length in bytes of every key type in this package.
const Size = 32

// HexLen is the length in characters of the hex form of every key type.
const HexLen = 2 * Size

// Errors returned (wrapped) by the Parse functions and UnmarshalText methods.
// Branch on them with errors.Is.
var (
	// ErrLength means the input does not have exactly HexLen characters.
	ErrLength = errors.New("keys: wrong length")
	// ErrNotHex means the input contains a character that is not a hex digit.
	ErrNotHex = errors.New("keys: not hexadecimal")
	// ErrLowOrder means a Curve25519 public key is of low order: the X25519
	// shared secret with it would be all zeros, whatever the private key,
	// so libsodium (and so the reference) refuses it (SharedKey).
	ErrLowOrder = errors.New("keys: low-order public key")
)

// SigningSeed is an Ed25519 seed ("sighex" in the reference), the secret from
// which the signing key and its VerifyKey derive. The zero value means no key.
type SigningSeed [Size]byte

// VerifyKey is an Ed25519 public key ("verhex"). The zero value means no key.
type VerifyKey [Size]byte

// PrivateKey is a long-term Curve25519 private key ("prihex") as stored by the
// reference: 32 raw random bytes, not clamped (X25519 clamps when it uses
// them). The zero value means no key.
type PrivateKey [Size]byte

// PublicKey is a Curve25519 public key ("pubhex"). The zero value means no key.
type PublicKey [Size]byte

// redacted is what String and GoString give for a secret key.
const redacted = "[redacted]"

// parseHex decodes exactly HexLen hex digits (either case) into a key. name is
// the reference's field name, used in error messages. The input itself is never
// echoed in an error, because it may be a secret.
func parseHex(name, s string) ([Size]byte, error) {
	var k [Size]byte
	if len(s) != HexLen {
		return k, fmt.Errorf("parse %s: %w: got %d characters, want %d", name, ErrLength, len(s), HexLen)
	}
	for i := 0; i < len(s); i++ {
		if !isHexDigit(s[i]) {
			return k, fmt.Errorf("parse %s: %w: bad character at offset %d", name, ErrNotHex, i)
		}
	}
	if _, err := hex.Decode(k[:], []byte(s)); err != nil {
		// Unreachable after the checks above; kept so a future change cannot
		// silently return a partly decoded key.
		return [Size]byte{}, fmt.Errorf("parse %s: %w: %v", name, ErrNotHex, err)
	}
	return k, nil
}

func isHexDigit(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isZero(k *[Size]byte) bool {
	var zero [Size]byte
	return subtle.ConstantTimeCompare(k[:], zero[:]) == 1
}

func equal(a, b *[Size]byte) bool {
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// ParseSigningSeed parses 64 hex digits (either case) as a SigningSeed.
// Errors wrap ErrLength or ErrNotHex and never contain the input.
func ParseSigningSeed(s string) (SigningSeed, error) {
	k, err := parseHex("sighex", s)
	return SigningSeed(k), err
}

// ParseVerifyKey parses 64 hex digits (either case) as a VerifyKey.
// Errors wrap ErrLength or ErrNotHex.
func ParseVerifyKey(s string) (VerifyKey, error) {
	k, err := parseHex("verhex", s)
	return VerifyKey(k), err
}

// ParsePrivateKey parses 64 hex digits (either case) as a PrivateKey.
// Errors wrap ErrLength or ErrNotHex and never contain the input.
func ParsePrivateKey(s string) (PrivateKey, error) {
	k, err := parseHex("prihex", s)
	return PrivateKey(k), err
}

// ParsePublicKey parses 64 hex digits (either case) as a PublicKey.
// Errors wrap ErrLength or ErrNotHex.
func ParsePublicKey(s string) (PublicKey, error) {
	k, err := parseHex("pubhex", s)
	return PublicKey(k), err
}

// Hex returns the seed as 64 lowercase hex digits (the reference's sighex).
func (k SigningSeed) Hex() string { return hex.EncodeToString(k[:]) }

// Hex returns the key as 64 lowercase hex digits (the reference's verhex).
func (k VerifyKey) Hex() string { return hex.EncodeToString(k[:]) }

// Hex returns the key as 64 lowercase hex digits (the reference's prihex).
func (k PrivateKey) Hex() string { return hex.EncodeToString(k[:]) }

// Hex returns the key as 64 lowercase hex digits (the reference's pubhex).
func (k PublicKey) Hex() string { return hex.EncodeToString(k[:]) }

// String returns a redacted placeholder, never the secret.
func (k SigningSeed) String() string { return redacted }

// GoString returns a redacted placeholder, so %#v does not print the secret.
func (k SigningSeed) GoString() string { return "keys.SigningSeed" + redacted }

// Format implements fmt.Formatter so that every verb (%v, %x, %d, ...) prints
// the redacted placeholder rather than the secret bytes.
func (k SigningSeed) Format(f fmt.State, verb rune) { formatRedacted(f, verb, "keys.SigningSeed") }

// String returns the key as lowercase hex.
func (k VerifyKey) String() string { return k.Hex() }

// String returns a redacted placeholder, never the secret.
func (k PrivateKey) String() string { return redacted }

// GoString returns a redacted placeholder, so %#v does not print the secret.
func (k PrivateKey) GoString() string { return "keys.PrivateKey" + redacted }

// Format implements fmt.Formatter so that every verb (%v, %x, %d, ...) prints
// the redacted placeholder rather than the secret bytes.
func (k PrivateKey) Format(f fmt.State, verb rune) { formatRedacted(f, verb, "keys.PrivateKey") }

func formatRedacted(f fmt.State, verb rune, typ string) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, typ+redacted)
		return
	}
	_, _ = io.WriteString(f, redacted)
}

// String returns the key as lowercase hex.
func (k PublicKey) String() string { return k.Hex() }

// IsZero reports whether k is the zero value (no key), in constant time.
func (k SigningSeed) IsZero() bool { return isZero((*[Size]byte)(&k)) }

// IsZero reports whether k is the zero value (no key), in constant time.
func (k VerifyKey) IsZero() bool { return isZero((*[Size]byte)(&k)) }

// IsZero reports whether k is the zero value (no key), in constant time.
func (k PrivateKey) IsZero() bool { return isZero((*[Size]byte)(&k)) }

// IsZero reports whether k is the zero value (no key), in constant time.
func (k PublicKey) IsZero() bool { return isZero((*[Size]byte)(&k)) }

// Equal reports whether k and o are the same seed, in constant time.
func (k SigningSeed) Equal(o SigningSeed) bool {
	return equal((*[Size]byte)(&k), (*[Size]byte)(&o))
}

// Equal reports whether k and o are the same key, in constant time.
func (k VerifyKey) Equal(o VerifyKey) bool {
	return equal((*[Size]byte)(&k), (*[Size]byte)(&o))
}

// Equal reports whether k and o are the same key, in constant time.
func (k PrivateKey) Equal(o PrivateKey) bool {
	return equal((*[Size]byte)(&k), (*[Size]byte)(&o))
}

// Equal reports whether k and o are the same key, in constant time.
func (k PublicKey) Equal(o PublicKey) bool {
	return equal((*[Size]byte)(&k), (*[Size]byte)(&o))
}

// MarshalText implements encoding.TextMarshaler: 64 lowercase hex digits.
// It gives the real secret, as the keep needs it.
func (k SigningSeed) MarshalText() ([]byte, error) { return []byte(k.Hex()), nil }

// MarshalText implements encoding.TextMarshaler: 64 lowercase hex digits.
func (k VerifyKey) MarshalText() ([]byte, error) { return []byte(k.Hex()), nil }

// MarshalText implements encoding.TextMarshaler: 64 lowercase hex digits.
// It gives the real secret, as the keep needs it.
func (k PrivateKey) MarshalText() ([]byte, error) { return []byte(k.Hex()), nil }

// MarshalText implements encoding.TextMarshaler: 64 lowercase hex digits.
func (k PublicKey) MarshalText() ([]byte, error) { return []byte(k.Hex()), nil }

// UnmarshalText implements encoding.TextUnmarshaler as ParseSigningSeed does.
// On error k is left unchanged.
func (k *SigningSeed) UnmarshalText(b []byte) error {
	v, err := ParseSigningSeed(string(b))
	if err == nil {
		*k = v
	}
	return err
}

// UnmarshalText implements encoding.TextUnmarshaler as ParseVerifyKey does.
// On error k is left unchanged.
func (k *VerifyKey) UnmarshalText(b []byte) error {
	v, err := ParseVerifyKey(string(b))
	if err == nil {
		*k = v
	}
	return err
}

// UnmarshalText implements encoding.TextUnmarshaler as ParsePrivateKey does.
// On error k is left unchanged.
func (k *PrivateKey) UnmarshalText(b []byte) error {
	v, err := ParsePrivateKey(string(b))
	if err == nil {
		*k = v
	}
	return err
}

// UnmarshalText implements encoding.TextUnmarshaler as ParsePublicKey does.
// On error k is left unchanged.
func (k *PublicKey) UnmarshalText(b []byte) error {
	v, err := ParsePublicKey(string(b))
	if err == nil {
		*k = v
	}
	return err
}

// Ed25519 returns the full Ed25519 private key (seed followed by public key)
// that crypto/ed25519 signs with.
func (k SigningSeed) Ed25519() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(k[:])
}

// VerifyKey derives the Ed25519 public key of the seed.
func (k SigningSeed) VerifyKey() VerifyKey {
	var v VerifyKey
	copy(v[:], k.Ed25519()[ed25519.SeedSize:])
	return v
}

// Ed25519 returns the key as a crypto/ed25519 public key (a fresh copy).
func (k VerifyKey) Ed25519() ed25519.PublicKey {
	return append(ed25519.PublicKey(nil), k[:]...)
}

// PublicKey derives the Curve25519 public key, X25519(k, basepoint), as
// libsodium crypto_scalarmult_base does (with a precomputed table of the
// base point: about a fifth of a scalar multiplication of another point).
// The error is not expected; it is kept for callers written when another
// implementation could refuse (a restricted FIPS mode).
func (k PrivateKey) PublicKey() (PublicKey, error) {
	out, err := x25519.X25519(k[:], x25519.Basepoint)
	if err != nil {
		return PublicKey{}, fmt.Errorf("keys: derive pubhex: %w", err)
	}
	return PublicKey(out), nil
}

// SharedKey is crypto_box_beforenm(pub, k): HSalsa20 (zero input, sigma)
// of the X25519 shared secret of k and pub, the key every NaCl box between
// the two pairs is sealed and opened with, either way (the private key of
// each side and the public key of the other give the same key). It costs
// one scalar multiplication; a caller that boxes more than once between
// the same pairs computes it once. It fails with ErrLowOrder when pub is of
// low order, as libsodium does (golang.org/x/crypto/nacl/box.Precompute
// would accept it).
func (k PrivateKey) SharedKey(pub PublicKey) ([Size]byte, error) {
	out, err := x25519.X25519(k[:], pub[:])
	if err != nil {
		return [Size]byte{}, ErrLowOrder // its only failure with keys of the right size
	}
	s := [Size]byte(out)
	var zero [16]byte
	salsa.HSalsa20(&s, &zero, &s, &salsa.Sigma)
	return s, nil
}

// Signing is an estate's Ed25519 key pair: the secret seed and the verify key
// derived from it.
type Signing struct {
	Seed   SigningSeed
	Verify VerifyKey
}

// Box is an estate's Curve25519 key pair for NaCl crypto_box: the private key
// and the public key derived from it.
type Box struct {
	Private PrivateKey
	Public  PublicKey
}

// NewSigning returns the pair for seed, deriving the verify key.
func NewSigning(seed SigningSeed) Signing {
	return Signing{Seed: seed, Verify: seed.VerifyKey()}
}

// NewBox returns the pair for private, deriving the public key.
func NewBox(private PrivateKey) (Box, error) {
	pub, err := private.PublicKey()
	if err != nil {
		return Box{}, err
	}
	return Box{Private: private, Public: pub}, nil
}

// GenerateSigning returns a new random signing pair, its seed read from
// crypto/rand (which does not fail on supported platforms).
func GenerateSigning() Signing {
	var seed SigningSeed
	_, _ = rand.Read(seed[:]) // crypto/rand.Read never returns an error (Go 1.24+).
	return NewSigning(seed)
}

// GenerateBox returns a new random Curve25519 pair, the private key read from
// crypto/rand. Like the reference, the private key is 32 random bytes stored
// unclamped.
func GenerateBox() (Box, error) {
	var pri PrivateKey
	_, _ = rand.Read(pri[:]) // crypto/rand.Read never returns an error (Go 1.24+).
	return NewBox(pri)
}
