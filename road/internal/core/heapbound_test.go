//go:build heap

package core

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// maxRemoteHeap is the bound on a main's heap per remote.
const maxRemoteHeap = 2048

// A main core holds at most 2 KiB of heap per established remote, as much
// per remote with ten thousand as with a thousand: in the reference
// profile, in the fast one with the NaCl coat, and in the fast one with its
// AEAD coat beside the two cipher states of the standard library (AES-GCM
// keeps its key schedules and GHASH table, ~760 bytes a direction), which
// are measured here too. Run alone and without the race detector (make
// heap): it measures the heap of the whole process.
func TestRemoteHeap(t *testing.T) {
	ciphers := cipherHeap(t, 1000)
	t.Logf("the AEAD cipher states (%v, both directions): %.0f bytes per remote", packet.AEADKinds()[0], ciphers)
	per := map[string]float64{}
	for _, c := range []struct {
		kind  int // of fleetKinds
		n     int
		extra float64
	}{{1, 1000, 0}, {2, 1000, 0}, {0, 1000, ciphers}, {1, 10000, 0}} {
		k := fleetKinds[c.kind]
		b := perRemote(t, c.n, k.prof, k.aead)
		heldFleet = nil
		t.Logf("%s, %d remotes: %.0f bytes per remote", k.name, c.n, b)
		if b > maxRemoteHeap+c.extra {
			t.Errorf("%s, %d remotes: %.0f bytes per remote, want at most %.0f", k.name, c.n, b, maxRemoteHeap+c.extra)
		}
		per[fmt.Sprint(k.name, c.n)] = b
	}
	if small, big := per["fast-nacl1000"], per["fast-nacl10000"]; big > small*1.25 {
		t.Errorf("not flat in N: %.0f bytes per remote with 10000, %.0f with 1000", big, small)
	}
}

// cipherHeap is the heap of the two cipher states of an AEAD session of
// the kind this machine prefers, per session of n.
func cipherHeap(t *testing.T, n int) float64 {
	key := make([]byte, 32)
	before := heapNow()
	held := make([]cipher.AEAD, 0, 2*n)
	for range 2 * n {
		var a cipher.AEAD
		var err error
		if packet.AEADKinds()[0] == codec.CoatKindChaCha20Poly1305 {
			a, err = chacha20poly1305.New(key)
		} else {
			var b cipher.Block
			if b, err = aes.NewCipher(key); err == nil {
				a, err = cipher.NewGCM(b)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, a)
	}
	after := heapNow()
	runtime.KeepAlive(held)
	return (float64(after) - float64(before) - float64(cap(held))*16) / float64(n)
}
