package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
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
	var h timerHeap[*remote]
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
			x := e.v
			if int(x.index()) != i+1 || !x.due.Equal(want[x]) || e.at != want[x].UnixNano() {
				t.Fatalf("remote at %d: slot %d, due %v, want %v", i, x.index(), x.due, want[x])
			}
			if i > 0 && e.at < h[(i-1)/4].at {
				t.Fatalf("heap order broken at %d", i)
			}
		}
	}
	last := time.Time{}
	for len(h) > 0 {
		if !h.next().Equal(want[h[0].v]) {
			t.Fatal("next is not the root's key")
		}
		r := h.pop()
		if r.index() != 0 || !r.due.IsZero() || want[r].Before(last) {
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
		r := &remote{nuid: c.nextUid(), name: fmt.Sprint("r", i), joined: true, allowed: true,
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
			v := c.wake.visits
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
			if c.wake.visits != v {
				b.Fatalf("%d remotes visited by idle ticks", c.wake.visits-v)
			}
			b.ReportMetric(float64(c.wake.visits-v)/float64(b.N), "visits/tick")
		})
	}
}

// The same, asserted: with 10 and 1000 remotes an idle main's ticks visit
// no remote, and a tick allocates nothing.
func TestIdleTickVisitsNone(t *testing.T) {
	for _, n := range []int{10, 1000} {
		c, rs, now := idleMain(t, n)
		step := time.Second / time.Duration(n)
		v := c.wake.visits
		i := 0
		allocs := testing.AllocsPerRun(3*n, func() {
			now = now.Add(step)
			c.now = now
			c.heard(rs[i%n])
			i++
			c.Deadline()
			c.Tick(now)
		})
		if c.wake.visits != v || allocs != 0 {
			t.Errorf("%d remotes: idle ticks visited %d remotes and allocated %.1f times", n, c.wake.visits-v, allocs)
		}
	}
}

// The core's remotes keep their index in the timer heap in cells of its
// places, not in themselves: moving one remote past others writes their
// cells (a few lines), not the others' structs. Each cell is its own and
// says where its remote is.
func TestRemotePlacesApart(t *testing.T) {
	c, rs, _ := idleMain(t, 600)
	cells := map[*int32]bool{}
	for _, r := range rs {
		switch i := r.index(); {
		case r.place == nil || r.place == &r.idx:
			t.Fatalf("%s keeps its index in itself (place %p)", r.name, r.place)
		case cells[r.place]:
			t.Fatalf("%s shares its cell", r.name)
		case i == 0 || c.wake.heap[i-1].v != r || c.wake.heap[i-1].place != r.place:
			t.Fatalf("%s's cell says %d, where the heap does not hold it", r.name, i)
		}
		cells[r.place] = true
	}
}

// checkClocks fails unless, after a flush, each remote's clock holds its
// transactions that have a deadline, each at that deadline, in heap order,
// and nothing else: whatever moved a transaction's timers retimed it. The
// pair rig runs it at every step of its clock (of cores with a few
// remotes: it walks them all).
func checkClocks(tb testing.TB, c *Core) {
	tb.Helper()
	if len(c.roster.remotes) > 64 {
		return
	}
	c.flushWake()
	check := func(r *remote) {
		n := 0
		for t := range r.eachTxn {
			s, d := t.timerSlot(), t.deadline()
			switch {
			case d.IsZero() && s.index() != 0:
				tb.Fatalf("%s: %s %v has no deadline but is in the clock", c.local.name, t.kind(), t.key())
			case d.IsZero():
			case s.index() == 0 || int(s.index()) > len(r.clock) || r.clock[s.index()-1].v != t || !s.due.Equal(d) || r.clock[s.index()-1].at != d.UnixNano():
				tb.Fatalf("%s: %s %v is due %v, its clock says %v (slot %d): not retimed", c.local.name, t.kind(), t.key(), d, s.due, s.index())
			default:
				n++
			}
		}
		if len(r.clock) != n {
			tb.Fatalf("%s: %s's clock holds %d, %d of its transactions have a deadline", c.local.name, r.name, len(r.clock), n)
		}
		for _, m := range r.saved {
			if due := time.Time(m.timeout); !due.IsZero() && (time.Time(r.savedDue).IsZero() || due.Before(time.Time(r.savedDue))) {
				tb.Fatalf("%s: %s holds a message due %v, its saved are due %v", c.local.name, r.name, due, time.Time(r.savedDue))
			}
		}
		for i := 1; i < len(r.clock); i++ {
			if r.clock[i].at < r.clock[(i-1)/4].at {
				tb.Fatalf("%s: %s's clock out of heap order at %d", c.local.name, r.name, i)
			}
		}
	}
	for _, r := range c.roster.remotes {
		check(r)
	}
	for _, r := range c.roster.joinees {
		if !r.added {
			check(r)
		}
	}
}

