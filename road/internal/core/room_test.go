package core

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/packet"
)

// On the fake clock, a sender keeps far more segmented messages in flight
// than the receiver has reassembly room for (1024 Sends of 16 KiB, 12
// segments each, against 32 messages of room per remote, and against 4),
// over a link that loses, duplicates and reorders: every message is
// delivered exactly once and none is rejected or times out. The sender's
// window holds back what the receiver has no room for (sendwin.go); what
// the receiver still refuses (a smaller room than the sender assumes) is
// sent again, never nacked; a message whose done was lost and that is sent
// again finds its id used, not too old (replay.go).
func TestReassemblyRoomNeverRejects(t *testing.T) {
	// More than the replay window's ids (replayIDs): before the send
	// window, messages starved of room were nacked as too old.
	n := 12000
	switch {
	case raceEnabled:
		n = 1000
	case testing.Short():
		n = 3000
	}
	for _, tc := range []struct {
		name string
		room int // the receiver's messages per remote; 0: the default
		loss float64
	}{{"room32", 0, 0.02}, {"room4", 4, 0.02}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) {
				aeadProfile.set(m, o)
				m.Reassembly.MaxPerRemote = tc.room
				m.MessageTimeout, o.MessageTimeout = 10*time.Minute, 10*time.Minute
			})
			p.join()
			p.impair(t, netsim.Impairment{Loss: tc.loss, Duplicate: 0.02, Reorder: 0.10,
				Delay: 200 * time.Microsecond, Jitter: 100 * time.Microsecond, Seed: 7})
			data := strings.Repeat("d", 16<<10)
			to := p.otherRemote().name
			results := make([]chan error, n)
			failed, finished, next := 0, 0, 0
			startAt := make([]time.Time, n)
			var worst time.Duration
			done := make([]bool, n)
			end := p.now.Add(10 * time.Minute)
			for finished < n && p.now.Before(end) {
				for next < n && next-finished < 1024 {
					b, err := p.other.marshal(map[string]any{"id": next, "data": data})
					if err != nil {
						t.Fatal(err)
					}
					results[next] = make(chan error, 1)
					p.other.Send(to, b, p.other.cfg.BodyKind, MsgID{}, results[next], p.now, p.now)
					startAt[next] = p.now
					next++
				}
				p.pump()
				p.advance(time.Millisecond)
				for i := range next {
					if done[i] {
						continue
					}
					if err, ok := outcome(results[i]); ok {
						done[i] = true
						finished++
						worst = max(worst, p.now.Sub(startAt[i]))
						if err != nil {
							failed++
							if failed <= 5 {
								t.Errorf("send %d: %v", i, err)
							}
							if !errors.Is(err, ErrRejected) && !errors.Is(err, ErrTimeout) {
								t.Fatalf("send %d: %v", i, err)
							}
						}
					}
				}
			}
			if finished < n {
				t.Fatalf("%d of %d sends finished in 10 min of the fake clock", finished, n)
			}
			p.advance(2 * time.Second) // late duplicates and retransmissions
			got := make([]int, n)
			for _, m := range p.delivered[p.main] {
				var id int
				fmt.Sscan(fmt.Sprint(m.Body["id"]), &id)
				got[id]++
			}
			wrong := 0
			for i, k := range got {
				if k != 1 {
					wrong++
					if wrong <= 5 {
						t.Errorf("message %d delivered %d times", i, k)
					}
				}
			}
			c := p.main.Counters()
			t.Logf("sender: %d retransmissions, packets out %v", p.other.Counters().Retransmits, p.other.Counters().PacketsOut)
			t.Logf("%d sent in %v of the fake clock (the slowest Send %v), %d failed, %d not delivered once; receiver drops %v",
				n, p.now.Sub(end.Add(-10*time.Minute)), worst, failed, wrong, c.Drops)
			if failed > 0 || wrong > 0 {
				t.Fatalf("%d of %d rejected or timed out, %d not delivered exactly once", failed, n, wrong)
			}
		})
	}
}

