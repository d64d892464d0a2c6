package road_test

import (
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// liveHeap is the live heap after the collections that also empty the
// sync.Pools.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestIdleStackHeap: a client stack joined to a main and idle holds at most
// 256 KiB of heap at the default packet sizes, in both profiles, with the
// default segmentation offload (UDP_GRO, whose 64 KiB buffers an idle
// socket gives back: it held 360 KiB with one or two of them, and 4.3 MiB
// when each reader kept 32) and without. The main's share for each remote
// is counted in.
func TestIdleStackHeap(t *testing.T) {
	const limit = 256 << 10
	for _, noOffload := range []bool{false, true} {
		for _, prof := range []road.Profile{road.ProfileAuto, road.ProfileReference} {
			name := fmt.Sprintf("profile %d, no offload %v", prof, noOffload)
			// The least of a few tries: what the rest of the process
			// allocates meanwhile does not count, and a try in which the heap
			// fell (garbage of an earlier test freed) measured nothing. Each
			// try's stacks close at the end of its subtest.
			least := int64(1 << 62)
			for try := range 3 {
				t.Run(fmt.Sprintf("%s, try %d", name, try), func(t *testing.T) {
					if per := idleStackHeap(t, prof, noOffload); per > 0 {
						least = min(least, per)
					}
				})
				if least <= limit {
					break
				}
			}
			t.Logf("%s: %.1f KiB of heap per idle client stack", name, float64(least)/1024)
			if least > limit {
				t.Errorf("%s: %d KiB of heap per idle client stack, want at most %d", name, least>>10, limit>>10)
			}
		}
	}
}

// idleStackHeap is the heap per client stack of 16 joined to a main and idle.
func idleStackHeap(t *testing.T, prof road.Profile, noOffload bool) int64 {
	main := newStack(t, road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Profile: prof, NoOffload: noOffload})
	const n = 16
	before := liveHeap()
	for i := range n {
		// Each from its own loopback address, as the main's budget for
		// joins from strangers is per address.
		c := newStack(t, road.Config{Name: fmt.Sprintf("c%d", i), Auto: keep.AutoAlways, Profile: prof,
			NoOffload: noOffload, Listen: fmt.Sprintf("127.1.%d.%d:0", main.Addr().Port()%250, 1+i)})
		if _, err := c.Join(ctxT(t, 20*time.Second), main.Addr().String()); err != nil {
			t.Fatal(err)
		}
	}
	return (int64(liveHeap()) - int64(before)) / n
}

// TestOversizedDatagramCounted: a datagram longer than the largest the
// stack receives is dropped and counted, not lost silently; one that fits
// reaches the core (and is dropped there as the garbage it is).
func TestOversizedDatagramCounted(t *testing.T) {
	s := newStack(t, road.Config{Name: "rx"})
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, size := range []int{2048, 2049, 9000} {
		if _, err := c.Write(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
	}
	ctx := ctxT(t, 10*time.Second)
	for {
		cs, err := s.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var other uint64
		for k, v := range cs.Drops {
			if k != "unreadable" {
				other += v
			}
		}
		if cs.Drops["unreadable"] == 2 && other == 1 {
			return
		}
		if cs.Drops["unreadable"] > 2 || other > 1 {
			t.Fatalf("drops %v, want 2 unreadable and 1 other", cs.Drops)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("drops %v, want 2 unreadable and 1 other", cs.Drops)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
