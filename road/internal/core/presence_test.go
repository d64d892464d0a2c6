package core

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// newFleet is a pair whose main has n remotes, all joined and allowed:
// other and n-1 more estates like it (other1, other2, …), cfg adjusting
// them all.
func newFleet(tb testing.TB, n int, cfg func(main, other *estate)) *pair {
	tb.Helper()
	p := newPair(tb, keep.AutoAlways, cfg)
	p.join()
	tmpl := estate{Config: Config{Name: "other", AlivePeriod: -1}, Auto: keep.AutoAlways}
	if cfg != nil {
		cfg(&estate{}, &tmpl)
	}
	for i := 1; i < n; i++ {
		e := tmpl
		e.Name = fmt.Sprintf("other%d", i)
		c := p.newCore(&e, nil)
		a := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 1 + byte(i>>8), byte(i)}), 7531)
		p.extra, p.extraAddr = append(p.extra, c), append(p.extraAddr, a)
		c.Start(a, p.now)
		res := make(chan error, 1)
		c.Join(p.mainAddr, res, p.now)
		p.pump()
		p.advance(10 * time.Millisecond)
		if err, ok := outcome(res); !ok || err != nil {
			tb.Fatalf("%s joins: %v (%v)", e.Name, err, ok)
		}
	}
	return p
}

// countSince counts the packets of kinds tk/pk that from sent since the
// wire's index i.
func (p *pair) countSince(i int, from *Core, tk codec.TransactionKind, pk codec.PacketKind) int {
	n := 0
	for _, w := range p.wire[i:] {
		var pp packet.Packet
		if w.from == from && packet.Parse(w.b, &pp) == nil && pp.Head.TransactionKind == tk && pp.Head.PacketKind == pk {
			n++
		}
	}
	return n
}

// Between two raet-go estates one end drives presence: other (not main)
// sends one alive per period of silence and main, which answers, sends
// none; so an idle pair makes one exchange per period (2 packets), the
// main's timers never run, and while messages flow no alive goes at all.
func TestPresenceDriven(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.AlivePeriod, o.AlivePeriod = time.Second, time.Second })
	p.join()
	p.advance(5 * time.Second)
	w, v := len(p.wire), p.main.wake.visits
	p.advance(10 * time.Minute)
	if n := p.countSince(w, p.main, codec.TransactionKindAlive, codec.PacketKindRequest); n != 0 {
		t.Errorf("main sent %d alives in 10 idle minutes; the driver's alives keep it quiet", n)
	}
	if n := p.countSince(w, p.other, codec.TransactionKindAlive, codec.PacketKindRequest); n < 590 || n > 601 {
		t.Errorf("other sent %d alives in 600 periods, want one a period", n)
	}
	rate := float64(len(p.wire)-w) / 600
	t.Logf("idle pair: %.3f packets per remote per second; main visited %d remotes", rate, p.main.wake.visits-v)
	if rate > 2.01 {
		t.Errorf("%.3f packets a second, want at most 2 (one exchange a period)", rate)
	}
	if p.main.wake.visits != v {
		t.Errorf("main ran %d remotes' timers while the driver kept it informed", p.main.wake.visits-v)
	}
	if !p.mainRemote().alived || !p.otherRemote().alived {
		t.Fatal("not alive on both sides")
	}
	// Traffic counts as alive: messages every half period, no alive.
	w = len(p.wire)
	for i := range 60 {
		from := p.other
		if i%2 == 1 {
			from = p.main
		}
		if err := p.send(from, map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
		p.advance(499 * time.Millisecond)
	}
	if n := p.countSince(w, p.other, codec.TransactionKindAlive, codec.PacketKindRequest) +
		p.countSince(w, p.main, codec.TransactionKindAlive, codec.PacketKindRequest); n != 0 {
		t.Errorf("%d alives while messages flowed", n)
	}
}

