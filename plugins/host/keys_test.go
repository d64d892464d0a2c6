package host_test

import (
	"crypto/rand"
	"testing"

	"golang.org/x/crypto/curve25519"
)

func keyPair(t testing.TB) (priv, pub *[32]byte) {
	priv = new([32]byte)
	rand.Read(priv[:])
	p, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	if err != nil {
		t.Fatal(err)
	}
	return priv, (*[32]byte)(p)
}
