package core

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
)

// What a Join waits for when its ctx ends: no answer (with the tries), or
// the joinent's operator; an address with no join is the ctx's error.
func TestJoinWaitError(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.cut = func(wired) bool { return true }
	p.other.Join(p.mainAddr, make(chan error, 1), p.now)
	p.pump()
	p.advance(1500 * time.Millisecond)
	err := p.other.JoinWaitError(p.mainAddr, context.DeadlineExceeded)
	var je *JoinError
	if !errors.As(err, &je) || je.Reason != ReasonNoAnswer || je.Tries != 2 || je.Addr != p.mainAddr ||
		!errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer from") {
		t.Fatalf("no answer: %v (%+v)", err, je)
	}
	if ReasonOf(err) != ReasonNoAnswer || ReasonOf(nil) != ReasonNone {
		t.Fatal("ReasonOf")
	}
	other := netip.MustParseAddrPort("127.0.0.9:1")
	if err := p.other.JoinWaitError(other, context.Canceled); err != context.Canceled {
		t.Fatalf("no join there: %v", err)
	}

	q := newPair(t, keep.AutoNever, nil)
	q.other.Join(q.mainAddr, make(chan error, 1), q.now)
	q.pump()
	err = q.other.JoinWaitError(q.mainAddr, context.DeadlineExceeded)
	if ReasonOf(err) != ReasonPendingTheirs || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("pended: %v", err)
	}
	if !q.hasEvent(q.main, EventPending) || q.events[q.main][0].Reason != ReasonPendingOurs {
		t.Fatalf("main's events %+v", q.events[q.main])
	}
}

// A known estate that rejoins from another address on an immutable road
// is rejected for it, and says so; the remote is kept on both sides.
func TestRejoinFromAnotherAddress(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	p.otherAddr = netip.MustParseAddrPort("127.0.0.3:7532")
	r := p.otherRemote()
	r.allowed = false
	res := make(chan error, 1)
	r.waiters = append(r.waiters, res)
	p.other.startJoiner(r, true, false)
	p.pump()
	err, ok := outcome(res)
	if !ok || ReasonOf(err) != ReasonAddressChanged || !errors.Is(err, ErrRejected) {
		t.Fatalf("moved on an immutable road: %v (%v)", err, ok)
	}
	if len(p.main.roster.remotes) != 1 || len(p.other.roster.remotes) != 1 {
		t.Fatal("a remote was forgotten")
	}
	var found bool
	for _, e := range p.events[p.main] {
		found = found || e.Kind == EventRejected && e.Reason == ReasonAddressChanged
	}
	if !found {
		t.Fatalf("main's events %+v", p.events[p.main])
	}
}

// A join request whose body kind the joinent cannot read is rejected with
// that reason.
func TestJoinBodyKindRejected(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	h := head(codec.TransactionKindJoin, codec.PacketKindRequest, 9, 0, 0, 1, false)
	h.BodyKind = codec.BodyKindZstdJSON // no serializer here
	p.inject(p.main, forge(t, codec.HeadKindRaet, nil, h, []byte("whatever")), p.otherAddr)
	if n := p.count(p.main, codec.TransactionKindJoin, codec.PacketKindReject); n != 1 {
		t.Fatalf("%d rejects", n)
	}
	if !strings.Contains(string(p.wire[len(p.wire)-1].b), ReasonBodyKind.String()) {
		t.Fatal("the reject does not say why")
	}
}

// Reasons have names both ways and words; beyond the list they are named
// by number.
func TestReasonNamesCore(t *testing.T) {
	for r := ReasonNone + 1; r < reasonCount; r++ {
		if parseReason(r.String()) != r || r.Describe() == "" {
			t.Errorf("reason %d: %q", r, r.String())
		}
	}
	if parseReason("nonsense") != ReasonNone || Reason(200).String() != "reason(200)" || Reason(200).Describe() != "reason(200)" {
		t.Fatal("beyond the list")
	}
	je := &JoinError{Err: ErrTimeout}
	if je.Error() != ErrTimeout.Error() {
		t.Fatalf("no reason: %q", je.Error())
	}
}

// Forgetting a remote ends its transactions: each sends its nack, and the
// calls waiting on a join or an allow learn that the session went away.
func TestRemoveRemoteAborts(t *testing.T) {
	for _, start := range []string{"join", "allow"} {
		p := newPair(t, keep.AutoAlways, nil)
		p.join()
		p.cut = func(wired) bool { return true }
		r := p.otherRemote()
		r.allowed = false
		res := make(chan error, 1)
		r.waiters = append(r.waiters, res)
		if start == "join" {
			p.other.startJoiner(r, false, false)
		} else {
			p.other.startAllower(r, false)
		}
		mr := p.mainRemote()
		p.cut = func(w wired) bool { return w.from == p.main }
		p.pump() // main's joinent or allowent waits for the next packet
		if r.numTxns() != 1 || mr.numTxns() != 1 {
			t.Fatalf("%s: %d and %d transactions", start, r.numTxns(), mr.numTxns())
		}
		p.other.removeRemote(r, ErrRejected)
		p.main.removeRemote(mr, ErrRejected)
		p.pump()
		if err, ok := outcome(res); !ok || !errors.Is(err, ErrSessionChanged) && !errors.Is(err, ErrRejected) {
			t.Fatalf("%s: %v (%v)", start, err, ok)
		}
		tk := map[string]codec.TransactionKind{"join": codec.TransactionKindJoin, "allow": codec.TransactionKindAllow}[start]
		if p.count(p.other, tk, codec.PacketKindNack) != 1 || p.count(p.main, tk, codec.PacketKindNack) != 1 {
			t.Fatalf("%s: nacks %d, %d", start, p.count(p.other, tk, codec.PacketKindNack), p.count(p.main, tk, codec.PacketKindNack))
		}
	}
}