// A main's period grows with its remotes (AliveRate) and its drivers learn
// it from its acks: 40 remotes at 10 exchanges a second make a 4 s period,
// and the fleet's idle rate stays at 2 packets per remote per period.
func TestPresenceAdapts(t *testing.T) {
	const n, rate = 40, 10
	p := newFleet(t, n, func(m, o *estate) {
		m.AlivePeriod, m.AliveRate, o.AlivePeriod = time.Second, rate, time.Second
	})
	want := 4 * time.Second
	if got := p.main.alivePeriod(); got != want {
		t.Fatalf("main's period %v with %d remotes at %d/s, want %v", got, n, rate, want)
	}
	p.advance(30 * time.Second) // every driver hears the period once
	for _, c := range append([]*Core{p.other}, p.extra...) {
		if r := c.roster.byName["main"]; r.prof == nil || r.prof.alive != want || c.pairPeriod(r) != want {
			t.Fatalf("%s drives at %v, want %v", c.local.name, c.pairPeriod(r), want)
		}
	}
	w, v := len(p.wire), p.main.wake.visits
	p.advance(10 * time.Minute)
	perRemote := float64(len(p.wire)-w) / n / 600
	t.Logf("%d idle remotes, period %v: %.3f packets per remote per second; main visited %d remotes", n, want, perRemote, p.main.wake.visits-v)
	if bound := 2 / want.Seconds(); perRemote > bound*1.01 {
		t.Errorf("%.3f packets per remote per second, want at most %.3f", perRemote, bound)
	}
	if m := p.countSince(w, p.main, codec.TransactionKindAlive, codec.PacketKindRequest); m != 0 || p.main.wake.visits != v {
		t.Errorf("main sent %d alives and ran %d remotes' timers", m, p.main.wake.visits-v)
	}
}

// Toward reference remotes (no caps: they cannot learn its period) a main
// keeps its own period, grown with its remotes: 40 remotes at AliveRate 10
// make a 4 s period, so a remote that never asks is asked once per 6 s of
// silence (period + AliveTimeout), under 10 alives a second in all (a
// fixed 1 s period would ask 13 a second), and stays alive; remotes that
// ask every second themselves (the reference's timer) are answered and
// never asked.
func TestPresenceReferenceBounded(t *testing.T) {
	const n, rate = 40, 10
	for _, own := range []time.Duration{-1, time.Second} {
		t.Run(fmt.Sprint("remotes' period ", own), func(t *testing.T) {
			p := newFleet(t, n, func(m, o *estate) {
				m.AlivePeriod, m.AliveRate = time.Second, rate
				o.AlivePeriod, o.Profile = own, ProfileReference
			})
			if got := p.main.alivePeriod(); got != 4*time.Second {
				t.Fatalf("main's period %v, want 4s", got)
			}
			p.advance(30 * time.Second)
			w, e := len(p.wire), len(p.events[p.main])
			p.advance(2 * time.Minute)
			asked := float64(p.countSince(w, p.main, codec.TransactionKindAlive, codec.PacketKindRequest)) / 120
			acks := float64(p.countSince(w, p.main, codec.TransactionKindAlive, codec.PacketKindAck)) / 120
			t.Logf("main asked %.2f alives a second, answered %.2f", asked, acks)
			switch {
			case own < 0 && (asked > rate || asked < 0.9*n/6):
				t.Errorf("main asked %.2f alives a second, want about %d/6 s and at most AliveRate %d", asked, n, rate)
			case own > 0 && (asked != 0 || acks < 0.99*n):
				t.Errorf("main asked %.2f and answered %.2f alives a second; want none asked, %d answered", asked, acks, n)
			}
			for _, ev := range p.events[p.main][e:] {
				if ev.Kind == EventDead || ev.Kind == EventReaped {
					t.Fatalf("%v %s at %v", ev.Kind, ev.Remote, ev.Time)
				}
			}
		})
	}
}

