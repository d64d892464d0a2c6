package handshake

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/raet-go/raet/keys"
)

// Offsets in a cookie body and in its stuff.
const (
	cookieBoxAt   = 0
	cookieNonceAt = cookieBoxAt + cookieBoxLen

	cookiePubAt  = 0
	cookieSEIDAt = cookiePubAt + keys.Size
	cookieDEIDAt = cookieSEIDAt + 4
	cookieOreoAt = cookieDEIDAt + 4
)

// Cookie is the content of a cookie body.
type Cookie struct {
	// RShortPub is R's fresh short-term public key for this session.
	RShortPub keys.PublicKey
	// SEID is R's uid for I (R's nuid of I); I's fuid of R must equal it.
	SEID uint32
	// DEID is I's uid for R (R's fuid of I); I's nuid of R must equal it.
	DEID uint32
	// Oreo is the value I must return in its initiate.
	Oreo Oreo
}

// MakeCookie returns the cookie body R answers a good hello with, and the
// oreo it drew, which R must keep to check the initiate. The stuff (rShortPub,
// seid, deid, oreo) is boxed under k, the Key OpenHello returned (R's
// long-term private key and I's short-term public key). rShortPub is R's
// fresh short-term public key; seid is R's uid for I (its nuid of that
// remote), deid is I's uid for R (its fuid).
//
// rnd is the source of the oreo and then of the nonce (crypto/rand.Reader
// when nil). Errors: ErrRandom when rnd fails.
func MakeCookie(rnd io.Reader, k *Key, rShortPub keys.PublicKey, seid, deid uint32) ([]byte, Oreo, error) {
	rnd = reader(rnd)
	var stuff [cookieStuffLen]byte
	copy(stuff[cookiePubAt:], rShortPub[:])
	binary.BigEndian.PutUint32(stuff[cookieSEIDAt:], seid)
	binary.BigEndian.PutUint32(stuff[cookieDEIDAt:], deid)
	if err := readRandom(rnd, stuff[cookieOreoAt:], StepCookie, "oreo"); err != nil {
		return nil, Oreo{}, err
	}
	body := make([]byte, CookieSize)
	if err := seal(body[cookieBoxAt:cookieNonceAt], body[cookieNonceAt:], stuff[:], k, rnd, StepCookie, "box"); err != nil {
		return nil, Oreo{}, err
	}
	return body, Oreo(stuff[cookieOreoAt:]), nil
}

// OpenCookie opens a cookie body under k, the Key MakeHello returned (I's
// short-term private key and R's joined long-term public key), and checks
// its uids: SEID must equal wantSEID (I's fuid of R) and DEID wantDEID (I's
// nuid of R).
//
// Errors: ErrLength, ErrOpen, ErrMismatch (What "seid" or "deid"). With
// ErrMismatch the returned Cookie holds what was received, for a log line;
// it must not be used otherwise.
func OpenCookie(body []byte, k *Key, wantSEID, wantDEID uint32) (Cookie, error) {
	if len(body) != CookieSize {
		return Cookie{}, lengthError(StepCookie, len(body), CookieSize)
	}
	stuff, err := open(body[cookieBoxAt:cookieNonceAt], body[cookieNonceAt:], k, StepCookie, "box")
	if err != nil {
		return Cookie{}, err
	}
	c := Cookie{
		RShortPub: keys.PublicKey(stuff[cookiePubAt:cookieSEIDAt]),
		SEID:      binary.BigEndian.Uint32(stuff[cookieSEIDAt:]),
		DEID:      binary.BigEndian.Uint32(stuff[cookieDEIDAt:]),
		Oreo:      Oreo(stuff[cookieOreoAt:]),
	}
	if c.SEID != wantSEID {
		return c, fail(StepCookie, "seid", fmt.Errorf("%w: got %d, want %d", ErrMismatch, c.SEID, wantSEID))
	}
	if c.DEID != wantDEID {
		return c, fail(StepCookie, "deid", fmt.Errorf("%w: got %d, want %d", ErrMismatch, c.DEID, wantDEID))
	}
	return c, nil
}
