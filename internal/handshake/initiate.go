package handshake

import (
	"bytes"
	"crypto/subtle"
	"io"

	"github.com/raet-go/raet/keys"
)

// Offsets in an initiate body and in its stuff.
const (
	initiatePubAt   = 0
	initiateOreoAt  = initiatePubAt + keys.Size
	initiateBoxAt   = initiateOreoAt + OreoSize
	initiateNonceAt = initiateBoxAt + initiateBoxLen

	stuffLongAt       = 0
	stuffVouchAt      = stuffLongAt + keys.Size
	stuffVouchNonceAt = stuffVouchAt + vouchBoxLen
	stuffFQDNAt       = stuffVouchNonceAt + NonceSize
)

// Initiate is what R learns from a good initiate body.
type Initiate struct {
	// ILongPub is I's long-term public key. After a successful OpenInitiate
	// it equals the joined key the caller passed.
	ILongPub keys.PublicKey
	// FQDN is the name I believes R has, as received with the trailing
	// spaces removed. It is raw bytes from the peer, not necessarily ASCII.
	FQDN string
	// FQDNMatch reports whether FQDN equals R's own name as PadFQDN would
	// send it. The reference only logs a mismatch; so should the caller.
	FQDNMatch bool
}

// InitiateWant is what R expects of an initiate: the values it kept from the
// earlier steps and from the join.
type InitiateWant struct {
	// IShortPub is I's short-term public key, as OpenHello returned it.
	IShortPub keys.PublicKey
	// Oreo is the oreo MakeCookie returned.
	Oreo Oreo
	// ILongPub is I's long-term public key as joined (the remote's pubhex).
	// The vouch is opened with it.
	ILongPub keys.PublicKey
	// FQDN is R's own fully qualified domain name, compared with the one
	// received to set Initiate.FQDNMatch.
	FQDN string
}

// PadFQDN returns the fqdn field the reference sends for name: name without
// its non-ASCII characters (Python's encode('ascii', 'ignore'); in Go, every
// byte >= 0x80 is dropped, which drops whole UTF-8 sequences), padded with
// spaces or cut to FQDNSize bytes.
func PadFQDN(name string) [FQDNSize]byte {
	var f [FQDNSize]byte
	n := 0
	for i := 0; i < len(name) && n < FQDNSize; i++ {
		if c := name[i]; c < 0x80 {
			f[n] = c
			n++
		}
	}
	for ; n < FQDNSize; n++ {
		f[n] = ' '
	}
	return f
}

// MakeInitiate returns the initiate body I sends on a good cookie, and the
// session's Key (iShort.Private and rShortPub), which the session's coats
// are made from. iShort is I's short-term pair (the one of its hello),
// iLong its long-term pair; rShortPub and oreo come from OpenCookie,
// rLongPub is R's joined long-term key, and fqdn is I's idea of R's fully
// qualified domain name (see PadFQDN).
//
// The vouch (iShort.Public boxed with iLong.Private for rLongPub) proves the
// short-term key belongs to the long-term one; the stuff is boxed with
// iShort.Private for rShortPub.
//
// rnd is the source of the vouch's nonce and then of the outer nonce
// (crypto/rand.Reader when nil). Errors: ErrKey for a low-order rLongPub
// (What "vouch") or rShortPub (What "box"), ErrRandom when rnd fails.
func MakeInitiate(rnd io.Reader, iShort, iLong keys.Box, rShortPub, rLongPub keys.PublicKey, oreo Oreo, fqdn string) ([]byte, *Key, error) {
	rnd = reader(rnd)
	vouchKey, err := sharedKey(iLong.Private, rLongPub, StepInitiate, "vouch")
	if err != nil {
		return nil, nil, err
	}
	session, err := sharedKey(iShort.Private, rShortPub, StepInitiate, "box")
	if err != nil {
		return nil, nil, err
	}
	var stuff [initiateStuffLen]byte
	copy(stuff[stuffLongAt:], iLong.Public[:])
	if err := seal(stuff[stuffVouchAt:stuffVouchNonceAt], stuff[stuffVouchNonceAt:stuffFQDNAt], iShort.Public[:],
		vouchKey, rnd, StepInitiate, "vouch"); err != nil {
		return nil, nil, err
	}
	f := PadFQDN(fqdn)
	copy(stuff[stuffFQDNAt:], f[:])

	body := make([]byte, InitiateSize)
	copy(body[initiatePubAt:], iShort.Public[:])
	copy(body[initiateOreoAt:], oreo[:])
	if err := seal(body[initiateBoxAt:initiateNonceAt], body[initiateNonceAt:], stuff[:], session, rnd, StepInitiate, "box"); err != nil {
		return nil, nil, err
	}
	return body, session, nil
}

