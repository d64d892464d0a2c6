// Package xchacha is a coat plugin: coat kind xchacha (5),
// XChaCha20-Poly1305 (golang.org/x/crypto/chacha20poly1305) with a key
// derived by HKDF-SHA-256 from the session's shared key. A coat is
// ciphertext || 16-byte tag || 24-byte random nonce, the nonce last as in
// the nacl coat; the 192-bit nonce makes random nonces safe for any number
// of messages. Its main is cmd/raet-coat-xchacha.
package xchacha

import (
	"context"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/sdk"
)

// Version of this plugin.
const Version = "1.0.0"

// Overhead is what a coat adds to a body: the tag and the nonce.
const Overhead = chacha20poly1305.Overhead + chacha20poly1305.NonceSizeX

// KDFInfo is the HKDF info string of the coat key: HKDF-SHA-256 with the
// session key as the secret, no salt, this info, 32 bytes.
const KDFInfo = "raet-go coat xchacha20poly1305 v1"

// maxCached bounds the derived keys kept (one per session); the cache is
// emptied when it is full.
const maxCached = 4096

// Coat implements sdk.Coat. It is safe for concurrent use.
type Coat struct {
	rand io.Reader

	mu    sync.Mutex
	aeads map[sdk.SessionKey]cipher.AEAD
}

var _ sdk.Coat = (*Coat)(nil)

// New makes a Coat; rand is the nonce source (nil: crypto/rand).
func New(rnd io.Reader) *Coat {
	if rnd == nil {
		rnd = rand.Reader
	}
	return &Coat{rand: rnd, aeads: map[sdk.SessionKey]cipher.AEAD{}}
}

// DeriveKey returns the XChaCha20-Poly1305 key of a session key.
func DeriveKey(sk *sdk.SessionKey) ([]byte, error) {
	return hkdf.Key(sha256.New, sk[:], nil, KDFInfo, chacha20poly1305.KeySize)
}

func (c *Coat) aead(sk *sdk.SessionKey) (cipher.AEAD, error) {
	if sk.IsZero() {
		return nil, fmt.Errorf("%w: zero session key", sdk.ErrWeakKey)
	}
	c.mu.Lock()
	a := c.aeads[*sk]
	c.mu.Unlock()
	if a != nil {
		return a, nil
	}
	key, err := DeriveKey(sk)
	if err != nil {
		return nil, err
	}
	if a, err = chacha20poly1305.NewX(key); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.aeads) >= maxCached {
		clear(c.aeads)
	}
	c.aeads[*sk] = a
	c.mu.Unlock()
	return a, nil
}

// Info implements sdk.Coat.
func (c *Coat) Info(context.Context) (sdk.CoatInfo, error) {
	return sdk.CoatInfo{Kind: codec.CoatKindXChaCha, Name: "xchacha", Overhead: Overhead, Version: Version}, nil
}

// Seal implements sdk.Coat: ciphertext || tag || nonce for each body.
func (c *Coat) Seal(ctx context.Context, sk *sdk.SessionKey, bodies [][]byte) ([]sdk.Result, error) {
	a, err := c.aead(sk)
	if err != nil {
		return nil, err
	}
	out := make([]sdk.Result, len(bodies))
	for i, b := range bodies {
		if len(b) == 0 {
			continue
		}
		buf := make([]byte, len(b)+Overhead)
		nonce := buf[len(b)+chacha20poly1305.Overhead:]
		if _, err := io.ReadFull(c.rand, nonce); err != nil {
			return nil, fmt.Errorf("nonce: %w", err)
		}
		a.Seal(buf[:0], nonce, b, nil)
		out[i].Data = buf
	}
	return out, nil
}

// Open implements sdk.Coat.
func (c *Coat) Open(ctx context.Context, sk *sdk.SessionKey, coats [][]byte) ([]sdk.Result, error) {
	a, err := c.aead(sk)
	if err != nil {
		return nil, err
	}
	out := make([]sdk.Result, len(coats))
	for i, b := range coats {
		switch {
		case len(b) == 0:
		case len(b) < Overhead:
			out[i].Err = fmt.Errorf("%w: %d bytes", sdk.ErrCoatShort, len(b))
		default:
			n := len(b) - chacha20poly1305.NonceSizeX
			plain, err := a.Open(make([]byte, 0, n-chacha20poly1305.Overhead), b[n:], b[:n], nil)
			if err != nil {
				out[i].Err = fmt.Errorf("%w: xchacha20poly1305", sdk.ErrCoatOpen)
				continue
			}
			out[i].Data = plain
		}
	}
	return out, nil
}