// A reader that cannot keep up sheds presence first (FootChecker.Shed):
// the alive requests of its remotes go unchecked and unanswered
// (presence_shed), while a message is delivered and a new estate joins and
// allows; once it keeps up again, the alives are answered.
func TestShedPresence(t *testing.T) {
	p := newFleet(t, 2, func(m, o *estate) {
		m.Profile, o.Profile, m.AlivePeriod, o.AlivePeriod = ProfileReference, ProfileReference, time.Second, time.Second
	})
	p.advance(3 * time.Second)
	p.feet[p.main].Shed = true
	w, e := len(p.wire), len(p.events[p.other])
	p.advance(10 * time.Second)
	if err := p.send(p.other, map[string]any{"while": "shedding"}); err != nil {
		t.Fatal(err)
	}
	newcomer := p.extra[0]
	r := newcomer.roster.byName["main"]
	r.joined, r.allowed = false, false
	res := make(chan error, 1)
	newcomer.Join(p.mainAddr, res, p.now)
	p.advance(5 * time.Second)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("a join while shedding: %v (done %v)", err, ok)
	}
	shed := p.main.Counters().Drops["presence_shed"]
	acks := p.countSince(w, p.main, codec.TransactionKindAlive, codec.PacketKindAck)
	t.Logf("shedding: %d alive requests shed, %d answered", shed, acks)
	if shed < 10 || acks != 0 {
		t.Errorf("%d alive requests shed and %d answered in 15 s of shedding", shed, acks)
	}
	dead := false
	for _, ev := range p.events[p.other][e:] {
		dead = dead || ev.Kind == EventDead
	}
	if !dead {
		t.Error("other never missed the main's answers")
	}
	p.feet[p.main].Shed = false
	w = len(p.wire)
	p.advance(5 * time.Second)
	if acks := p.countSince(w, p.main, codec.TransactionKindAlive, codec.PacketKindAck); acks < 8 || !p.otherRemote().alived {
		t.Errorf("after shedding: %d alives answered, other finds the main alive: %v", acks, p.otherRemote().alived)
	}
}

// The documented detection times: the driver finds its answerer dead
// within period + AliveTimeout of the silence, the answerer its driver
// within period + 2·AliveTimeout, though an attacker replays the driver's
// signed alives.
func TestPresenceDetection(t *testing.T) {
	const period, timeout = time.Second, 2 * time.Second
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		m.AlivePeriod, o.AlivePeriod = period, period
		m.AliveTimeout, o.AliveTimeout = timeout, timeout
	})
	p.join()
	p.advance(10 * time.Second)
	var alive []byte // other's last alive, which an attacker replays
	for _, w := range p.wire {
		var pp packet.Packet
		if w.from == p.other && packet.Parse(w.b, &pp) == nil && pp.Head.TransactionKind == codec.TransactionKindAlive {
			alive = w.b
		}
	}
	silent := p.now
	p.cut = func(wired) bool { return true }
	for range 40 {
		p.advance(500 * time.Millisecond)
		p.inject(p.main, alive, p.otherAddr) // a replay is no sign of life
	}
	deadAt := func(c *Core) time.Duration {
		for _, e := range p.events[c] {
			if e.Kind == EventDead && !e.Time.Before(silent) {
				return e.Time.Sub(silent)
			}
		}
		t.Fatalf("%s never found its peer dead", c.local.name)
		return 0
	}
	t.Logf("dead after: driver %v, answerer %v", deadAt(p.other), deadAt(p.main))
	if d := deadAt(p.other); d > period+timeout || d < timeout {
		t.Errorf("the driver found the answerer dead after %v, want within %v", d, period+timeout)
	}
	if d := deadAt(p.main); d > period+2*timeout || d <= period {
		t.Errorf("the answerer found the driver dead after %v, want within %v", d, period+2*timeout)
	}
}

// A main whose Interim is shorter than its presence period (grown with its
// remotes) reaps no remote whose driver keeps sending alives: the reap
// waits for presence to find the remote dead (period + 2·AliveTimeout).
// Once they all fall silent each is found dead within that time, reaped
// Interim later, and then forgotten.
func TestReapAfterDetection(t *testing.T) {
	const n, rate, timeout = 40, 10, time.Second
	p := newFleet(t, n, func(m, o *estate) {
		m.AlivePeriod, m.AliveRate, m.AliveTimeout, o.AlivePeriod = time.Second, rate, timeout, time.Second
		m.Interim, m.ForgetAfter = time.Second, time.Second
	})
	period := 4 * time.Second // 40 remotes at 10 exchanges a second
	if got := p.main.alivePeriod(); got != period {
		t.Fatalf("main's period %v, want %v", got, period)
	}
	p.advance(2 * time.Minute)
	for _, e := range p.events[p.main] {
		if e.Kind == EventReaped || e.Kind == EventForgotten || e.Kind == EventDead {
			t.Fatalf("%v %s at %v while its driver sent alives every %v", e.Kind, e.Remote, e.Time, period)
		}
	}
	if len(p.main.roster.remotes) != n {
		t.Fatalf("main lists %d remotes, want %d", len(p.main.roster.remotes), n)
	}
	before, silent := len(p.events[p.main]), p.now
	p.cut = func(wired) bool { return true }
	p.advance(period + 2*timeout + time.Second + 2*time.Second) // found dead, then Interim
	reaped := map[string]time.Duration{}
	for _, e := range p.events[p.main][before:] {
		if e.Kind == EventReaped {
			reaped[e.Remote] = e.Time.Sub(silent)
		}
	}
	if len(reaped) != n || len(p.main.roster.remotes) != 0 {
		t.Fatalf("%d of %d reaped, %d still listed, %v after they fell silent", len(reaped), n, len(p.main.roster.remotes), p.now.Sub(silent))
	}
	for name, d := range reaped {
		if bound := period + 2*timeout + time.Second; d > bound+10*time.Millisecond {
			t.Errorf("%s reaped %v after the silence, want within %v (found dead, then Interim)", name, d, bound)
		}
	}
}

