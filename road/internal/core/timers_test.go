package core

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"
)

// The heap keeps every remote at its key and pops them in order, through
// any mix of inserts, moves and removals.
func TestTimerHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Unix(1_700_000_000, 0)
	rs := make([]*remote, 200)
	for i := range rs {
		rs[i] = &remote{}
	}
	var h timerHeap
	want := map[*remote]time.Time{}
	for range 5000 {
		r := rs[rng.IntN(len(rs))]
		at := time.Time{}
		if rng.IntN(4) > 0 {
			at = base.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		}
		h.set(r, at)
		if at.IsZero() {
			delete(want, r)
		} else {
			want[r] = at
		}
		if len(h) != len(want) {
			t.Fatalf("%d in the heap, want %d", len(h), len(want))
		}
		for i, e := range h {
			x := e.r
			if int(x.slot) != i+1 || !x.due.Equal(want[x]) || e.at != want[x].UnixNano() {
				t.Fatalf("remote at %d: slot %d, due %v, want %v", i, x.slot, x.due, want[x])
			}
			if i > 0 && e.at < h[(i-1)/4].at {
				t.Fatalf("heap order broken at %d", i)
			}
		}
	}
	last := time.Time{}
	for len(h) > 0 {
		if !h.next().Equal(want[h[0].r]) {
			t.Fatal("next is not the root's key")
		}
		r := h.pop()
		if r.slot != 0 || !r.due.IsZero() || want[r].Before(last) {
			t.Fatal("popped out of order")
		}
		last = want[r]
	}
}

// idleMain is a main estate with n allowed remotes, each heard now and
// then (their presence timers move on, as traffic or their drivers' alives
// make them), on a fake clock.
func idleMain(tb testing.TB, n int) (*Core, []*remote, time.Time) {
	now := time.Unix(1_700_000_000, 0)
	c, err := New(&Config{Name: "main", Main: true, AlivePeriod: time.Second, AliveRate: -1}, MemStore(), now)
	if err != nil {
		tb.Fatal(err)
	}
	c.Start(netip.MustParseAddrPort("127.0.0.1:7530"), now)
	rs := make([]*remote, n)
	for i := range rs {
		r := &remote{nuid: c.nextUid(), name: fmt.Sprint("r", i), joined: true, allowed: true, txns: map[txnKey]txn{},
			ha: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 7531)}
		c.addRemote(r)
		c.schedulePresence(r, true)
		rs[i] = r
	}
	c.Deadline()
	return c, rs, now
}

// An idle main's tick: each remote is heard once a period, in turn, and
// nothing falls due, so no remote is visited whatever their number; the
// cost per tick must not grow with N (compare the sub-benchmarks' ns/op).
func BenchmarkIdleTick(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			c, rs, now := idleMain(b, n)
			step := time.Second / time.Duration(n)
			v := c.visits
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				now = now.Add(step)
				c.now = now
				c.heard(rs[i%n]) // a packet from it
				c.Deadline()
				c.Tick(now)
			}
			b.StopTimer()
			if c.visits != v {
				b.Fatalf("%d remotes visited by idle ticks", c.visits-v)
			}
			b.ReportMetric(float64(c.visits-v)/float64(b.N), "visits/tick")
		})
	}
}

// The same, asserted: with 10 and 1000 remotes an idle main's ticks visit
// no remote, and a tick allocates nothing.
func TestIdleTickVisitsNone(t *testing.T) {
	for _, n := range []int{10, 1000} {
		c, rs, now := idleMain(t, n)
		step := time.Second / time.Duration(n)
		v := c.visits
		i := 0
		allocs := testing.AllocsPerRun(3*n, func() {
			now = now.Add(step)
			c.now = now
			c.heard(rs[i%n])
			i++
			c.Deadline()
			c.Tick(now)
		})
		if c.visits != v || allocs != 0 {
			t.Errorf("%d remotes: idle ticks visited %d remotes and allocated %.1f times", n, c.visits-v, allocs)
		}
	}
}