// OpenInitiate checks an initiate body with R's short-term and long-term
// private keys against want, in the reference's order: the short-term key
// it carries must be want.IShortPub ("short-term key"), its oreo want.Oreo
// ("oreo"); the box must open ("box"); the long-term key inside must be
// want.ILongPub ("long-term key"); the vouch must open with R's long-term
// private key and want.ILongPub, to want.IShortPub ("vouch"). It returns
// the session's Key too (rShortPriv and want.IShortPub), which the
// session's coats are made from.
//
// A different fqdn is not an error; Initiate.FQDNMatch reports it.
//
// Errors: ErrLength, ErrMismatch, ErrKey, ErrOpen, with What naming the check
// as above. With ErrMismatch on "long-term key" the returned Initiate holds
// what was received, for a log line; it must not be used otherwise.
func OpenInitiate(body []byte, rShortPriv, rLongPriv keys.PrivateKey, want InitiateWant) (Initiate, *Key, error) {
	if len(body) != InitiateSize {
		return Initiate{}, nil, lengthError(StepInitiate, len(body), InitiateSize)
	}
	if !keys.PublicKey(body[initiatePubAt:initiateOreoAt]).Equal(want.IShortPub) {
		return Initiate{}, nil, fail(StepInitiate, "short-term key", ErrMismatch)
	}
	if subtle.ConstantTimeCompare(body[initiateOreoAt:initiateBoxAt], want.Oreo[:]) != 1 {
		return Initiate{}, nil, fail(StepInitiate, "oreo", ErrMismatch)
	}
	session, err := sharedKey(rShortPriv, want.IShortPub, StepInitiate, "box")
	if err != nil {
		return Initiate{}, nil, err
	}
	stuff, err := open(body[initiateBoxAt:initiateNonceAt], body[initiateNonceAt:], session, StepInitiate, "box")
	if err != nil {
		return Initiate{}, nil, err
	}
	fqdn := bytes.TrimRight(stuff[stuffFQDNAt:], " ")
	local := PadFQDN(want.FQDN)
	in := Initiate{
		ILongPub:  keys.PublicKey(stuff[stuffLongAt:stuffVouchAt]),
		FQDN:      string(fqdn),
		FQDNMatch: bytes.Equal(fqdn, bytes.TrimRight(local[:], " ")),
	}
	if !in.ILongPub.Equal(want.ILongPub) {
		return in, nil, fail(StepInitiate, "long-term key", ErrMismatch)
	}
	vouchKey, err := sharedKey(rLongPriv, want.ILongPub, StepInitiate, "vouch")
	if err != nil {
		return Initiate{}, nil, err
	}
	vouch, err := open(stuff[stuffVouchAt:stuffVouchNonceAt], stuff[stuffVouchNonceAt:stuffFQDNAt], vouchKey, StepInitiate, "vouch")
	if err != nil {
		return Initiate{}, nil, err
	}
	if !keys.PublicKey(vouch).Equal(want.IShortPub) {
		return Initiate{}, nil, fail(StepInitiate, "vouch", ErrMismatch)
	}
	return in, session, nil
}
