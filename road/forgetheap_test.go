//go:build heap

package road_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// maxForgottenHeap bounds what a main stack keeps of each remote it forgot:
// nothing (the keep's uid index finds one that comes back, forget.go), but
// for what a fleet leaves of a size of its own, not of the remotes' number,
// which 400 remotes cannot tell from theirs: the buffers the readers hold
// for their next read and the runtime's threads, ±50 KB from one fleet to
// the next, ±125 B a remote here (-125 to 119 B measured in 10 runs;
// bench/fleet shows what is left a remote at N=10000: -1 B fast, 4 B
// reference). 15-200 B with the tombstones
// (~40 B a remote) and the readers' feet, timer heap, keep queue and
// reassembler spares at their peak; ~1100 B in the fast profile before the
// readers let go of forgotten sessions.
const maxForgottenHeap = 192

// TestForgottenHeap: a main stack (keep on disk) that 400 remotes joined, traded
// messages with both ways and forgot once they left keeps at most
// maxForgottenHeap bytes of heap for each, in both profiles: its readers, key
// table, role records, cipher states and queues let them go. A first fleet
// of as many warms the main up (what it makes once, and the goroutines the
// runtime keeps for reuse, are then in the start); the second is measured.
// Run alone and without the race detector (make heap): it measures the
// heap of the whole process.
func TestForgottenHeap(t *testing.T) {
	const n = 400
	for _, prof := range []road.Profile{road.ProfileAuto, road.ProfileReference} {
		t.Run(fmt.Sprint("profile ", prof), func(t *testing.T) {
			main := newStack(t, road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Profile: prof,
				KeepDir: t.TempDir(), AlivePeriod: 500 * time.Millisecond, AliveTimeout: time.Second,
				Interim: time.Millisecond, ForgetAfter: time.Millisecond})
			visit(t, main, prof, "warm", n)
			before := quietHeap(t, main)
			visit(t, main, prof, "c", n)
			after := quietHeap(t, main)
			per := (int64(after) - int64(before)) / n
			t.Logf("%d remotes forgotten: heap %d → %d B, %d B kept per remote", n, before, after, per)
			if per > maxForgottenHeap {
				t.Errorf("the main keeps %d B of heap per forgotten remote, want at most %d", per, maxForgottenHeap)
			}
		})
	}
}

// quietHeap is the least of a few readings of the live heap of a process
// whose stack s is idle. A reader waits holding the buffers of its next
// read, twice as many as its last read took (up to a batch of 32): s is
// first sent a few datagrams one by one (garbage it drops), so that each
// reader's last read took one, before and after alike.
func quietHeap(t *testing.T, s *road.Stack) uint64 {
	t.Helper()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 16 {
		if _, err := c.Write([]byte{0}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	least := liveHeap()
	for range 4 {
		time.Sleep(50 * time.Millisecond)
		least = min(least, liveHeap())
	}
	return least
}

// visit has n client stacks (names prefix0…, each from its own loopback
// address) join main, send it a message and take one from it, then close,
// and waits until main forgot them all.
func visit(t *testing.T, main *road.Stack, prof road.Profile, prefix string, n int) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	clients := make([]*road.Stack, n)
	for i := range clients {
		c, err := road.New(&road.Config{Name: fmt.Sprint(prefix, i), Auto: keep.AutoAlways, Profile: prof,
			AlivePeriod: 500 * time.Millisecond, Listen: fmt.Sprintf("127.2.%d.%d:0", i/250, 1+i%250)})
		if err == nil {
			err = c.Start()
		}
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for _, c := range clients {
		wg.Go(func() {
			if _, err := c.Join(ctx, main.Addr().String()); err != nil {
				errs <- fmt.Errorf("%s joins: %w", c.Name(), err)
				return
			}
			if err := c.Send(ctx, "main", map[string]any{"up": c.Name()}); err != nil {
				errs <- fmt.Errorf("%s sends: %w", c.Name(), err)
			}
			if err := main.Send(ctx, c.Name(), map[string]any{"down": c.Name()}); err != nil {
				errs <- fmt.Errorf("main sends to %s: %w", c.Name(), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for range n {
		recvOne(t, main, 10*time.Second)
	}
	for _, c := range clients {
		if m := recvOne(t, c, 10*time.Second); m.From != "main" {
			t.Fatalf("%s received %+v", c.Name(), m)
		}
		c.Close()
	}
	forgotten(ctx, t, main)
}

// forgotten waits until main lists no remote.
func forgotten(ctx context.Context, t *testing.T, main *road.Stack) {
	t.Helper()
	for {
		rs, err := main.Remotes(ctx)
		if err != nil {
			t.Fatalf("the main still lists remotes: %v", err)
		}
		if len(rs) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the main still lists %d remotes: %v", len(rs), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
