package bus_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/protocol"
	"github.com/raet-go/raet/road"
)

// hwmRig is a publisher whose sends wait behind a gate, and a subscriber
// with the given policy and a high-water mark of 5, one message in flight
// at a time: while the gate is shut the publisher holds exactly 5.
func hwmRig(t *testing.T, policy bus.Policy) (*bus.Node, *gate, *bus.Subscription) {
	net := bus.NewMemNet(0)
	ptr, err := net.Transport("pub")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptr.Close() })
	str, err := net.Transport("sub")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { str.Close() })
	g := newGate(ptr)
	g.Open()
	pub := newNode(t, g, &bus.Config{Heartbeat: -1, SendWindow: 1, Policies: allPolicies})
	sn := newNode(t, str, &bus.Config{Heartbeat: -1})
	s, err := sn.Subscribe("pub", []string{"x.*"}, &bus.SubOptions{Policy: policy, HWM: 5})
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	g.Shut()
	// The first message is taken for sending (and waits at the gate), so
	// that what follows is deterministic.
	publish(t, pub, 1)
	eventually(t, func() error {
		if st := pub.Subscribers()[0]; st.InFlight != 1 {
			return fmt.Errorf("in flight %d", st.InFlight)
		}
		return nil
	})
	return pub, g, s
}

// publish publishes message number i on x.a (odd) or x.b (even).
func publish(t *testing.T, pub *bus.Node, i int) {
	t.Helper()
	if _, err := pub.Publish(ctxT(t, 5*time.Second), bus.Pub{Subject: hwmSubject(i), Body: map[string]any{"i": i}}); err != nil {
		t.Fatal(err)
	}
}

// allPolicies lets subscribers ask any policy.
var allPolicies = []bus.Policy{bus.DropNewest, bus.Block, bus.DropOldest, bus.Cut}

func hwmSubject(i int) string { return []string{"x.b", "x.a"}[i%2] }

// dropsOf counts the subjects of messages from..to.
func dropsOf(from, to int) map[string]uint64 {
	m := map[string]uint64{}
	for i := from; i <= to; i++ {
		m[hwmSubject(i)]++
	}
	return m
}

func checkDrops(t *testing.T, pub *bus.Node, s *bus.Subscription, want map[string]uint64) {
	t.Helper()
	var pubSide map[string]uint64
	for _, st := range pub.Subscribers() {
		if st.Ended == "" || st.Ended == "cut" {
			pubSide = st.Drops
		}
	}
	if !maps.Equal(pubSide, want) {
		t.Errorf("publisher counted drops %v, want %v", pubSide, want)
	}
	eventually(t, func() error {
		if got := s.Stats().Drops; !maps.Equal(got, want) {
			return fmt.Errorf("subscriber was told of drops %v, want %v", got, want)
		}
		return nil
	})
}

