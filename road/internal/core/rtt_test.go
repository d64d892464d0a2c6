package core

import (
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/packet"
)

// The message timer follows the remote's measured answer time: RFC
// 6298's 1 s until a message's sample (the handshake's seed alone keeps
// that floor), longer for a slow remote (bounded), and down to the round
// trip and the receiver's answer delay when it speeds up, with no floor
// of its own; backed off, it reaches at least silentRedo.
func TestMessageRedoFollowsRTT(t *testing.T) {
	var r remote
	if got := r.messageRedo(); got.min != firstMessageRedo || got.max != firstMessageRedo*5/2 {
		t.Fatalf("no sample: %v..%v, want 1s..2.5s", got.min, got.max)
	}
	r.observeRTT(time.Millisecond, true) // an allow answered at once
	if got := r.messageRedo().min; got != firstMessageRedo {
		t.Fatalf("seeded by a 1 ms handshake: %v, want the floor %v until a message is timed", got, firstMessageRedo)
	}
	r.observeRTT(time.Millisecond, false) // a message's own
	if got := r.messageRedo().min; got < time.Millisecond+maxAnswerDelay || got > 4*time.Millisecond+maxAnswerDelay {
		t.Fatalf("after a 1 ms message: %v, want the sample, its variation and the answer delay", got)
	}
	r = remote{}
	for range 20 {
		r.observeRTT(400*time.Millisecond, false) // a loaded remote
	}
	slow := r.messageRedo().min
	if slow < 400*time.Millisecond || slow > time.Second {
		t.Fatalf("after 400 ms answers: %v", slow)
	}
	for range 50 {
		r.observeRTT(time.Minute, false)
	}
	if got := r.messageRedo().min; got != maxMessageRedo {
		t.Fatalf("after 1 min answers: %v, want the bound %v", got, maxMessageRedo)
	}
	for range 100 {
		r.observeRTT(time.Millisecond, false)
	}
	if got, want := r.messageRedo(), time.Millisecond+timerGranularity+maxAnswerDelay; got.min-want > 10*time.Microsecond || got.min < want || got.max != silentRedo {
		t.Fatalf("after 1 ms answers: %v..%v, want %v..%v", got.min, got.max, want, silentRedo)
	}
}

// A segmented message's timers, the sender's and the receiver's, keep
// minSegmentedRedo however short the round trip: the answer waits for the
// receiver to take in the whole burst. One that the estimate puts beyond
// it follows the estimate.
func TestSegmentedRedoFloor(t *testing.T) {
	var r remote
	for range 20 {
		r.observeRTT(time.Millisecond, false)
	}
	if one, seg := r.messageRedo(), r.segmentedRedo(); one.min >= minSegmentedRedo || seg.min != minSegmentedRedo || seg.max < one.max {
		t.Fatalf("after 1 ms answers: one packet %v..%v, segmented %v..%v", one.min, one.max, seg.min, seg.max)
	}
	for range 50 {
		r.observeRTT(time.Second, false)
	}
	if one, seg := r.messageRedo(), r.segmentedRedo(); seg != one || seg.min <= time.Second {
		t.Fatalf("after 1 s answers: one packet %v..%v, segmented %v..%v", one.min, one.max, seg.min, seg.max)
	}
}

// joinSlow has other join and allow main over a link that delays each
// datagram by oneWay, and fails the test unless both sides end allowed.
func (p *pair) joinSlow(t *testing.T, oneWay time.Duration) {
	t.Helper()
	p.impair(t, netsim.Impairment{Delay: oneWay})
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(20 * oneWay)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("join: %v (%v)", err, ok)
	}
	if !p.mainRemote().allowed || !p.otherRemote().allowed {
		t.Fatal("not allowed on both sides")
	}
}

// The allow's round trips seed both sides' estimates (the allower's from
// its initiate to the ack, the allowent's from its cookie to the initiate
// and its ack to the final ack), so that a remote's first message waits
// for its done as long as the path takes (here the 1 s floor of a remote
// no message has timed yet covers it; the seed lengthens the timer of a
// round trip beyond a third of that). The
// first message's own sample then starts the estimate afresh: messages
// that take longer than the handshake (here the link slowed down since)
// are not timed from it.
func TestAllowSeedsRTT(t *testing.T) {
	const oneWay = 120 * time.Millisecond // a round trip past the 200 ms floor, within the allow's 250 ms timer
	for _, tp := range profiles {
		t.Run(tp.name, func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, tp.set)
			p.joinSlow(t, oneWay)
			for _, r := range []*remote{p.otherRemote(), p.mainRemote()} {
				if got := time.Duration(r.srtt) * time.Microsecond; got != 2*oneWay {
					t.Fatalf("%s's estimate after the allow: %v, want the round trip %v", r.name, got, 2*oneWay)
				}
				if got := r.messageRedo().min; got <= 2*oneWay {
					t.Fatalf("%s's first message timer %v, not beyond the round trip", r.name, got)
				}
			}
			const later = 170 * time.Millisecond // still within both first timers
			p.impair(t, netsim.Impairment{Delay: later})
			for _, from := range []*Core{p.other, p.main} {
				before := from.Counters().Retransmits
				if err := p.send(from, map[string]any{"first": true}); err != errNoOutcome {
					t.Fatalf("%s's message done at once over a %v link: %v", from.local.name, oneWay, err)
				}
				p.advance(10 * oneWay)
				if got := from.Counters().Retransmits - before; got != 0 {
					t.Fatalf("%s's first message was sent again %d times, before its done could come", from.local.name, got)
				}
			}
			if got := len(p.delivered[p.main]) + len(p.delivered[p.other]); got != 2 {
				t.Fatalf("%d messages delivered, want 2", got)
			}
			for _, r := range []*remote{p.otherRemote(), p.mainRemote()} {
				if got := time.Duration(r.srtt) * time.Microsecond; got != 2*later {
					t.Fatalf("%s's estimate after its first message: %v, want that message's %v", r.name, got, 2*later)
				}
			}
		})
	}
}

