package core

import (
	"errors"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// lose drops the first n datagrams of kinds tk/pk from `from`.
func (p *pair) lose(from *Core, tk codec.TransactionKind, pk codec.PacketKind, n int) {
	p.cut = func(w wired) bool {
		var pp packet.Packet
		if n > 0 && w.from == from && packet.Parse(w.b, &pp) == nil && pp.Head.TransactionKind == tk && pp.Head.PacketKind == pk {
			n--
			return true
		}
		return false
	}
}

// reallow has other allow main again and returns the outcome after d.
func (p *pair) reallow(d time.Duration) (error, bool) {
	r := p.otherRemote()
	res := make(chan error, 1)
	r.waiters = append(r.waiters, res)
	p.other.now = p.now
	p.other.startAllower(r, false)
	p.pump()
	p.advance(d)
	return outcome(res)
}

// Each packet of the allow, lost once, is sent again by its redo timer,
// and the allow completes; lost until the timeout, it fails with
// ErrTimeout.
func TestAllowRetransmits(t *testing.T) {
	for _, lost := range []struct {
		from string
		pk   codec.PacketKind
	}{{"other", codec.PacketKindHello}, {"main", codec.PacketKindCookie}, {"other", codec.PacketKindInitiate}, {"main", codec.PacketKindAck}} {
		t.Run(lost.from+"/"+lost.pk.String(), func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, nil)
			p.join()
			from := map[string]*Core{"main": p.main, "other": p.other}[lost.from]
			p.lose(from, codec.TransactionKindAllow, lost.pk, 1)
			if err, ok := p.reallow(2 * time.Second); !ok || err != nil {
				t.Fatalf("allow: %v (%v)", err, ok)
			}
			if p.from(from).Counters().Retransmits == 0 {
				t.Fatal("nothing was sent again")
			}
			p.advance(5 * time.Second) // the allowent ends too
			if n := p.mainRemote().numTxns() + p.otherRemote().numTxns(); n != 0 {
				t.Fatalf("%d transactions left", n)
			}
			if err := p.send(p.other, map[string]any{"n": 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	p.lose(p.main, codec.TransactionKindAllow, codec.PacketKindCookie, 1000)
	if err, ok := p.reallow(5 * time.Second); !ok || !errors.Is(err, ErrTimeout) {
		t.Fatalf("allow with every cookie lost: %v (%v)", err, ok)
	}
}

func (p *pair) from(c *Core) *Core { return c }

// The allower's answers other than cookie and ack: a nack or refuse fails
// the allow (ErrRefused), a reject too (ErrRejected, an event), unjoined
// makes it join first.
func TestAllowerAnswers(t *testing.T) {
	for _, tc := range []struct {
		pk   codec.PacketKind
		want error
	}{{codec.PacketKindNack, ErrRefused}, {codec.PacketKindRefuse, ErrRefused}, {codec.PacketKindReject, ErrRejected}, {codec.PacketKindUnjoined, nil}} {
		t.Run(tc.pk.String(), func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, nil)
			p.join()
			p.cut = func(w wired) bool { return w.from == p.main }
			r := p.otherRemote()
			res := make(chan error, 1)
			r.waiters = append(r.waiters, res)
			p.other.startAllower(r, false)
			p.pump()
			a := r.inProcess(codec.TransactionKindAllow)
			if len(a) != 1 {
				t.Fatalf("%d allowers", len(a))
			}
			k := a[0].key()
			h := p.main.allowHead(p.mainRemote(), tc.pk, k.si, k.ti, true)
			p.cut = nil
			p.inject(p.other, forge(t, codec.HeadKindRaet, p.main.signer, h, nil), p.mainAddr)
			p.advance(100 * time.Millisecond)
			err, ok := outcome(res)
			if !ok || !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("after %v: %v (%v), want %v", tc.pk, err, ok, tc.want)
			}
			if tc.pk == codec.PacketKindReject && !p.hasEvent(p.other, EventRejected) {
				t.Fatal("no rejected event")
			}
			if tc.pk == codec.PacketKindUnjoined && p.count(p.other, codec.TransactionKindJoin, codec.PacketKindRequest) < 2 {
				t.Fatal("unjoined did not make it join")
			}
		})
	}
}

// An allowent whose allower gives up (nack, refuse, reject) ends; a reject
// of the session it just made unallows the remote. An allowent whose final
// ack is lost takes the session as up at its timeout.
func TestAllowentEnds(t *testing.T) {
	for _, pk := range []codec.PacketKind{codec.PacketKindNack, codec.PacketKindRefuse, codec.PacketKindReject} {
		t.Run(pk.String(), func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, nil)
			p.join()
			p.lose(p.other, codec.TransactionKindAllow, codec.PacketKindAck, 1000)
			p.reallow(10 * time.Millisecond)
			mr := p.mainRemote()
			a := mr.inProcess(codec.TransactionKindAllow)
			if len(a) != 1 {
				t.Fatalf("%d allowents", len(a))
			}
			k := a[0].key()
			h := p.other.allowHead(p.otherRemote(), pk, k.si, k.ti, false)
			p.inject(p.main, forge(t, codec.HeadKindRaet, p.other.signer, h, nil), p.otherAddr)
			if len(mr.inProcess(codec.TransactionKindAllow)) != 0 {
				t.Fatalf("the allowent goes on after %v", pk)
			}
			if mr.allowed != (pk != codec.PacketKindReject) {
				t.Fatalf("after %v allowed is %v", pk, mr.allowed)
			}
		})
	}
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	p.lose(p.other, codec.TransactionKindAllow, codec.PacketKindAck, 1000)
	p.reallow(5 * time.Second)
	if mr := p.mainRemote(); !mr.allowed || mr.numTxns() != 0 {
		t.Fatalf("allowed %v, %d transactions", mr.allowed, mr.numTxns())
	}
	p.cut = nil
	if err := p.send(p.main, map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
}

