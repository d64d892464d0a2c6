package core

import (
	"errors"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// A join whose completion the main never saw (its joinent timed out before
// the ack and the allow that follows arrived: a main overrun by joins), so
// that the main forgot the joiner it answered, is retried on an immutable
// road: the retry's non-vacuous join is renewed, and since the main never
// confirmed the join (no allow with it), the joiner joins afresh instead of
// failing with ReasonUnknownToRemote. Once a session was allowed, a renew
// on an immutable road still fails as before.
func TestJoinRetriedAfterMainForgot(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	lost := true
	p.cut = func(w wired) bool {
		tk, pk := kindOf(w.b)
		return lost && w.from == p.other && (tk == codec.TransactionKindJoin && pk == codec.PacketKindAck || tk == codec.TransactionKindAllow)
	}
	res := make(chan error, 4)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	if o := p.otherRemote(); o == nil || !o.joined {
		t.Fatal("the joiner did not take the main's response")
	}
	p.advance(6 * time.Second) // the main's joinent times out: it forgets the joiner
	if p.mainRemote() != nil {
		t.Fatal("the main still has the joiner whose join it never saw complete")
	}
	lost = false
	var first error
	select {
	case first = <-res:
	default:
		t.Fatal("the first join has no outcome")
	}
	if first == nil {
		t.Fatal("the first join succeeded")
	}
	p.other.Join(p.mainAddr, res, p.now) // as Stack.Join tries again
	p.pump()
	p.advance(2 * time.Second)
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("the retried join: %v (the first: %v)", err, first)
		}
	default:
		t.Fatal("the retried join has no outcome")
	}
	if r := p.mainRemote(); r == nil || !r.allowed || !p.otherRemote().allowed {
		t.Fatal("not allowed on both sides after the retry")
	}
	p.stillWorks(t, len(p.delivered[p.main]))

	// Allowed once: a renew now fails on an immutable road.
	p.main.removeRemote(p.mainRemote(), ErrRejected) // the main lost its keep
	o := p.otherRemote()
	o.allowed = false
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(time.Second)
	select {
	case err := <-res:
		if ReasonOf(err) != ReasonUnknownToRemote || !errors.Is(err, ErrRenewImmutable) {
			t.Fatalf("a renew after an allowed session: %v; want unknown-to-remote", err)
		}
	default:
		t.Fatal("no outcome of the join after the main lost its keep")
	}
}

// kindOf is the transaction and packet kind of datagram b; zeros when it
// does not parse.
func kindOf(b []byte) (codec.TransactionKind, codec.PacketKind) {
	var pp packet.Packet
	if packet.Parse(b, &pp) != nil {
		return 0, 0
	}
	return pp.Head.TransactionKind, pp.Head.PacketKind
}

// A joiner that gave up on a join whose response it never got (the main
// answered, its answer was lost or late) and joins again at once, while
// the main's joinent still waits for the ack of the old one: the new
// request replaces the old joinent instead of being refused as another
// join under way, on an immutable road too.
func TestJoinRetriedWhileMainWaitsForAck(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { o.JoinTimeout = time.Second })
	lost := true
	p.cut = func(w wired) bool {
		tk, pk := kindOf(w.b)
		return lost && w.from == p.main && tk == codec.TransactionKindJoin && pk == codec.PacketKindResponse
	}
	res := make(chan error, 4)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(1100 * time.Millisecond)
	if err := <-res; ReasonOf(err) != ReasonNoAnswer {
		t.Fatalf("the first join: %v; want no answer", err)
	}
	if len(p.main.roster.remotes) != 1 || len(p.mainRemote().inProcess(codec.TransactionKindJoin)) != 1 {
		t.Fatal("the main does not wait for the first join's ack")
	}
	lost = false
	for try := range 2 { // the first try within the old joinent's life, then once more as Stack.Join does
		p.other.Join(p.mainAddr, res, p.now)
		p.pump()
		p.advance(100 * time.Millisecond)
		err := <-res
		if err == nil {
			break
		}
		if try == 1 {
			t.Fatalf("the retried join: %v", err)
		}
		t.Logf("try %d: %v", try, err)
	}
	if r := p.mainRemote(); r == nil || !r.allowed || !p.otherRemote().allowed || p.main.kept.strangers != 0 {
		t.Fatal("not allowed on both sides after the retry")
	}
	p.stillWorks(t, len(p.delivered[p.main]))
}
