package core

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// The transactions and their timers, each alone, on two cores in memory on
// a fake clock (pair_test.go): what the stack tests showed on the wall
// clock, in milliseconds, and what they could not make happen.

// outcome is what res got, if anything.
func outcome(res <-chan error) (error, bool) {
	select {
	case err := <-res:
		return err, true
	default:
		return nil, false
	}
}

// count is how many datagrams of kinds tk/pk from went on the wire.
func (p *pair) count(from *Core, tk codec.TransactionKind, pk codec.PacketKind) int {
	n := 0
	for _, w := range p.wire {
		var pp packet.Packet
		if w.from == from && packet.Parse(w.b, &pp) == nil && pp.Head.TransactionKind == tk && pp.Head.PacketKind == pk {
			n++
		}
	}
	return n
}

// kinds lists the kinds of c's events since index i.
func (p *pair) kinds(c *Core, i int) []EventKind {
	var out []EventKind
	for _, e := range p.events[c][i:] {
		out = append(out, e.Kind)
	}
	return out
}

func (p *pair) hasEvent(c *Core, k EventKind) bool {
	for _, e := range p.events[c] {
		if e.Kind == k {
			return true
		}
	}
	return false
}

// restart replaces c (main or other) with a new core of e at its address.
func (p *pair) restart(c *Core, e *estate) *Core {
	p.tb.Helper()
	n := p.newCore(e, nil)
	n.Start(p.addrOf(c), p.now)
	if c == p.main {
		p.main = n
	} else {
		p.other = n
	}
	p.air = nil
	return n
}

// A join to an estate that never answers is sent again at 1 s and 3 s
// (the redo timer doubles), fails with ErrTimeout at JoinTimeout, and
// leaves no timer behind.
func TestJoinTimesOut(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.cut = func(wired) bool { return true }
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(4900 * time.Millisecond)
	if _, ok := outcome(res); ok {
		t.Fatal("the join ended before its timeout")
	}
	p.advance(200 * time.Millisecond)
	err, ok := outcome(res)
	var te *TxnError
	if !ok || !errors.Is(err, ErrTimeout) || !errors.As(err, &te) || te.Txn != "join" {
		t.Fatalf("join: %v (%v), want a join TxnError of ErrTimeout", err, ok)
	}
	if n := p.count(p.other, codec.TransactionKindJoin, codec.PacketKindRequest); n != 3 {
		t.Errorf("%d join requests, want 3 (at 0, 1 s and 3 s)", n)
	}
	if d := p.other.Deadline(); !d.IsZero() {
		t.Errorf("a timer is left at %v", d)
	}
	if !strings.Contains(err.Error(), "join with") {
		t.Errorf("error text %q", err)
	}
}

// Keys waiting for an operator keep the join pending (both sides say so,
// and the joiner asks again every second); the operator's accept, read by
// the pend timer within a second, completes the join and the allow.
func TestJoinPendedThenAccepted(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, keep.AutoNever, func(m, o *estate) { m.KeepDir = dir })
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(3 * time.Second)
	if _, ok := outcome(res); ok {
		t.Fatal("the join ended while pending")
	}
	if !p.hasEvent(p.main, EventPending) || !p.hasEvent(p.other, EventPending) {
		t.Fatalf("pending events: main %v, other %v", p.kinds(p.main, 0), p.kinds(p.other, 0))
	}
	if n := p.count(p.other, codec.TransactionKindJoin, codec.PacketKindRequest); n < 3 {
		t.Errorf("%d join requests while pended, want one a second", n)
	}
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Accept("other"); err != nil {
		t.Fatal(err)
	}
	p.advance(1500 * time.Millisecond)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("join after the accept: %v (%v)", err, ok)
	}
	if !p.mainRemote().allowed || !p.otherRemote().allowed {
		t.Fatal("not allowed after the accept")
	}
	if err := p.send(p.other, map[string]any{"after": "accept"}); err != nil {
		t.Fatal(err)
	}
}

