package core

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
)

// rejoin has other join main again (its session down) and returns the
// outcome after d.
func (p *pair) rejoin(d time.Duration) (error, bool) {
	p.otherRemote().allowed = false
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(d)
	return outcome(res)
}

// A known remote whose keys the operator rejected since is forgotten when
// it joins again; one whose keys were set back to pending waits, and is
// forgotten when they are rejected.
func TestJoinentKnownRemoteKeys(t *testing.T) {
	for _, pend := range []bool{false, true} {
		t.Run(map[bool]string{false: "rejected", true: "pended"}[pend], func(t *testing.T) {
			dir := t.TempDir()
			auto := keep.AutoOnce
			if pend {
				auto = keep.AutoNever // pending keys stay pending
			}
			p := newPair(t, auto, func(m, o *estate) { m.KeepDir = dir })
			k, err := keep.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if pend {
				p.other.Join(p.mainAddr, make(chan error, 1), p.now)
				p.pump()
				if err := k.Accept("other"); err != nil {
					t.Fatal(err)
				}
				p.advance(1500 * time.Millisecond)
				if r := p.mainRemote(); r == nil || !r.allowed {
					t.Fatal("not joined once accepted")
				}
			} else {
				p.join()
			}
			if pend {
				if err := k.Pend("other"); err != nil {
					t.Fatal(err)
				}
				if _, ok := p.rejoin(2 * time.Second); ok || len(p.main.kept.pended) != 1 {
					t.Fatalf("pended: %d pended joins", len(p.main.kept.pended))
				}
			}
			if err := k.Reject("other"); err != nil {
				t.Fatal(err)
			}
			if !pend {
				p.rejoin(100 * time.Millisecond)
			} else {
				p.advance(1500 * time.Millisecond)
			}
			if len(p.main.roster.remotes) != 0 || !p.hasEvent(p.main, EventRejected) || !p.hasEvent(p.main, EventRemoved) {
				t.Fatalf("main: %d remotes, events %v", len(p.main.roster.remotes), p.kinds(p.main, 0))
			}
		})
	}
}

// Join requests beyond a stranger address's budget are dropped unread.
func TestJoinBudget(t *testing.T) {
	p := newPair(t, keep.AutoNever, nil)
	for i := range sourceBurst + 3 {
		from := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.77"), uint16(9000+i))
		p.inject(p.main, p.namedJoin(t, fmt.Sprint("s", i)), from)
	}
	if n := p.main.stats.drops[dropJoinBudget]; n != 3 {
		t.Fatalf("join_budget %d, want 3 beyond the burst of %d", n, sourceBurst)
	}
}

// A second join from a remote whose join is under way replaces it when it
// comes from the joiner (its address and uids: it gave up on the first),
// and is refused from anywhere else.
func TestJoinentConflicts(t *testing.T) {
	p := newPair(t, keep.AutoNever, func(m, o *estate) { m.Auto = keep.AutoOnce })
	p.join()
	dir := p.mainRemote()
	p.cut = func(w wired) bool { return w.from == p.main }
	p.rejoin(10 * time.Millisecond) // main's joinent waits for the ack
	p.cut = nil
	if len(dir.inProcess(codec.TransactionKindJoin)) != 1 {
		t.Fatal("no joinent")
	}
	h := head(codec.TransactionKindJoin, codec.PacketKindRequest, dir.fuid, dir.nuid, 0, 999, false)
	body, _ := p.other.marshal(p.other.joinBody(false, 0))
	refused := p.count(p.main, codec.TransactionKindJoin, codec.PacketKindRefuse)
	p.cut = func(w wired) bool { return w.from == p.main } // the new joinent waits too
	p.inject(p.main, forge(t, codec.HeadKindRaet, nil, h, body), netip.MustParseAddrPort("127.0.0.9:7531"))
	if p.count(p.main, codec.TransactionKindJoin, codec.PacketKindRefuse) != refused+1 {
		t.Fatal("a second join from another address was not refused")
	}
	h.TransactionID = 1000
	p.inject(p.main, forge(t, codec.HeadKindRaet, nil, h, body), p.otherAddr)
	js := dir.inProcess(codec.TransactionKindJoin)
	if len(js) != 1 || js[0].(*joinent).ti != 1000 {
		t.Fatalf("joinents %v; want the joiner's new one only", js)
	}
}

// The strangers' joins under way are bounded (Config.StrangerJoins):
// beyond it a stranger's request is dropped unread (join_budget), until a
// join under way ends; the total rate (Config.StrangerJoinRate) bounds the
// rest.
func TestStrangerJoinsBounded(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.StrangerJoins, m.StrangerJoinRate = 3, 4 })
	join := func(i int) {
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 60, 0, byte(1 + i)}), 9000)
		p.inject(p.main, p.namedJoin(t, fmt.Sprint("s", i)), from)
	}
	for i := range 5 {
		join(i)
	}
	if n, d := len(p.main.roster.remotes), p.main.stats.drops[dropJoinBudget]; n != 3 || d != 2 || p.main.kept.strangers != 3 {
		t.Fatalf("%d strangers accepted (%d under way), %d dropped; want 3 accepted and 2 dropped", n, p.main.kept.strangers, d)
	}
	p.advance(6 * time.Second) // they never ack: forgotten, and room again
	if len(p.main.roster.remotes) != 0 || p.main.kept.strangers != 0 {
		t.Fatalf("%d remotes, %d under way after the timeouts", len(p.main.roster.remotes), p.main.kept.strangers)
	}
	p.main.cfg.StrangerJoins = 100 // now the rate bounds them: bursts of 4
	for i := 5; i < 11; i++ {
		join(i)
	}
	if n, d := len(p.main.roster.remotes), p.main.stats.drops[dropJoinBudget]; n != 4 || d != 4 {
		t.Fatalf("%d accepted, %d dropped in all; want 4 within the rate's burst, and 2 more dropped", n, d)
	}
}