// Karn's rule: an initiate sent again (its ack was lost) gives the allower
// no sample, since the ack that comes may answer either copy; so its
// estimate stays unset and its first message timer at the 1 s floor. The
// allowent's cookie, answered once, still gives it one.
func TestAllowRTTNotFromRetransmission(t *testing.T) {
	const oneWay = 120 * time.Millisecond // a round trip past the 200 ms floor, within the allow's 250 ms timer
	p := newPair(t, keep.AutoAlways, nil)
	p.lose(p.main, codec.TransactionKindAllow, codec.PacketKindAck, 1)
	p.joinSlow(t, oneWay)
	if p.other.Counters().Retransmits == 0 {
		t.Fatal("the allower sent nothing again")
	}
	if r := p.otherRemote(); r.srtt != 0 || r.messageRedo().min != firstMessageRedo {
		t.Fatalf("the allower's estimate %v µs from an initiate sent again (timer %v)", r.srtt, r.messageRedo().min)
	}
	if got := time.Duration(p.mainRemote().srtt) * time.Microsecond; got != 2*oneWay {
		t.Fatalf("the allowent's estimate %v, want its cookie's round trip %v", got, 2*oneWay)
	}
}

// A request held for the keep leaves later than it was made, so it is not
// timed: the allowent's cookie waits for the keep to hold the join, and
// the time it waited is not taken for a round trip. Its ack, not held,
// is timed.
func TestAllowRTTNotFromHeld(t *testing.T) {
	st := newHeldStore()
	p := newRig(t)
	p.main = p.newCore(&estate{Config: Config{Name: "main", Main: true, AlivePeriod: -1}, Auto: keep.AutoAlways}, st)
	p.other = p.newCore(&estate{Config: Config{Name: "other", AlivePeriod: -1}, Auto: keep.AutoAlways}, nil)
	p.main.Start(p.mainAddr, p.now)
	p.other.Start(p.otherAddr, p.now)
	st.durable(p, p.main)
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	const wait = 200 * time.Millisecond // less than the cookie's timer: it goes once
	for range 4 {
		p.advance(wait)
		st.durable(p, p.main)
	}
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("join: %v (%v)", err, ok)
	}
	if p.main.Counters().Retransmits != 0 {
		t.Fatal("the main sent something again")
	}
	r := p.mainRemote()
	if r.srtt == 0 {
		t.Fatal("the allowent's ack gave no sample")
	}
	if got := time.Duration(r.srtt) * time.Microsecond; got >= wait/2 {
		t.Fatalf("the allowent's estimate %v took in the cookie's wait for the keep", got)
	}
}

// Messages started before any of the remote's was timed wait on the 1 s
// floor; once one is timed, the others' timers take the estimate when they
// next run: a message whose dones keep being lost goes again at 1 s, then
// every 500 ms (the estimate backed off to silentRedo), not at 3 s.
func TestMessageTimerTakesTimedEstimate(t *testing.T) {
	p := joinedPair(t, refProfile)
	a := p.start(p.other, map[string]any{"n": 1}, MsgID{})
	b := p.start(p.other, map[string]any{"n": 2}, MsgID{})
	tiB := p.otherRemote().tid
	p.cut = func(w wired) bool {
		var pk packet.Packet
		return w.from == p.main && packet.Parse(w.b, &pk) == nil &&
			pk.Head.PacketKind == codec.PacketKindDone && pk.Head.TransactionID == tiB
	}
	p.pump()
	if err, ok := outcome(a); !ok || err != nil {
		t.Fatalf("the first message: %v (%v)", err, ok)
	}
	if r := p.otherRemote(); r.srtt == 0 || r.rttSeeded {
		t.Fatal("the first message's done gave no sample")
	}
	before := p.other.Counters().Retransmits
	p.advance(firstMessageRedo) // the second's first timer, on the floor it started with
	if got := p.other.Counters().Retransmits - before; got != 1 {
		t.Fatalf("%d copies at the first timer, want 1", got)
	}
	p.advance(silentRedo * 6 / 5)
	if got := p.other.Counters().Retransmits - before; got != 2 {
		t.Fatalf("%d copies 600 ms on, want 2: the timer did not take the estimate", got)
	}
	if _, ok := outcome(b); ok {
		t.Fatal("the second message ended with its dones lost")
	}
}
