package packet

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/raet-go/raet/codec"
)

// Foot sizes (fl).
const (
	// NaClFootSize is the size of an Ed25519 foot.
	NaClFootSize = voi.SignatureSize
	// MACFootSize is the size of a MAC foot: HMAC-SHA-256 truncated to
	// 128 bits.
	MACFootSize = 16
)

// MACFootLabel is the domain-separation label of the MAC foot's key
// derivation (see NewMACFoot). Changing it changes the wire format.
const MACFootLabel = "raet-go mac foot v1"

// Errors of the foot layer. They are wrapped in a *FootError; test with
// errors.Is.
var (
	// ErrFootLength: the foot is not Size() bytes long.
	ErrFootLength = errors.New("raet: wrong foot length")
	// ErrFootVerify: the signature or MAC does not match.
	ErrFootVerify = errors.New("raet: foot does not verify")
	// ErrUnknownVerifyKey: the resolver has no verify key for the packet's de.
	ErrUnknownVerifyKey = errors.New("raet: no verify key for the packet's de")
	// ErrNoSigningKey: Sign on a verify-only foot.
	ErrNoSigningKey = errors.New("raet: foot has no signing key")
)

// FootError reports a failure to sign or verify a foot.
type FootError struct {
	Kind codec.FootKind // foot kind (fk)
	Op   string         // "sign", "verify" or "new"
	De   uint32         // the packet's de (verify)
	Err  error          // one of the Err* sentinels above
}

// Error implements error.
func (e *FootError) Error() string {
	s := "raet: " + e.Op + " " + e.Kind.String() + " foot"
	if e.Op == "verify" {
		s += " (de " + strconv.FormatUint(uint64(e.De), 16) + ")"
	}
	return s + ": " + strings.TrimPrefix(e.Err.Error(), "raet: ")
}

// Unwrap returns the wrapped error.
func (e *FootError) Unwrap() error { return e.Err }

// Foot signs packets and verifies their feet.
//
// Sign takes pkt = head || coat, where the head already holds its final
// pl, hl and fl (fl = Size()), appends the Size()-byte foot and returns the
// extended packet, like append. Give pkt a spare capacity of Size() bytes
// (allocate the packet buffer with capacity pl) and Sign neither allocates
// nor copies the packet: the nacl foot appends Size() zero bytes, signs the
// buffer in place (the reference signs head || coat || zeros) and writes
// the signature over the zeros.
//
// Verify takes the packet split at pl-fl: signed = head || coat and foot.
// A foot of the wrong length is ErrFootLength, a mismatch ErrFootVerify.
// de is the packet's de field, the receiver's uid of the sender, which
// selects the sender's verify key (feet keyed per remote ignore it).
// For the nacl foot, slice signed and foot from one buffer
// (pkt[:n-fl], pkt[n-fl:]): Verify then zeroes the foot in place for the
// duration of the call and restores it before returning, so the caller
// must not read or write that buffer concurrently. Given separate buffers,
// it copies the packet instead (one allocation).
//
// The implementations here are safe for concurrent use (NaClFoot if its
// resolver is).
type Foot interface {
	// Kind returns the foot kind (fk).
	Kind() codec.FootKind
	// Size returns the foot length (fl).
	Size() int
	// Sign appends the foot of pkt (head || coat) to pkt.
	Sign(pkt []byte) ([]byte, error)
	// Verify checks foot against signed (head || coat).
	Verify(signed, foot []byte, de uint32) error
}

var (
	_ Foot = NadaFoot{}
	_ Foot = (*NaClFoot)(nil)
	_ Foot = (*MACFoot)(nil)
)

// NadaFoot is foot kind nada (0): no foot. Verify accepts only an empty
// foot; whether an unsigned packet is acceptable is the caller's policy
// (the reference refuses unsigned message packets, §7.3).
type NadaFoot struct{}

// Kind returns codec.FootKindNada.
func (NadaFoot) Kind() codec.FootKind { return codec.FootKindNada }

// Size returns 0.
func (NadaFoot) Size() int { return 0 }

// Sign returns pkt.
func (NadaFoot) Sign(pkt []byte) ([]byte, error) { return pkt, nil }

// Verify fails only if foot is not empty.
func (NadaFoot) Verify(_, foot []byte, de uint32) error {
	if len(foot) != 0 {
		return &FootError{Kind: codec.FootKindNada, Op: "verify", De: de, Err: ErrFootLength}
	}
	return nil
}