func TestHWMBlock(t *testing.T) {
	pub, g, s := hwmRig(t, bus.Block)
	for i := 2; i <= 5; i++ {
		publish(t, pub, i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := pub.Publish(ctx, bus.Pub{Subject: "x.a", Body: map[string]any{"i": 6}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish at the HWM: %v, want it to wait until its deadline", err)
	}
	if st := pub.Stats().Publisher; st.Published != 5 {
		t.Fatalf("published %d, want 5", st.Published)
	}
	done := make(chan struct{})
	go func() { defer close(done); publish(t, pub, 6) }() // waits for room
	g.Open()
	<-done
	msgs, all := collect(t, s, 6, 5*time.Second)
	if len(all) != 6 {
		t.Fatalf("got %+v", all)
	}
	seqs(t, msgs, 1)
	checkDrops(t, pub, s, map[string]uint64{})
}

func TestHWMDropNewest(t *testing.T) {
	pub, g, s := hwmRig(t, bus.DropNewest)
	for i := 2; i <= 20; i++ {
		publish(t, pub, i)
	}
	g.Open()
	msgs, all := collect(t, s, 5, 5*time.Second)
	seqs(t, msgs, 1) // 1..5 kept, 6..20 dropped
	want := dropsOf(6, 20)
	checkDrops(t, pub, s, want)
	// The drops ride on the next item the publisher sent after them.
	if len(all) != 5 || !maps.Equal(msgs[1].Drops, want) {
		t.Fatalf("deliveries %+v", all)
	}
	publish(t, pub, 21)
	next, _ := collect(t, s, 1, 5*time.Second)
	if next[0].Seq != 21 {
		t.Fatalf("after the drops: %+v", next[0])
	}
}

func TestHWMDropOldest(t *testing.T) {
	pub, g, s := hwmRig(t, bus.DropOldest)
	for i := 2; i <= 20; i++ {
		publish(t, pub, i)
	}
	g.Open()
	msgs, _ := collect(t, s, 5, 5*time.Second)
	// 1 was in flight; 2..16 were dropped for the newer ones, 17..20 kept.
	if msgs[0].Seq != 1 {
		t.Fatalf("first %+v", msgs[0])
	}
	seqs(t, msgs[1:], 17)
	if !maps.Equal(msgs[1].Drops, dropsOf(2, 16)) {
		t.Fatalf("the first message after the drops carries %v, want %v", msgs[1].Drops, dropsOf(2, 16))
	}
	checkDrops(t, pub, s, dropsOf(2, 16))
}

func TestHWMCut(t *testing.T) {
	pub, g, s := hwmRig(t, bus.Cut)
	for i := 2; i <= 6; i++ { // the 6th finds 5 held: cut
		publish(t, pub, i)
	}
	publish(t, pub, 7) // goes nowhere: the subscription is gone
	g.Open()
	msgs, all := collect(t, s, 1, 5*time.Second)
	if msgs[0].Seq != 1 {
		t.Fatalf("first %+v", msgs[0])
	}
	if len(all) != 1 {
		t.Fatalf("deliveries %+v", all)
	}
	var cut bus.Delivery
	select {
	case cut = <-s.Messages():
	case <-time.After(5 * time.Second):
		t.Fatal("no cut notice")
	}
	if cut.Kind != bus.DeliveryCut || !maps.Equal(cut.Drops, dropsOf(2, 6)) {
		t.Fatalf("cut notice %+v, want drops %v", cut, dropsOf(2, 6))
	}
	if !errors.Is(s.Err(), bus.ErrCut) {
		t.Fatalf("subscription error %v", s.Err())
	}
	checkDrops(t, pub, s, dropsOf(2, 6))
	if st := pub.Stats().Publisher; st.Cuts != 1 || st.Subscriptions != 0 || st.Drops != 5 {
		t.Fatalf("publisher stats %+v", st)
	}
}

// A subscriber that never reads, flooded by a fast publisher, costs the
// publisher no more than its high-water mark (and the bounded history):
// its queue never holds more, and the heap does not grow with the flood.
func TestSlowSubscriberBoundedMemory(t *testing.T) {
	net := bus.NewMemNet(64)
	ptr, _ := net.Transport("pub")
	str, _ := net.Transport("sub")
	t.Cleanup(func() { ptr.Close(); str.Close() })
	pub := newNode(t, ptr, &bus.Config{Heartbeat: -1, HistoryLast: 100})
	sn := newNode(t, str, &bus.Config{Heartbeat: -1})
	s, err := sn.Subscribe("pub", []string{">"}, &bus.SubOptions{Policy: bus.DropOldest, HWM: 100, Buffer: 1})
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	body := strings.Repeat("x", 1024)
	ctx := ctxT(t, time.Minute)
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const n = 20000
	var before uint64
	for i := range n {
		if i == n/10 {
			before = heap()
		}
		if _, err := pub.Publish(ctx, bus.Pub{Subject: "flood", Body: map[string]any{"b": body}}); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	st := pub.Subscribers()[0]
	if st.MaxQueued > 100 {
		t.Fatalf("the publisher held %d messages for the subscriber, over its HWM of 100", st.MaxQueued)
	}
	var dropped uint64
	for _, d := range st.Drops {
		dropped += d
	}
	if dropped < n/2 {
		t.Fatalf("only %d of %d dropped: the subscriber cannot have read them", dropped, n)
	}
	// 18000 messages of 1 KiB published after the first reading: had they
	// been kept, the heap would have grown by 18 MB or more.
	if grew := int64(after) - int64(before); grew > 4<<20 {
		t.Fatalf("heap grew by %d bytes during the flood", grew)
	}
	t.Logf("held at most %d, dropped %d of %d, heap %d -> %d", st.MaxQueued, dropped, n, before, after)
}

// Over a road with 10% loss, duplication and reordering, a subscriber that
// reads nothing while 300 messages are published (its stack holds 4): for
// each policy, what it gets and what both sides count as dropped add up to
// what was published, the two sides' counts agree by subject, and what it
// gets is in order.
func TestHWMOverRoad(t *testing.T) {
	for _, pol := range []bus.Policy{bus.DropNewest, bus.DropOldest, bus.Cut} {
		t.Run(pol.String(), func(t *testing.T) {
			imp := netsim.Impairment{Loss: 0.10, Duplicate: 0.05, Reorder: 0.10, Delay: 100 * time.Microsecond, Limit: 100_000, Seed: 9}
			rs := roadNetWith(t, imp, func(c *road.Config) { c.ReceiveQueue = 4 }, "pub", "slow")
			pub := newNode(t, rs[0], &bus.Config{Heartbeat: -1})
			sn := newNode(t, rs[1], &bus.Config{Heartbeat: -1})
			s, err := sn.Subscribe("pub", []string{"x.*"}, &bus.SubOptions{Policy: pol, HWM: 10, Buffer: 1})
			if err != nil {
				t.Fatal(err)
			}
			ready(t, s)
			const n = 300
			for i := range n {
				publish(t, pub, i)
			}
			// Read until every message is either got or reported dropped
			// (or, with Cut, until the cut notice).
			var got []bus.Delivery
			cut := false
			reported := func() uint64 {
				var n uint64
				for _, d := range s.Stats().Drops {
					n += d
				}
				return n
			}
			// A guard against a hang, not a timed assertion: far beyond
			// the second it takes, so load cannot reach it.
			deadline := time.After(2 * time.Minute)
			for !cut && uint64(len(got))+reported() < n {
				select {
				case d := <-s.Messages():
					if d.Kind == bus.DeliveryMessage {
						got = append(got, d)
					}
					cut = cut || d.Kind == bus.DeliveryCut
				case <-deadline:
					t.Fatalf("got %d, told of %d drops, of %d; subscription %+v; subscriber node %+v; publisher %+v", len(got), reported(), n, s.Stats(), sn.Stats(), pub.Subscribers())
				}
			}
			subs := pub.Subscribers()
			if len(subs) != 1 {
				t.Fatalf("the publisher had %d subscriptions: %+v", len(subs), subs)
			}
			pubSide := subs[0].Drops
			subSide := s.Stats().Drops
			if !maps.Equal(pubSide, subSide) {
				t.Fatalf("drops: publisher %v, subscriber %v", pubSide, subSide)
			}
			var dropped uint64
			for _, d := range subSide {
				dropped += d
			}
			for i := 1; i < len(got); i++ {
				if got[i].Seq <= got[i-1].Seq {
					t.Fatalf("out of order: %d after %d", got[i].Seq, got[i-1].Seq)
				}
			}
			if pol == bus.Cut {
				if !cut || dropped == 0 {
					t.Fatalf("cut %v, %d dropped", cut, dropped)
				}
				// Once cut, it gets nothing more: what it got and what was
				// dropped are the messages up to the cut.
				last := uint64(0)
				if len(got) > 0 {
					last = got[len(got)-1].Seq
				}
				if uint64(len(got))+dropped < last {
					t.Fatalf("%d got + %d dropped < %d: a message went missing", len(got), dropped, last)
				}
				return
			}
			if uint64(len(got))+dropped != n || dropped == 0 {
				t.Fatalf("%d got + %d dropped != %d published", len(got), dropped, n)
			}
			// Nothing more comes but the notices of drops already counted.
			for quiet := time.After(50 * time.Millisecond); ; {
				select {
				case d := <-s.Messages():
					if d.Kind != bus.DeliveryDrops {
						t.Fatalf("unexpected delivery %+v", d)
					}
					continue
				case <-quiet:
				}
				break
			}
			t.Logf("%s: got %d, dropped %d (%v)", pol, len(got), dropped, subSide)
		})
	}
}

// heldPubs is a publisher's transport that holds its sends of published
// messages while shut, and fails the first of them with index 1 once it
// opens (as a road send that timed out under load); the rest go through.
type heldPubs struct {
	bus.Transport
	open   chan struct{}
	failed atomic.Bool
}

func (h *heldPubs) Send(ctx context.Context, to string, body any) error {
	if kind, ix := kindIndex(body); kind == protocol.BusKindPub {
		select {
		case <-h.open:
		case <-ctx.Done():
			return ctx.Err()
		}
		if ix == 1 && h.failed.CompareAndSwap(false, true) {
			return errors.New("send timed out")
		}
	}
	return h.Transport.Send(ctx, to, body)
}

// kindIndex reads the kind and stream index of an envelope being sent.
func kindIndex(body any) (protocol.BusKind, uint64) {
	var kind protocol.BusKind
	var ix uint64
	m, _ := body.(packet.OrderedMap)
	for _, kv := range m {
		switch kv.Key {
		case "ek":
			v, _ := kv.Value.(uint8)
			kind = protocol.BusKind(v)
		case "ix":
			ix, _ = kv.Value.(uint64)
		}
	}
	return kind, ix
}

// A subscription cut off while a message sent before the cut notice is
// still retrying: the message goes out all the same, so the subscriber
// gets everything up to the notice, then the notice. (The subscription
// used to end when the notice went out, which abandoned the retry and
// left the notice held behind the hole for ever.)
func TestCutWaitsForSendsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := bus.NewMemNet(0)
		var trs []*bus.MemTransport
		for _, name := range []string{"pub", "sub"} {
			tr, err := net.Transport(name)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			trs = append(trs, tr)
		}
		held := &heldPubs{Transport: trs[0], open: make(chan struct{})}
		pub := newNode(t, held, &bus.Config{Heartbeat: -1})
		sn := newNode(t, trs[1], &bus.Config{Heartbeat: -1})
		s, err := sn.Subscribe("pub", []string{"x.*"}, &bus.SubOptions{Policy: bus.Cut, HWM: 5})
		if err != nil {
			t.Fatal(err)
		}
		ready(t, s)
		for i := 1; i <= 5; i++ {
			publish(t, pub, i)
		}
		synctest.Wait()
		if st := pub.Subscribers()[0]; st.InFlight != 5 {
			t.Fatalf("in flight %d, want 5", st.InFlight)
		}
		publish(t, pub, 6) // beyond the HWM: the cut notice goes out
		synctest.Wait()
		if st := pub.Subscribers(); len(st) != 1 || !st[0].Cut {
			t.Fatalf("not cut: %+v", st)
		}
		close(held.open) // message 1 fails once and is sent again
		var got []uint64
		for {
			select {
			case d := <-s.Messages():
				switch d.Kind {
				case bus.DeliveryMessage:
					got = append(got, d.Seq)
					continue
				case bus.DeliveryCut:
				default:
					t.Fatalf("unexpected delivery %+v", d)
				}
			case <-time.After(time.Minute): // in the bubble: only when nothing else can move
				t.Fatalf("no cut notice; got %v", got)
			}
			break
		}
		if !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
			t.Fatalf("got %v before the cut, want 1..5", got)
		}
		if d := s.Stats().Drops; !maps.Equal(d, dropsOf(6, 6)) {
			t.Fatalf("drops %v, want %v", d, dropsOf(6, 6))
		}
		synctest.Wait() // the publisher's senders are done
		if st := pub.Subscribers()[0]; st.Ended != "cut" || st.InFlight != 0 {
			t.Fatalf("publisher side %+v", st)
		}
	})
}
