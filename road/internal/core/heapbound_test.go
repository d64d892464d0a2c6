//go:build heap

package core

import (
	"fmt"
	"testing"
)

// maxRemoteHeap is the bound on a main's heap per remote.
const maxRemoteHeap = 2048

// A main core holds at most 2 KiB of heap per established remote, in both
// profiles, and as much per remote with ten thousand as with a thousand.
// Run alone and without the race detector (make heap): it measures the
// heap of the whole process.
func TestRemoteHeap(t *testing.T) {
	per := map[string]float64{}
	for _, c := range []struct {
		prof Profile
		n    int
	}{{ProfileAuto, 1000}, {ProfileReference, 1000}, {ProfileAuto, 10000}} {
		b := perRemote(t, c.n, c.prof)
		heldFleet = nil
		t.Logf("%s, %d remotes: %.0f bytes per remote", profName(c.prof), c.n, b)
		if b > maxRemoteHeap {
			t.Errorf("%s, %d remotes: %.0f bytes per remote, want at most %d", profName(c.prof), c.n, b, maxRemoteHeap)
		}
		per[fmt.Sprint(profName(c.prof), c.n)] = b
	}
	if small, big := per["fast1000"], per["fast10000"]; big > small*1.25 {
		t.Errorf("not flat in N: %.0f bytes per remote with 10000, %.0f with 1000", big, small)
	}
}