// VerifyKeyResolver returns the Ed25519 verify key (verhex) of the remote
// that sent a packet, given the packet's de: the receiver's uid of the
// sender, i.e. the key of that remote in the stack's remote table (§7.3).
// It reports false if there is no such remote or key; the foot then fails
// with ErrUnknownVerifyKey, as the reference does for an unknown de. It is
// called once per Verify and must be safe for concurrent use if the foot is
// shared between goroutines.
type VerifyKeyResolver func(de uint32) (verKey *[32]byte, ok bool)

// stdlibRules are crypto/ed25519's verification rules (cofactorless;
// small-order and non-canonical keys taken as it takes them) in
// curve25519-voi, which signs and verifies ~1.6-1.7x faster on amd64
// (bench/peers BenchmarkEd25519) with the same answers: the same signature
// bytes, and the same verdict on the RFC 8032 vectors, malleated and
// small-order signatures and voi's 780 edge vectors (TestEd25519MatchesStdlib).
// Its batch verifier is cofactored, answers differently, and is not used.
var stdlibRules = &voi.Options{Verify: voi.VerifyOptionsStdLib}

// verifyEd25519 checks sig on msg by pub, with x, when not nil, as pub
// expanded (voi.NewExpandedPublicKey): the same rules and answers
// (TestEd25519MatchesStdlib, TestEd25519EdgeVectors try both).
func verifyEd25519(pub voi.PublicKey, x *voi.ExpandedPublicKey, msg, sig []byte) bool {
	if x != nil {
		return voi.VerifyExpandedWithOptions(x, msg, sig, stdlibRules)
	}
	return voi.VerifyWithOptions(pub, msg, sig, stdlibRules)
}

// expandedKeys are a NaClFoot's verify keys expanded once
// (voi.ExpandedPublicKey, ~1.5 KiB: A decompressed and its multiples in a
// table), which spares each later verification of a 1 KiB packet ~4 of
// its ~40 µs (BenchmarkNaClFootVerify1K). A slot takes a key at its second
// packet in a row there: a main verifying the packets of many remotes in
// turn, whose keys would push each other out, verifies as without it and
// allocates nothing; a remote's run of packets (a message's segments, the
// messages of a window) is expanded once. At most expandedSlots keys, and
// safe for the concurrent use a NaClFoot allows.
type expandedKeys [expandedSlots]struct {
	key  atomic.Pointer[expandedKey]
	last atomic.Uint64 // the key whose packet came last, by its first 8 bytes
}

type expandedKey struct {
	pub [32]byte
	x   *voi.ExpandedPublicKey // nil: pub is not a point
}

const expandedSlots = 4

// lookup is key expanded, or nil if its slot holds another and key has
// not come twice in a row there, or key is not a point (the verification
// without it refuses it; the slot keeps that answer, so that a run of
// packets under such a key is not expanded again for each).
func (e *expandedKeys) lookup(key *[32]byte) *voi.ExpandedPublicKey {
	s := &e[key[0]%expandedSlots]
	if k := s.key.Load(); k != nil && k.pub == *key {
		return k.x
	}
	if tag := binary.LittleEndian.Uint64(key[:8]); s.last.Swap(tag) != tag {
		return nil
	}
	x, err := voi.NewExpandedPublicKey(key[:])
	if err != nil {
		x = nil
	}
	s.key.Store(&expandedKey{pub: *key, x: x})
	return x
}

// NaClFoot is foot kind nacl (1): an Ed25519 signature (deterministic,
// RFC 8032) over head || coat || 64 zero bytes. One NaClFoot serves a whole
// stack: it signs with the local signing key and verifies with the key the
// resolver gives for each packet's de.
type NaClFoot struct {
	key      *signingKey // nil: verify only
	resolve  VerifyKeyResolver
	expanded expandedKeys
}

// NewNaClFoot makes a nacl foot from our Ed25519 seed (sighex, §7.1) and a
// verify-key resolver. A nil seed makes a verify-only foot (Sign fails with
// ErrNoSigningKey); a nil resolver makes every Verify fail with
// ErrUnknownVerifyKey.
func NewNaClFoot(seed *[32]byte, resolve VerifyKeyResolver) *NaClFoot {
	f := &NaClFoot{resolve: resolve}
	if seed != nil {
		f.key = newSigningKey(seed)
	}
	return f
}

// Kind returns codec.FootKindNaCl.
func (f *NaClFoot) Kind() codec.FootKind { return codec.FootKindNaCl }