// A message whose stored segments were evicted asks for its first
// segments again when its timer runs; it does not ack the highest it saw,
// which would tell the sender that all came.
func TestEvictedMessageAsksAgain(t *testing.T) {
	p := joinedPair(t, macProfile)
	passed := 0 // of other's message packets, only the first with wf passes
	p.cut = func(w wired) bool {
		var pk packet.Packet
		if w.from != p.other || packet.Parse(w.b, &pk) != nil || pk.Head.TransactionKind != codec.TransactionKindMessage {
			return false
		}
		if pk.Head.Wait() && passed == 0 {
			passed++
			return false
		}
		return true
	}
	b, err := p.other.marshal(map[string]any{"data": strings.Repeat("e", 5000)})
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	p.other.Send(p.otherRemote().name, b, p.other.cfg.BodyKind, MsgID{}, res, p.now, p.now)
	p.pump()
	if passed != 1 || p.main.reasm.Pending() != 1 {
		t.Fatalf("%d segments passed, %d messages held", passed, p.main.reasm.Pending())
	}
	for tx := range p.mainRemote().eachTxn {
		if m, ok := tx.(*messengent); ok {
			p.main.reasm.Drop(m.msgKey()) // as an eviction does
		}
	}
	from := len(p.wire)
	p.advance(2 * maxMessageRedo)
	kinds := map[codec.PacketKind]int{}
	for _, w := range p.wire[from:] {
		var pk packet.Packet
		if w.from == p.main && packet.Parse(w.b, &pk) == nil && pk.Head.TransactionKind == codec.TransactionKindMessage {
			kinds[pk.Head.PacketKind]++
		}
	}
	if kinds[codec.PacketKindResend] == 0 || kinds[codec.PacketKindAck] != 0 {
		t.Fatalf("after the eviction main sent %v, want resends and no ack", kinds)
	}
}

// A message delivered whose done was lost, sent again while the reply
// budget is spent: in an AEAD session the repeat opened under a new
// counter, so it is no replay and its done goes at once; in a session
// whose packets may be replayed (the MAC foot) the budget holds it back
// (the sender asks again later).
func TestLostDoneAnsweredBeyondTheBudget(t *testing.T) {
	for _, tc := range []struct {
		tp     testProfile
		budget bool // the repeat meets the budget
	}{{aeadProfile, false}, {macProfile, true}} {
		t.Run(tc.tp.name, func(t *testing.T) {
			p := joinedPair(t, tc.tp)
			p.cut = func(w wired) bool { return w.from == p.main } // the done is lost
			res := p.start(p.other, map[string]any{"data": "once"}, MsgID{})
			p.pump()
			if len(p.delivered[p.main]) != 1 {
				t.Fatalf("%d delivered", len(p.delivered[p.main]))
			}
			p.cut = nil
			p.mainRemote().replies = bucket{at: p.now.Add(time.Hour).UnixNano()} // spent, not refilling
			budget := p.main.stats.drops[dropReplyBudget]
			p.advance(firstMessageRedo + firstMessageRedo/2) // one repeat (the first message's timer)
			err, ok := outcome(res)
			spent := p.main.stats.drops[dropReplyBudget] > budget
			if spent != tc.budget || ok == tc.budget || (ok && err != nil) {
				t.Fatalf("after one repeat: outcome %v (%v), the budget refused it: %v", err, ok, spent)
			}
			if len(p.delivered[p.main]) != 1 {
				t.Fatalf("%d delivered", len(p.delivered[p.main]))
			}
		})
	}
}

// At its quota, a remote's oldest message refused for room gets the next
// slot that frees: a newer message's first segment waits for it, though it
// came first.
func TestStarvedMessageGetsTheFreedSlot(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { macProfile.set(m, o); m.Reassembly.MaxPerRemote = 2 })
	p.join()
	a, b, c, d := p.segmentsFrom(5000), p.segmentsFrom(5000), p.segmentsFrom(5000), p.segmentsFrom(5000)
	held := func() int { n, _ := p.main.reasm.Owner(p.mainRemote().nuid); return n }
	p.inject(p.main, b[0], p.otherAddr)
	p.inject(p.main, c[0], p.otherAddr)
	p.inject(p.main, a[0], p.otherAddr) // no room: a, the oldest, is refused
	if held() != 2 || p.mainRemote().starved == nil {
		t.Fatalf("%d held, starved %v", held(), p.mainRemote().starved)
	}
	for _, s := range b[1:] { // b completes: a slot frees
		p.inject(p.main, s, p.otherAddr)
	}
	if held() != 1 || len(p.delivered[p.main]) != 1 {
		t.Fatalf("b: %d held, %d delivered", held(), len(p.delivered[p.main]))
	}
	p.inject(p.main, d[0], p.otherAddr) // newer than a: waits
	if held() != 1 {
		t.Fatalf("d took the slot kept for a: %d held", held())
	}
	p.inject(p.main, a[0], p.otherAddr) // a, sent again, has it
	if held() != 2 || p.mainRemote().starved != nil {
		t.Fatalf("a: %d held, starved %v", held(), p.mainRemote().starved)
	}
	for _, s := range a[1:] {
		p.inject(p.main, s, p.otherAddr)
	}
	p.inject(p.main, d[0], p.otherAddr) // and then d goes
	if held() != 2 || len(p.delivered[p.main]) != 2 {
		t.Fatalf("after a: %d held, %d delivered", held(), len(p.delivered[p.main]))
	}
}