// inFlight is a joined fast-profile pair whose other has n messages under
// way to main, none of them done: main's answers are cut.
func inFlight(tb testing.TB, n int) *pair {
	p := newPair(tb, keep.AutoAlways, func(m, o *estate) {
		aeadProfile.set(m, o)
		o.MessageTimeout = time.Hour
	})
	p.join()
	p.cut = func(w wired) bool { return w.from == p.main }
	p.sendAll(p.other, n, 8)
	p.pump()
	if got := p.otherRemote().numTxns(); got != n {
		tb.Fatalf("%d messages under way, want %d", got, n)
	}
	return p
}

// The owner's timer work for a message started and sent (the messenger
// added, queued, bundled, its timer keyed) does not grow with the messages
// already in flight to that remote: flushWake keys what moved in the
// remote's clock and reads the earliest from its root, on the fake clock.
// (Walking a remote's transactions at each flush read 16 and 1024.)
func TestTimersInFlight(t *testing.T) {
	const k = 50
	per := map[int]float64{}
	for _, n := range []int{16, 1024} {
		p := inFlight(t, n)
		c := p.other
		c.Deadline()
		keyed, v := c.wake.keyed, c.wake.visits
		p.sendAll(c, k, 8)
		p.pump()
		c.Deadline()
		per[n] = float64(c.wake.keyed-keyed) / k
		if c.wake.visits != v {
			t.Errorf("n=%d: %d remotes ticked, nothing was due", n, c.wake.visits-v)
		}
		if got := len(p.otherRemote().clock); got != n+k {
			t.Errorf("n=%d: the clock holds %d, want %d", n, got, n+k)
		}
	}
	t.Logf("deadlines read a message: %.2f with 16 in flight, %.2f with 1024", per[16], per[1024])
	if per[16] > 3 || per[1024] != per[16] {
		t.Errorf("deadlines read a message: %.2f with 16 in flight, %.2f with 1024 (want the same, at most 3)", per[16], per[1024])
	}
}

// The messages a remote's window holds back are not walked by the flush
// or the ticks of the messages under way: only a tick at their earliest
// timeout walks them, and they time out then. (Each flush walked all of
// them for their timeouts: a 16 KiB one-way stream of bench/peers, 1024
// in flight, spent ~4% of its CPU in it.)
func TestHeldNotWalked(t *testing.T) {
	const timeout = time.Minute
	for _, n := range []int{16, 256} {
		p := newPair(t, keep.AutoAlways, func(m, o *estate) {
			aeadProfile.set(m, o)
			o.MessageTimeout = timeout
			o.Reassembly.MaxPerRemote = 4 // the window: 3 segmented messages at once
		})
		p.join()
		p.cut = func(w wired) bool { return w.from == p.main }
		c, r := p.other, p.otherRemote()
		res := p.sendAll(c, n, 3000)
		p.pump()
		held := len(r.saved)
		if held < n/2 {
			t.Fatalf("n=%d: %d held back, want most", n, held)
		}
		walked, visits := c.wake.savedWalked, c.wake.visits
		p.advance(timeout / 2) // resends of those under way: ticks of r
		if c.wake.visits == visits {
			t.Fatalf("n=%d: no tick in %v", n, timeout/2)
		}
		if c.wake.savedWalked != walked || len(r.saved) != held {
			t.Errorf("n=%d: %d held messages walked in %d ticks, %d of %d left, before any was due", n, c.wake.savedWalked-walked, c.wake.visits-visits, len(r.saved), held)
		}
		p.advance(timeout)
		failed := 0
		for _, ch := range res {
			if err, ok := outcome(ch); ok && errors.Is(err, ErrTimeout) {
				failed++
			}
		}
		if len(r.saved) != 0 || failed != n || c.wake.savedWalked-walked > uint64(2*held) {
			t.Errorf("n=%d: %d held left, %d of %d timed out, %d walked for %d held", n, len(r.saved), failed, n, c.wake.savedWalked-walked, held)
		}
	}
}

// BenchmarkInFlightMessage is the owner's cost of a message started and
// sent with n others in flight to the same remote (compare the
// sub-benchmarks' ns/op: the timers do not walk the n).
func BenchmarkInFlightMessage(b *testing.B) {
	for _, n := range []int{16, 1024} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			p := inFlight(b, n)
			c, r := p.other, p.otherRemote()
			body, err := c.marshal(map[string]any{"data": "b"})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.Send(r.name, body, c.cfg.BodyKind, MsgID{}, nil, p.now, p.now)
				for _, d := range c.TakeOut(nil) {
					d.Release()
				}
				c.Deadline()
				// The oldest done: n stay in flight.
				c.removeTxn(r, r.txn(txnKey{si: r.sid, ti: r.tid - uint32(n)}))
				c.Deadline()
			}
		})
	}
}