// Size returns NaClFootSize.
func (f *NaClFoot) Size() int { return NaClFootSize }

var zeroFoot [NaClFootSize]byte

// Sign appends 64 zero bytes to pkt, signs the result and replaces the
// zeros with the signature.
func (f *NaClFoot) Sign(pkt []byte) ([]byte, error) {
	if f.key == nil {
		return pkt, &FootError{Kind: codec.FootKindNaCl, Op: "sign", Err: ErrNoSigningKey}
	}
	n := len(pkt)
	pkt = append(pkt, zeroFoot[:]...)
	var sig [NaClFootSize]byte
	f.key.sign(&sig, pkt)
	copy(pkt[n:], sig[:])
	return pkt, nil
}

// Verify checks the Ed25519 signature foot over signed || 64 zero bytes
// with the verify key that the resolver gives for de.
func (f *NaClFoot) Verify(signed, foot []byte, de uint32) error {
	if len(foot) != NaClFootSize {
		return &FootError{Kind: codec.FootKindNaCl, Op: "verify", De: de, Err: ErrFootLength}
	}
	var key *[32]byte
	ok := false
	if f.resolve != nil {
		key, ok = f.resolve(de)
	}
	if !ok || key == nil {
		return &FootError{Kind: codec.FootKindNaCl, Op: "verify", De: de, Err: ErrUnknownVerifyKey}
	}
	pub, x := voi.PublicKey(key[:]), f.expanded.lookup(key)
	var sig [NaClFootSize]byte
	copy(sig[:], foot)
	if follows(signed, foot) {
		msg := signed[:len(signed)+NaClFootSize]
		clear(foot)
		ok = verifyEd25519(pub, x, msg, sig[:])
		copy(foot, sig[:])
	} else {
		msg := make([]byte, len(signed)+NaClFootSize)
		copy(msg, signed)
		ok = verifyEd25519(pub, x, msg, sig[:])
	}
	if !ok {
		return &FootError{Kind: codec.FootKindNaCl, Op: "verify", De: de, Err: ErrFootVerify}
	}
	return nil
}

// follows reports whether foot (non-empty) starts right where signed ends,
// in the same array.
func follows(signed, foot []byte) bool {
	if len(foot) == 0 || cap(signed)-len(signed) < len(foot) {
		return false
	}
	return &signed[:len(signed)+1][len(signed)] == &foot[0]
}

// MACFoot is the MAC foot of raet-go (codec.FootKindMAC) for one remote: a
// 16-byte HMAC-SHA-256 tag (RFC 2104, truncated as in RFC 4868) over
// head || coat, 40 to 100 times cheaper than an Ed25519 signature and
// verification.
// It is for sessions whose two ends are both raet-go and have agreed on it,
// after a completed allow handshake (the keys are the short-term ones).
//
// Keys. Both ends compute the same 32-byte shared key S from their
// short-term keys, exactly as for the nacl coat (box.Precompute, that is
// HSalsa20 of the X25519 secret). Each direction has its own MAC key:
//
//	K(A→B) = HKDF-SHA-256(secret S, no salt, info MACFootLabel || 0x00 || pubA || pubB, 32 bytes)
//
// where pubA and pubB are the sender's and the receiver's short-term
// public keys. A signs with K(A→B) and B verifies with the same key, which
// it derives with the keys in the other role. A packet reflected back to
// its sender is checked under K(B→A) and fails: no reflection attack. The
// label keeps the MAC keys apart from the coat's key (the coat uses S
// itself) and from any other use of S. As with the reference's feet, the
// foot does not stop replays; the session and transaction ids do.
//
// Trust. The MAC proves that the packet comes from a holder of one of the
// two short-term private keys of the session; the allow handshake bound
// those keys to the long-term keys (the vouch, §8.3), so within a session
// this authenticates the remote as the Ed25519 foot does, without
// non-repudiation (the receiver could forge packets to itself, which gives
// it nothing). Join and allow packets cannot use it: there is no session
// key yet.
//
// A MACFoot holds only its two keys: HMAC-SHA-256 is computed with a hash
// from a pool shared by all sessions (two more SHA-256 blocks a packet than
// a keyed state, instead of pools of keyed states per session on a main of
// many remotes).
type MACFoot struct {
	send, recv [32]byte // K(us→them), K(them→us)
}