// A message the receiver refused (here: its reassembly timed out) and whose
// nack was lost is refused again when its sender repeats it, never answered
// done: done would tell the sender it was delivered.
func TestRefusedRepeatIsRefusedAgain(t *testing.T) {
	for _, tp := range profiles {
		t.Run(tp.name, func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) {
				tp.set(m, o)
				m.MessageTimeout = 2 * time.Second // the receiver gives up first
			})
			p.join()
			passed := 0
			p.cut = func(w wired) bool { // the first segment only; the nack is lost
				if w.from == p.other && passed == 0 {
					passed++
					return false
				}
				return true
			}
			res := p.start(p.other, map[string]any{"data": strings.Repeat("x", 5000)}, MsgID{})
			p.pump()
			p.advance(3 * time.Second) // the main nacks, unheard
			if passed != 1 || p.main.stats.c.MessagesIn != 0 {
				t.Fatalf("%d packets passed, %d delivered", passed, p.main.stats.c.MessagesIn)
			}
			if err, ok := outcome(res); ok {
				t.Fatalf("the sender knows already: %v", err)
			}
			p.cut = nil
			p.advance(10 * time.Second) // the sender repeats
			err, ok := outcome(res)
			if !ok || !errors.Is(err, ErrRejected) {
				t.Fatalf("outcome %v (%v), want rejected", err, ok)
			}
			if n := len(p.delivered[p.main]); n != 0 {
				t.Fatalf("%d delivered", n)
			}
		})
	}
}

// A main whose allowent's final ack was lost sends what waited for the
// allow (its messages of the old session, and those sent since) at the
// remote's first packet of the new session, not at the allowent's
// timeout.
func TestLostFinalAckHeldGoOnNewSession(t *testing.T) {
	p := joinedPair(t, macProfile)
	kind := func(w wired) (codec.TransactionKind, codec.PacketKind) {
		var pp packet.Packet
		if packet.Parse(w.b, &pp) != nil {
			return 0, 0
		}
		return pp.Head.TransactionKind, pp.Head.PacketKind
	}
	p.cut = func(w wired) bool { // the main's messages, and the other's final ack of the allow
		tk, pk := kind(w)
		return w.from == p.main && tk == codec.TransactionKindMessage ||
			w.from == p.other && tk == codec.TransactionKindAllow && pk == codec.PacketKindAck
	}
	first := p.start(p.main, map[string]any{"m": "in flight"}, MsgID{}) // under way when the session changes
	p.pump()
	p.other.startAllower(p.otherRemote(), false) // a new session
	p.pump()
	p.advance(10 * time.Millisecond)
	r := p.mainRemote()
	if !r.allowed || len(r.saved) != 1 {
		t.Fatalf("allowed %v, %d held", r.allowed, len(r.saved))
	}
	second := p.start(p.main, map[string]any{"m": "since"}, MsgID{})
	p.cut = nil
	if err := p.send(p.other, map[string]any{"m": "new session"}); err != nil {
		t.Fatal(err)
	}
	p.advance(10 * time.Millisecond) // far less than AllowTimeout
	for _, res := range []chan error{first, second} {
		if err, ok := outcome(res); !ok || err != nil {
			t.Fatalf("held message: %v (%v)", err, ok)
		}
	}
	if n := len(p.delivered[p.other]); n != 2 {
		t.Fatalf("%d delivered", n)
	}
}
