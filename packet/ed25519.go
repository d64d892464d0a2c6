package packet

import (
	"crypto/sha512"
	"hash"
	"sync"

	"github.com/oasisprotocol/curve25519-voi/curve"
	"github.com/oasisprotocol/curve25519-voi/curve/scalar"
	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// signingKey is an Ed25519 signing key expanded once (RFC 8032 §5.1.5):
// the secret scalar s, the prefix and the public key A. sign computes
// the RFC's deterministic signature with curve25519-voi's curve arithmetic
// (its fixed-base table), as voi.Sign does, but writes it into the
// caller's memory and takes its SHA-512 states from a pool: voi.Sign
// hashes the seed again and returns a new slice for every signature, one
// heap allocation per packet. The signatures are the same bytes as
// crypto/ed25519's (TestEd25519MatchesStdlib). It is safe for concurrent
// use.
type signingKey struct {
	s      scalar.Scalar
	prefix [32]byte
	pub    [32]byte
	states sync.Pool // *signState
}

// signState is one signature's hash and digests, kept together so that
// nothing escapes through the hash's interface.
type signState struct {
	h      hash.Hash
	digest [sha512.Size]byte
	r      [32]byte // R, compressed
}

func newSigningKey(seed *[32]byte) *signingKey {
	d := sha512.Sum512(seed[:])
	d[0] &= 248
	d[31] &= 127
	d[31] |= 64
	k := &signingKey{}
	if _, err := k.s.SetBits(d[:32]); err != nil {
		panic("raet: ed25519: a clamped scalar was refused: " + err.Error()) // 32 bytes, cannot happen
	}
	copy(k.prefix[:], d[32:])
	copy(k.pub[:], voi.NewKeyFromSeed(seed[:])[32:])
	k.states.New = func() any { return &signState{h: sha512.New()} }
	return k
}

// sign writes the signature of msg into sig.
func (k *signingKey) sign(sig *[NaClFootSize]byte, msg []byte) {
	st := k.states.Get().(*signState)
	// r = SHA-512(prefix || M) mod L; R = rB.
	st.h.Reset()
	st.h.Write(k.prefix[:])
	st.h.Write(msg)
	var r, hram scalar.Scalar
	r.SetBytesModOrderWide(st.h.Sum(st.digest[:0])) // 64 bytes: never fails
	var R curve.EdwardsPoint
	var rc curve.CompressedEdwardsY
	rc.SetEdwardsPoint(R.MulBasepoint(curve.ED25519_BASEPOINT_TABLE, &r))
	st.r = rc
	// S = (r + SHA-512(R || A || M)·s) mod L.
	st.h.Reset()
	st.h.Write(st.r[:])
	st.h.Write(k.pub[:])
	st.h.Write(msg)
	hram.SetBytesModOrderWide(st.h.Sum(st.digest[:0]))
	hram.Mul(&hram, &k.s)
	hram.Add(&hram, &r)
	copy(sig[:32], st.r[:])
	hram.ToBytes(sig[32:]) // 32 bytes: never fails
	k.states.Put(st)
}