// Timers cost what is due, not the number of remotes: with remotes that
// never drive presence (the reference's profile, no timer of their own)
// main asks each after every period + AliveTimeout of silence (3 s), and
// visits each remote about once in that time whether it has 8 remotes or
// 32 (the idle raet-go fleets above visit none).
func TestTimerVisitsByDue(t *testing.T) {
	perRemote := map[int]float64{}
	for _, n := range []int{8, 32} {
		p := newFleet(t, n, func(m, o *estate) {
			m.AlivePeriod, o.AlivePeriod, o.Profile = time.Second, -1, ProfileReference
		})
		p.advance(5 * time.Second)
		v := p.main.wake.visits
		p.advance(time.Minute)
		perRemote[n] = float64(p.main.wake.visits-v) / float64(n) / 60
		t.Logf("%d remotes: main visited %.3f per remote per second", n, perRemote[n])
		if perRemote[n] > 0.4 || perRemote[n] < 0.3 {
			t.Errorf("%d remotes: %.3f visits per remote per second, want about 1/3 (its presence timer)", n, perRemote[n])
		}
	}
	if perRemote[32] > perRemote[8]*1.1 {
		t.Errorf("visits per remote grow with the remotes: %v", perRemote)
	}
}

// A main forgets a remote reaped and silent for ForgetAfter: every map,
// timer and slot lets it go, with EventForgotten (ReasonSilent), its keep
// stays; when it speaks again it is loaded from the keep, joins and allows
// again, and messages flow.
func TestForgetSilentAndRecall(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		m.AlivePeriod, m.AliveTimeout, m.Interim, m.ForgetAfter = 100*time.Millisecond, 300*time.Millisecond, time.Second, 2*time.Second
		o.AlivePeriod = 100 * time.Millisecond
	})
	p.join()
	uid := p.main.roster.byName["other"].nuid
	before := len(p.events[p.main])
	p.cut = func(wired) bool { return true }
	p.advance(5 * time.Second)
	got := p.events[p.main][before:]
	if len(got) != 3 || got[0].Kind != EventDead || got[1].Kind != EventReaped || got[2].Kind != EventForgotten || got[2].Reason != ReasonSilent {
		t.Fatalf("main's events while other is silent: %v, want dead, reaped, forgotten (silent)", got)
	}
	c := p.main
	c.Deadline() // flush, as the owner does
	if len(c.roster.remotes)+len(c.roster.byName)+len(c.roster.joinees)+len(c.wake.heap)+len(c.wake.touched)+len(c.kept.pended)+len(c.kept.roles) != 0 || c.reasm.Pending() != 0 {
		t.Fatalf("left after forgetting: %d remotes, %d names, %d joinees, %d timers, %d touched, %d pended, %d roles' records, %d reassembling",
			len(c.roster.remotes), len(c.roster.byName), len(c.roster.joinees), len(c.wake.heap), len(c.wake.touched), len(c.kept.pended), len(c.kept.roles), c.reasm.Pending())
	}
	c.PublishKeys()
	if c.KeyTable().lookup(uid) != nil {
		t.Fatal("the readers keep its key")
	}
	if est, err := c.store.loadRemoteUID(uid); err != nil || est.Name != "other" {
		t.Fatalf("its keep went too, or its uid names another: %+v, %v", est, err)
	}
	before = len(p.events[p.other])
	p.cut = nil
	p.advance(5 * time.Second)
	if r := p.mainRemote(); r == nil || !r.allowed || !p.otherRemote().allowed {
		t.Fatalf("not allowed again after coming back; other's events %v", p.kinds(p.other, before))
	}
	if err := p.send(p.other, map[string]any{"back": 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.send(p.main, map[string]any{"welcome": 1}); err != nil {
		t.Fatal(err)
	}
}

// Beyond MaxRemotes the longest silent remote is forgotten
// (ReasonTooMany): a remote that spoke lately stays.
func TestForgetCap(t *testing.T) {
	const limit = 3
	p := newFleet(t, limit, func(m, o *estate) { m.MaxRemotes = limit })
	// other spoke last: other1, joined before other2, is the longest silent.
	if err := p.send(p.other, map[string]any{"here": 1}); err != nil {
		t.Fatal(err)
	}
	before := len(p.events[p.main])
	e := estate{Config: Config{Name: "late", AlivePeriod: -1}, Auto: keep.AutoAlways}
	c := p.newCore(&e, nil)
	a := netip.MustParseAddrPort("127.0.9.9:7531")
	p.extra, p.extraAddr = append(p.extra, c), append(p.extraAddr, a)
	c.Start(a, p.now)
	res := make(chan error, 1)
	c.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(10 * time.Millisecond)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("late joins: %v (%v)", err, ok)
	}
	var forgotten []string
	for _, ev := range p.events[p.main][before:] {
		if ev.Kind == EventForgotten {
			if ev.Reason != ReasonTooMany {
				t.Errorf("forgotten for %v", ev.Reason)
			}
			forgotten = append(forgotten, ev.Remote)
		}
	}
	if len(forgotten) != 1 || forgotten[0] != "other1" {
		t.Fatalf("forgotten %v, want other1 (the longest silent)", forgotten)
	}
	if len(p.main.roster.remotes) != limit || len(p.main.roster.byName) != limit || p.main.roster.byName["other"] == nil || p.main.roster.byName["late"] == nil {
		t.Fatalf("main holds %d remotes", len(p.main.roster.remotes))
	}
}

