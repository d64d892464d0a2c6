//go:build heap

package core

import (
	"fmt"
	"testing"
)

// maxRemoteHeap is the bound on a main's heap per remote.
const maxRemoteHeap = 2048

// A main core holds at most 2 KiB of heap per established idle remote, as
// much per remote with ten thousand as with a thousand: in the reference
// profile, and in the fast one with its AEAD coat (whose cipher states,
// ~1.5 KiB a session with AES-256-GCM, go once it is idle: aeadIdle) and
// with the NaCl coat. Run alone and without the race detector (make heap):
// it measures the heap of the whole process.
func TestRemoteHeap(t *testing.T) {
	per := map[string]float64{}
	for _, c := range []struct {
		kind int // of fleetKinds
		n    int
	}{{2, 1000}, {1, 1000}, {0, 1000}, {1, 10000}, {0, 10000}} {
		k := fleetKinds[c.kind]
		b := perRemote(t, c.n, k.prof, k.aead)
		heldFleet = nil
		t.Logf("%s, %d remotes: %.0f bytes per remote", k.name, c.n, b)
		if b > maxRemoteHeap {
			t.Errorf("%s, %d remotes: %.0f bytes per remote, want at most %d", k.name, c.n, b, maxRemoteHeap)
		}
		per[fmt.Sprint(k.name, c.n)] = b
	}
	for _, name := range []string{"fast", "fast-nacl"} {
		if small, big := per[name+"1000"], per[name+"10000"]; big > small*1.25 {
			t.Errorf("%s not flat in N: %.0f bytes per remote with 10000, %.0f with 1000", name, big, small)
		}
	}
}