// macHashes are the SHA-256 states of the MAC feet of every session.
var macHashes = sync.Pool{New: func() any { return &macState{h: sha256.New()} }}

type macState struct {
	h   hash.Hash
	pad [sha256.BlockSize]byte
	sum [sha256.Size]byte
}

// tag is HMAC-SHA-256 (RFC 2104) of msg under key, in st.sum.
func (st *macState) tag(key *[32]byte, msg []byte) []byte {
	for i := range st.pad {
		st.pad[i] = 0x36
	}
	for i, k := range key {
		st.pad[i] ^= k
	}
	st.h.Reset()
	st.h.Write(st.pad[:])
	st.h.Write(msg)
	inner := st.h.Sum(st.sum[:0])
	for i := range st.pad {
		st.pad[i] ^= 0x36 ^ 0x5c
	}
	st.h.Reset()
	st.h.Write(st.pad[:])
	st.h.Write(inner)
	return st.h.Sum(st.sum[:0])
}

// NewMACFoot derives the two direction keys from our short-term private
// key and the remote's short-term public key. It fails with ErrWeakKey if a
// key is missing or of low order, or if both ends have the same public key
// (the directions would coincide).
func NewMACFoot(ourShortPriv, theirShortPub *[32]byte) (*MACFoot, error) {
	s, err := NewSessionKey(ourShortPriv, theirShortPub)
	if err != nil {
		return nil, &FootError{Kind: codec.FootKindMAC, Op: "new", Err: err}
	}
	return s.MACFoot()
}

// MACFoot is the session's MAC foot (see NewMACFoot).
func (s *SessionKey) MACFoot() (*MACFoot, error) {
	sendKey, recvKey, err := s.directionKeys(MACFootLabel, 32)
	if err != nil {
		return nil, &FootError{Kind: codec.FootKindMAC, Op: "new", Err: err}
	}
	return &MACFoot{send: [32]byte(sendKey), recv: [32]byte(recvKey)}, nil
}

// directionKeys derives the n-byte keys of the two directions of a session
// under label: send (from us to them) and recv (from them to us), each
//
//	HKDF-SHA-256(secret S, no salt, info label || 0x00 || sender's pub || receiver's pub, n bytes)
//
// where S is the session's shared key and the public keys are the
// short-term ones. The MAC foot and the AEAD coats use it with their own
// labels. It fails with ErrWeakKey if both ends have the same public key
// (the directions would coincide).
func (s *SessionKey) directionKeys(label string, n int) (send, recv []byte, err error) {
	if hmac.Equal(s.ours[:], s.theirs[:]) {
		return nil, nil, fmt.Errorf("%w: both ends have the same short-term key", ErrWeakKey)
	}
	key := func(fromPub, toPub []byte) ([]byte, error) {
		info := make([]byte, 0, len(label)+1+64)
		info = append(append(append(info, label...), 0), fromPub...)
		info = append(info, toPub...)
		return hkdf.Key(sha256.New, s.shared[:], nil, string(info), n)
	}
	if send, err = key(s.ours[:], s.theirs[:]); err != nil {
		return nil, nil, err
	}
	if recv, err = key(s.theirs[:], s.ours[:]); err != nil {
		return nil, nil, err
	}
	return send, recv, nil
}

// Kind returns codec.FootKindMAC.
func (f *MACFoot) Kind() codec.FootKind { return codec.FootKindMAC }

// Size returns MACFootSize.
func (f *MACFoot) Size() int { return MACFootSize }

// Sign appends the 16-byte tag of pkt under K(us→them).
func (f *MACFoot) Sign(pkt []byte) ([]byte, error) {
	st := macHashes.Get().(*macState)
	pkt = append(pkt, st.tag(&f.send, pkt)[:MACFootSize]...)
	macHashes.Put(st)
	return pkt, nil
}

// Verify checks foot against the tag of signed under K(them→us), in
// constant time. de is not used: the foot is already the remote's.
func (f *MACFoot) Verify(signed, foot []byte, de uint32) error {
	if len(foot) != MACFootSize {
		return &FootError{Kind: codec.FootKindMAC, Op: "verify", De: de, Err: ErrFootLength}
	}
	st := macHashes.Get().(*macState)
	ok := hmac.Equal(st.tag(&f.recv, signed)[:MACFootSize], foot)
	macHashes.Put(st)
	if !ok {
		return &FootError{Kind: codec.FootKindMAC, Op: "verify", De: de, Err: ErrFootVerify}
	}
	return nil
}