// Forgetting returns a remote's memory: a main whose 2000 remotes are all
// forgotten gives back the heap they took (their joins' budgets too),
// keeping nothing of them (the
// keep's uid index finds one that comes back: forget.go) but the core
// itself (~16 KB, made after the first reading: the bound allows 8 B a
// remote; -10 B measured, the maps, the timer heap and the touched list
// rebuilt; 11 B with the timer heap and touched list left at the peak, 40
// B more with tombstones), and tracks none of them.
func TestForgetFreesMemory(t *testing.T) {
	const n = 2000
	heap := heapNow // heap_test.go
	before := heap()
	c, rs, _ := idleMain(t, n)
	for _, r := range rs {
		r.mids.delivered(MsgID{Stream: 1, Seq: 1}, c.now)           // what a remote that spoke holds
		c.lim.stranger(c.now, r.ha.Addr(), DefaultStrangerJoinRate) // and the budget its join took
	}
	rs = nil
	full := heap()
	c.now = c.now.Add(time.Minute) // the budgets refill
	for _, r := range c.roster.remotes {
		c.forget(r, ReasonSilent)
	}
	c.Deadline()
	c.ClearEvents() // the owner takes them (and the burst's room goes)
	c.PublishKeys()
	empty := heap()
	t.Logf("heap: %d B before, %d B per remote held, %d B per remote after forgetting", before,
		(full-before)/n, (int64(empty)-int64(before))/n)
	if len(c.roster.remotes)+len(c.roster.byName)+len(c.wake.heap)+len(c.lim.sources) != 0 {
		t.Fatalf("still held: %d remotes, %d names, %d timers, %d sources' budgets", len(c.roster.remotes), len(c.roster.byName), len(c.wake.heap), len(c.lim.sources))
	}
	if c.wake.places.chunk != nil || len(c.wake.places.free) != 0 {
		t.Fatalf("the timer heap's places still hold a chunk of %d and %d cells given back", len(c.wake.places.chunk), len(c.wake.places.free))
	}
	if full < empty || empty > before+n*8 || (full-empty) < (full-before)*9/10 {
		t.Fatalf("forgetting %d remotes freed %d B each of %d (heap %d → %d → %d)", n, (int64(full)-int64(empty))/n, (full-before)/n, before, full, empty)
	}
	runtime.KeepAlive(c)
}