// A hello for a remote whose keys are not accepted (now) is answered
// unjoined; a hello that does not open is rejected; an allowent in place
// refuses another allow, and of two allows at once the lower name's
// stands.
func TestAllowentRefusals(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	p.mainRemote().joined = false
	p.reallow(100 * time.Millisecond)
	if p.count(p.main, codec.TransactionKindAllow, codec.PacketKindUnjoined) == 0 || !p.mainRemote().joined {
		t.Fatal("no unjoined answer, or no join after it")
	}

	p = newPair(t, keep.AutoAlways, nil)
	p.join()
	r := p.otherRemote()
	h := p.other.allowHead(r, codec.PacketKindHello, r.sid, 900, false)
	p.inject(p.main, forge(t, codec.HeadKindRaet, p.other.signer, h, make([]byte, 200)), p.otherAddr)
	if p.main.stats.drops[dropAllowHello] != 1 || p.count(p.main, codec.TransactionKindAllow, codec.PacketKindReject) != 1 {
		t.Fatalf("a hello that does not open: drops %v", p.main.Counters().Drops)
	}

	// Both allow at once: one allow stands, and the session is up.
	p = newPair(t, keep.AutoAlways, nil)
	p.join()
	p.cut = func(wired) bool { return true }
	mr, or := p.mainRemote(), p.otherRemote()
	p.main.startAllower(mr, false)
	p.other.startAllower(or, false)
	p.cut = nil
	p.pump()
	p.advance(3 * time.Second)
	if !mr.allowed || !or.allowed || p.count(p.main, codec.TransactionKindAllow, codec.PacketKindRefuse)+
		p.count(p.other, codec.TransactionKindAllow, codec.PacketKindRefuse) == 0 {
		t.Fatalf("simultaneous allows: allowed %v %v", mr.allowed, or.allowed)
	}
	if err := p.send(p.other, map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
}

// A session change ends our transactions of the older session: an alive
// and a join under way are aborted (the join's waiters learn why), a
// message is saved for the new session.
func TestSessionChangeAborts(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	or := p.otherRemote()
	p.cut = func(wired) bool { return true }
	p.other.startAliver(or, false)
	if len(or.inProcess(codec.TransactionKindAlive)) != 1 {
		t.Fatal("no aliver")
	}
	or.sid++ // a new session of ours, as an allow makes
	p.other.replaceStaleInitiators(or)
	p.pump()
	if or.numTxns() != 0 {
		t.Fatalf("%d transactions of the old session left", or.numTxns())
	}
	if p.count(p.other, codec.TransactionKindAlive, codec.PacketKindNack) != 1 {
		t.Fatal("the aborted alive was not nacked")
	}
	// Correspondents of an older session of the remote's end when it starts
	// a newer one.
	mr := p.mainRemote()
	m := &messengent{r: mr, si: mr.rsid, ti: 500, redo: mr.messageRedo()}
	p.main.addTxn(mr, m)
	mr.rsid++
	p.main.removeStaleCorrespondents(mr)
	p.pump()
	if mr.numTxns() != 0 || p.count(p.main, codec.TransactionKindMessage, codec.PacketKindNack) != 1 {
		t.Fatalf("%d correspondents left", mr.numTxns())
	}
}

// A rejoin with changed keys: an immutable road rejects it (the remote
// keeps its keys), a mutable one takes the new keys once the join
// completes, and the session goes on with them.
func TestRejoinWithNewKeys(t *testing.T) {
	for _, mutable := range []bool{false, true} {
		t.Run(map[bool]string{true: "mutable", false: "immutable"}[mutable], func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Mutable, o.Mutable = mutable, mutable })
			p.join()
			old := p.mainRemote().verify
			p.other.local.signing = keys.GenerateSigning()
			p.other.signer = packet.NewNaClFoot((*[32]byte)(&p.other.local.signing.Seed), nil)
			or := p.otherRemote()
			res := make(chan error, 1)
			or.waiters = append(or.waiters, res)
			or.allowed = false
			p.other.startJoiner(or, true, false)
			p.pump()
			p.advance(100 * time.Millisecond)
			err, ok := outcome(res)
			if !mutable {
				if !ok || !errors.Is(err, ErrRejected) || p.mainRemote().verify != old {
					t.Fatalf("immutable: %v (%v), keys changed %v", err, ok, p.mainRemote().verify != old)
				}
				return
			}
			if !ok || err != nil || p.mainRemote().verify == old {
				t.Fatalf("mutable: %v (%v), keys changed %v", err, ok, p.mainRemote().verify != old)
			}
			if err := p.send(p.other, map[string]any{"n": 1}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A joiner that finds its new keys rejected by the keep of a main it
// joins fails with ErrRejected and keeps the remote; one whose joinent's
// identity changed on an immutable road rejects the join.
func TestJoinerRefusesChangedJoinent(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	// main comes back under another name at the same address.
	p.restart(p.main, &estate{Config: Config{Name: "main2", Main: true, AlivePeriod: -1}, Auto: keep.AutoAlways})
	or := p.other.roster.byName["main"]
	res := make(chan error, 1)
	or.waiters = append(or.waiters, res)
	or.fuid = 0 // joins vacuously, as after a renew
	or.allowed = false
	p.other.startJoiner(or, true, true)
	p.pump()
	p.advance(100 * time.Millisecond)
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrRejected) {
		t.Fatalf("a renamed main on an immutable road: %v (%v)", err, ok)
	}
}