// The operator's reject ends a pended join (the stranger is forgotten, its
// join fails with ErrRejected), and a join with the rejected keys is
// rejected at once.
func TestJoinPendedThenRejected(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, keep.AutoNever, func(m, o *estate) { m.KeepDir = dir })
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Reject("other"); err != nil {
		t.Fatal(err)
	}
	p.advance(1500 * time.Millisecond)
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrRejected) {
		t.Fatalf("join after the reject: %v (%v)", err, ok)
	}
	if !p.hasEvent(p.main, EventRejected) || !p.hasEvent(p.main, EventRemoved) {
		t.Fatalf("main's events %v", p.kinds(p.main, 0))
	}
	if len(p.main.roster.remotes) != 0 || len(p.other.roster.remotes) != 0 {
		t.Fatalf("remotes left: main %d, other %d", len(p.main.roster.remotes), len(p.other.roster.remotes))
	}
	res = make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrRejected) {
		t.Fatalf("join with rejected keys: %v (%v)", err, ok)
	}
}

// A join pended longer than the joiner's PendTimeout fails with ErrTimeout;
// the joinent's own pended join ends at its PendTimeout too.
func TestJoinPendTimeout(t *testing.T) {
	p := newPair(t, keep.AutoNever, func(m, o *estate) {
		m.PendTimeout, o.PendTimeout = 4*time.Second, 3*time.Second
	})
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(2900 * time.Millisecond)
	if _, ok := outcome(res); ok {
		t.Fatal("ended before PendTimeout")
	}
	p.advance(200 * time.Millisecond)
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrTimeout) {
		t.Fatalf("pended join: %v (%v)", err, ok)
	}
	p.advance(2 * time.Second)
	if len(p.main.kept.pended) != 0 || len(p.main.roster.joinees) != 0 {
		t.Fatalf("main still holds %d pended joins, %d joinees", len(p.main.kept.pended), len(p.main.roster.joinees))
	}
	if d := p.main.Deadline(); !d.IsZero() {
		t.Errorf("main has a timer left at %v", d)
	}
}

// Only a main estate takes vacuous joins.
func TestNonMainRejectsVacuousJoin(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Main = false })
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrRejected) {
		t.Fatalf("vacuous join to a non-main: %v (%v)", err, ok)
	}
}

