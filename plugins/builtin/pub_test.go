package builtin_test

import (
	"testing"

	"golang.org/x/crypto/curve25519"
)

func pub(t *testing.T, priv *[32]byte) *[32]byte {
	p, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	if err != nil {
		t.Fatal(err)
	}
	return (*[32]byte)(p)
}