// A joinent that lost the joiner's uid answers renew: a mutable road joins
// afresh and sends, an immutable one fails with ErrRenewImmutable.
func TestRenew(t *testing.T) {
	for _, mutable := range []bool{true, false} {
		t.Run(map[bool]string{true: "mutable", false: "immutable"}[mutable], func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Mutable, o.Mutable = mutable, mutable })
			p.join()
			// main comes back with no memory of other.
			p.restart(p.main, &estate{Config: Config{Name: "main", Main: true, AlivePeriod: -1, Mutable: mutable}, Auto: keep.AutoAlways})
			r := p.otherRemote()
			res := make(chan error, 1)
			r.waiters = append(r.waiters, res)
			p.other.now = p.now
			p.other.startJoiner(r, true, false)
			p.pump()
			p.advance(10 * time.Millisecond)
			err, ok := outcome(res)
			if !mutable {
				if !ok || !errors.Is(err, ErrRenewImmutable) {
					t.Fatalf("renew on an immutable road: %v (%v)", err, ok)
				}
				return
			}
			if !ok || err != nil {
				t.Fatalf("join after renew: %v (%v)", err, ok)
			}
			if err := p.send(p.other, map[string]any{"renewed": true}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Two main estates that join each other at once end with one session each
// way (a refused side joins again, as Stack.Join does), and messages go
// both ways.
func TestSimultaneousJoinsAndAllows(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Name, o.Name, o.Main = "alpha", "beta", true })
	ra, rb := make(chan error, 1), make(chan error, 1)
	p.main.Join(p.otherAddr, ra, p.now)
	p.other.Join(p.mainAddr, rb, p.now)
	p.pump()
	p.advance(100 * time.Millisecond)
	for _, j := range []struct {
		c   *Core
		res chan error
		to  netip.AddrPort
	}{{p.main, ra, p.otherAddr}, {p.other, rb, p.mainAddr}} {
		err, ok := outcome(j.res)
		if ok && err == nil {
			continue
		}
		if ok && !errors.Is(err, ErrRefused) {
			t.Fatalf("%s's join: %v", j.c.local.name, err)
		}
		res := make(chan error, 1)
		if _, up := j.c.Join(j.to, res, p.now); !up {
			p.pump()
			p.advance(100 * time.Millisecond)
		}
		if err, ok := outcome(res); !ok || err != nil {
			t.Fatalf("%s's second join: %v (%v)", j.c.local.name, err, ok)
		}
	}
	for _, c := range []*Core{p.main, p.other} {
		if rs := c.Remotes(); len(rs) != 1 || !rs[0].Allowed {
			t.Fatalf("%s's remotes %+v", c.local.name, rs)
		}
	}
	if err := p.send(p.main, map[string]any{"x": 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.send(p.other, map[string]any{"x": 2}); err != nil {
		t.Fatal(err)
	}
}

// Join on a session that is up answers at once with the remote; the
// remote is found by address and by name, and Counters count the packets.
func TestJoinWhenAllowedAndLookups(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	res := make(chan error, 1)
	r, up := p.other.Join(p.mainAddr, res, p.now)
	if err, ok := outcome(res); !up || !ok || err != nil || r.Name != "main" || !r.Allowed {
		t.Fatalf("join when allowed: %+v %v, %v %v", r, up, err, ok)
	}
	if got, ok := p.other.RemoteAt(p.mainAddr); !ok || got.Name != "main" || got.UID != r.UID {
		t.Fatalf("RemoteAt: %+v %v", got, ok)
	}
	if got, ok := p.other.RemoteNamed("main"); !ok || got.Addr != p.mainAddr || got.HeadKind != codec.HeadKindBinary || got.FootKind != codec.FootKindNada || !packet.IsAEAD(got.CoatKind) {
		t.Fatalf("RemoteNamed: %+v %v, want the fast profile", got, ok)
	}
	if _, ok := p.other.RemoteNamed("nobody"); ok {
		t.Fatal("found nobody")
	}
	if _, ok := p.other.RemoteAt(netip.MustParseAddrPort("127.9.9.9:1")); ok {
		t.Fatal("found a remote at an unknown address")
	}
	if p.other.Name() != "other" {
		t.Fatalf("name %q", p.other.Name())
	}
	c := p.other.Counters()
	if c.PacketsOut["join/request"] != 1 || c.PacketsIn["join/response"] != 1 || c.PacketsOut["allow/hello"] != 1 || c.PacketsIn["allow/cookie"] != 1 {
		t.Fatalf("counters in %v out %v", c.PacketsIn, c.PacketsOut)
	}
	res = make(chan error, 1)
	p.other.Send("nobody", nil, codec.BodyKindJSON, MsgID{}, res, p.now, p.now)
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrUnknownRemote) {
		t.Fatalf("send to nobody: %v", err)
	}
}

// The reference's presence (other offers the reference profile, as the
// reference does): other, not main, sends an alive each AlivePeriod and
// main answers; a silent remote is asked after AlivePeriod +
// AliveTimeout, is dead AliveTimeout later and reaped by a main estate
// after Interim; when it speaks again it is alive and unreaped.
func TestAliveDeadAndReaped(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		m.AlivePeriod, m.AliveTimeout, m.Interim = 100*time.Millisecond, 300*time.Millisecond, time.Second
		o.AlivePeriod, o.Profile = 100*time.Millisecond, ProfileReference
	})
	p.join()
	w := len(p.wire)
	p.advance(time.Second)
	if n, m := p.countSince(w, p.other, codec.TransactionKindAlive, codec.PacketKindRequest),
		p.countSince(w, p.main, codec.TransactionKindAlive, codec.PacketKindRequest); n < 9 || m != 0 {
		t.Fatalf("%d alives from other and %d from main in a second of 100 ms periods, want 10 and none", n, m)
	}
	if !p.mainRemote().alived {
		t.Fatal("not alive")
	}
	before := len(p.events[p.main])
	p.cut = func(wired) bool { return true }
	p.advance(2 * time.Second)
	if got := p.kinds(p.main, before); len(got) != 2 || got[0] != EventDead || got[1] != EventReaped {
		t.Fatalf("main's events while other is silent: %v, want dead, reaped", got)
	}
	if r, _ := p.main.RemoteNamed("other"); !r.Reaped || r.Alive {
		t.Fatalf("remote %+v", r)
	}
	before = len(p.events[p.main])
	p.cut = nil
	p.advance(time.Second)
	if got := p.kinds(p.main, before); len(got) != 2 || got[0] != EventUnreaped || got[1] != EventAlive {
		t.Fatalf("main's events once other speaks: %v, want unreaped, alive", got)
	}
}

// A restarted estate restores the remote from its keep as joined, not
// allowed, without its advertisements: its presence joins again and
// allows, and messages go both ways.
func TestRestartFromKeep(t *testing.T) {
	dir := t.TempDir()
	mcfg := estate{Config: Config{Name: "main", Main: true, AlivePeriod: 100 * time.Millisecond}, Auto: keep.AutoAlways, KeepDir: dir}
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		*m = mcfg
		o.AlivePeriod = 100 * time.Millisecond
	})
	p.join()
	p.restart(p.main, &mcfg)
	if r := p.mainRemote(); r == nil || !r.joined || r.allowed {
		t.Fatalf("restored %+v", r)
	}
	before := len(p.events[p.other])
	p.advance(2 * time.Second)
	if !slices.Contains(p.kinds(p.other, before), EventAllowed) {
		t.Fatalf("other's events %v, want allowed", p.kinds(p.other, before))
	}
	if err := p.send(p.other, map[string]any{"after": "restart"}); err != nil {
		t.Fatal(err)
	}
	if err := p.send(p.main, map[string]any{"back": "again"}); err != nil {
		t.Fatal(err)
	}
}

// An alive answered unallowed makes the aliver allow again; answered
// unjoined, join again.
func TestAliveUnallowedUnjoined(t *testing.T) {
	for _, pk := range []codec.PacketKind{codec.PacketKindUnallowed, codec.PacketKindUnjoined} {
		t.Run(pk.String(), func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) { o.AlivePeriod = 200 * time.Millisecond })
			p.join()
			r := p.mainRemote()
			r.allowed = false
			if pk == codec.PacketKindUnjoined {
				r.joined = false // as if its keys were never accepted
			}
			p.advance(time.Second)
			if p.count(p.main, codec.TransactionKindAlive, pk) == 0 {
				t.Fatalf("no %v answer", pk)
			}
			if !r.joined || !r.allowed {
				t.Fatal("not joined and allowed again")
			}
			if err := p.send(p.other, map[string]any{"n": 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An alive with no answer is sent again, then the remote is dead; an alive
// nacked, refused or rejected ends at once.
func TestAliveAnswers(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { o.AliveTimeout = time.Second })
	p.join()
	r := p.otherRemote()
	p.cut = func(w wired) bool { return w.from == p.main }
	p.other.startAliver(r, false)
	p.advance(1100 * time.Millisecond)
	if n := p.count(p.other, codec.TransactionKindAlive, codec.PacketKindRequest); n < 3 {
		t.Fatalf("%d alive requests in a second unanswered", n)
	}
	if r.alived || !p.hasEvent(p.other, EventDead) {
		t.Fatal("an unanswered remote is not dead")
	}
	for _, pk := range []codec.PacketKind{codec.PacketKindNack, codec.PacketKindRefuse, codec.PacketKindReject} {
		p.other.startAliver(r, false)
		a := r.inProcess(codec.TransactionKindAlive)
		if len(a) != 1 {
			t.Fatalf("%v: %d alivers", pk, len(a))
		}
		k := a[0].key()
		h := p.main.aliveHead(p.mainRemote(), pk, k.si, k.ti, true)
		p.inject(p.other, p.sealed(p.main, h, nil), p.mainAddr)
		if len(r.inProcess(codec.TransactionKindAlive)) != 0 {
			t.Fatalf("%v: the aliver goes on", pk)
		}
	}
	if r.alived {
		t.Fatal("alive after a reject")
	}
}
