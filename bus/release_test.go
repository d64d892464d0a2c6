package bus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/bus"
)

// mute is a transport that can be killed: from then on it sends nothing
// (what it is asked to send is lost), as a process killed with SIGKILL.
type mute struct {
	bus.Transport
	dead atomic.Bool
}

func (m *mute) Send(ctx context.Context, to string, body any) error {
	if m.dead.Load() {
		return nil
	}
	return m.Transport.Send(ctx, to, body)
}

// memNodes makes a MemNet whose peers queue up to queue messages, and a node
// on it for each name with cfg (nil: the defaults), closed at cleanup; the
// transports are mute ones, to kill.
func memNodes(t *testing.T, queue int, cfg func(name string) *bus.Config, names ...string) ([]*bus.Node, []*mute) {
	t.Helper()
	net := bus.NewMemNet(queue)
	var ns []*bus.Node
	var ms []*mute
	for _, name := range names {
		tr, err := net.Transport(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		m := &mute{Transport: tr}
		var c *bus.Config
		if cfg != nil {
			c = cfg(name)
		}
		ns = append(ns, newNode(t, m, c))
		ms = append(ms, m)
	}
	return ns, ms
}

// subscribed subscribes n to "pub" with filter and opt and waits until the
// publisher has confirmed it.
func subscribed(t *testing.T, n *bus.Node, filter string, opt *bus.SubOptions) *bus.Subscription {
	t.Helper()
	s, err := n.Subscribe("pub", []string{filter}, opt)
	if err != nil {
		t.Fatal(err)
	}
	<-s.Ready()
	return s
}

// released returns the first PeerReleased event of n for peer, or fails.
func released(t *testing.T, n *bus.Node, peer string) bus.PeerEvent {
	t.Helper()
	for {
		select {
		case ev := <-n.PeerEvents():
			if ev.State == bus.PeerReleased && ev.Peer == peer {
				return ev
			}
		default:
			t.Fatalf("%s: no release of %s's subscription", n.Name(), peer)
		}
	}
}

// Node.Close ends the node's subscriptions at their publishers: the
// publisher releases them at once, with the reason, and its Block
// subscription no longer holds Publish.
func TestNodeCloseUnsubscribes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns, _ := memNodes(t, 0, func(string) *bus.Config { return &bus.Config{Policies: []bus.Policy{bus.Block}} }, "pub", "a", "b")
		pub, a, b := ns[0], ns[1], ns[2]
		subscribed(t, a, "x.>", &bus.SubOptions{Policy: bus.Block, HWM: 4})
		sb := subscribed(t, b, "x.>", nil)
		if got := pub.Stats().Publisher.Subscriptions; got != 2 {
			t.Fatalf("%d subscriptions", got)
		}
		a.Close()
		synctest.Wait()
		if got := pub.Stats().Publisher.Subscriptions; got != 1 {
			t.Fatalf("%d subscriptions after the subscriber closed, want 1", got)
		}
		releasedFor(t, pub, "a", "unsubscribed")
		for i := range 50 { // beyond a's HWM: nothing holds them
			if _, err := pub.Publish(t.Context(), bus.Pub{Subject: "x.y", Body: i}); err != nil {
				t.Fatal(err)
			}
		}
		msgs, _ := collectSynced(t, sb, 50)
		seqs(t, msgs, 1)
	})
}

// A subscriber killed without a word (SIGKILL: it sends nothing more) is
// released within Config.ReleaseSilent of its last word: a Publish it held
// with its Block subscription goes on, and the other subscriber gets every
// message.
func TestSilentSubscriberReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const release = 3 * time.Second
		cfg := func(string) *bus.Config {
			return &bus.Config{Heartbeat: 500 * time.Millisecond, ReleaseSilent: release, Policies: []bus.Policy{bus.Block, bus.DropNewest},
				BlockTimeout: time.Hour}
		}
		ns, ms := memNodes(t, 8, cfg, "pub", "killed", "ok")
		pub, k, ok := ns[0], ns[1], ns[2]
		subscribed(t, k, "x.>", &bus.SubOptions{Policy: bus.Block, HWM: 4})
		so := subscribed(t, ok, "x.>", &bus.SubOptions{Policy: bus.DropNewest, HWM: 1000})
		ms[1].dead.Store(true)
		k.Close() // its unsubscription is lost with the rest
		killed := time.Now()
		got := make(chan []bus.Delivery, 1)
		go func() { got <- drain(so, 200) }()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		for i := range 200 {
			if _, err := pub.Publish(ctx, bus.Pub{Subject: "x.y", Body: i}); err != nil {
				t.Fatalf("publish %d: %v (%s after the kill)", i, err, time.Since(killed))
			}
		}
		if d := time.Since(killed); d > release+time.Second {
			t.Fatalf("the publisher was held %s, more than its release bound %s and a heartbeat", d, release)
		}
		gotAll(t, <-got, 200)
		releasedFor(t, pub, "killed", "silent")
		st := pub.Subscribers()
		if len(st) != 2 || st[1].Peer != "killed" || st[1].Ended != "silent" {
			t.Fatalf("subscribers %+v", st)
		}
	})
}

// gotAll checks that msgs are the messages 1..n, in order.
func gotAll(t *testing.T, msgs []bus.Delivery, n int) {
	t.Helper()
	if len(msgs) != n {
		t.Fatalf("the other subscriber got %d of %d", len(msgs), n)
	}
	seqs(t, msgs, 1)
}

// releasedFor checks that n released a subscription of peer, for why.
func releasedFor(t *testing.T, n *bus.Node, peer, why string) {
	t.Helper()
	if ev := released(t, n, peer); ev.Reason != why || ev.Subscription == 0 {
		t.Fatalf("release %+v, want one for %q", ev, why)
	}
}

// drain reads n messages of s, or fewer when the synctest bubble stays idle
// an hour first.
func drain(s *bus.Subscription, n int) []bus.Delivery { return drainIdle(s, n, time.Hour) }

// collectSynced reads n messages of s in a synctest bubble, failing when
// the bubble is idle before they came.
func collectSynced(t *testing.T, s *bus.Subscription, n int) (msgs, all []bus.Delivery) {
	t.Helper()
	for len(msgs) < n {
		select {
		case d := <-s.Messages():
			all = append(all, d)
			if d.Kind == bus.DeliveryMessage {
				msgs = append(msgs, d)
			}
		case <-time.After(time.Hour):
			t.Fatalf("got %d of %d messages", len(msgs), n)
		}
	}
	return msgs, all
}

// The publisher sets the limits: a subscriber asking Block with a huge HWM
// of a publisher with the defaults gets the publisher's default policy and
// at most its MaxHWM, and Publish never waits for it.
func TestPublisherSetsTheLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns, _ := memNodes(t, 8, func(name string) *bus.Config {
			if name == "pub" {
				return &bus.Config{MaxHWM: 5}
			}
			return nil
		}, "pub", "greedy")
		pub, g := ns[0], ns[1]
		subscribed(t, g, ">", &bus.SubOptions{Policy: bus.Block, HWM: 100_000_000, Buffer: 1})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		for i := range 100 { // the subscriber reads none
			if _, err := pub.Publish(ctx, bus.Pub{Subject: "x", Body: i}); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		st := pub.Subscribers()[0]
		if st.Policy != bus.DropNewest || st.HWM != 5 || st.MaxQueued > 5 {
			t.Fatalf("the subscriber's wishes passed the publisher's limits: %+v", st)
		}
		if _, err := bus.New(nil, &bus.Config{Policies: []bus.Policy{9}}); err == nil {
			t.Fatal("an unknown policy in Config.Policies was taken")
		}
	})
}

// A Block subscription that holds Publish longer than the publisher's
// BlockTimeout is cut off, with the reason, and the other subscriptions go
// on with every message.
func TestBlockTimeoutCutsTheSlowOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = time.Second
		ns, _ := memNodes(t, 8, func(name string) *bus.Config {
			return &bus.Config{Policies: []bus.Policy{bus.Block}, BlockTimeout: bound}
		}, "pub", "slow", "fast")
		pub, slow, fast := ns[0], ns[1], ns[2]
		ss := subscribed(t, slow, ">", &bus.SubOptions{Policy: bus.Block, HWM: 4, Buffer: 1})
		sf := subscribed(t, fast, ">", &bus.SubOptions{Policy: bus.Block, HWM: 4})
		got := make(chan []bus.Delivery, 1)
		go func() { got <- drain(sf, 100) }()
		start := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		for i := range 100 {
			if _, err := pub.Publish(ctx, bus.Pub{Subject: "x", Body: i}); err != nil {
				t.Fatalf("publish %d: %v", i, err)
			}
		}
		if d := time.Since(start); d < bound || d > bound+time.Second {
			t.Fatalf("Publish was held %s in all, want the BlockTimeout %s once", d, bound)
		}
		gotAll(t, <-got, 100)
		releasedFor(t, pub, "slow", "slow")
		var last bus.Delivery
		for d := range ss.Messages() {
			if last = d; d.Kind == bus.DeliveryCut {
				break
			}
		}
		if !errors.Is(ss.Err(), bus.ErrCut) || last.Kind != bus.DeliveryCut {
			t.Fatalf("the slow subscriber ended with %v, last %+v", ss.Err(), last)
		}
	})
}

// Position counts the messages the application took from Messages, not
// those still buffered: resuming from it after the subscriber dies loses
// none of them (ExampleSubscription_Position resumes).
func TestPositionCountsWhatWasTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns, _ := memNodes(t, 0, nil, "pub", "sub")
		pub, sn := ns[0], ns[1]
		s := subscribed(t, sn, ">", nil)
		publishN(t, pub, "x", 0, 10)
		synctest.Wait() // all ten are buffered at the subscriber
		if st := s.Stats(); st.Messages != 10 {
			t.Fatalf("%d messages buffered", st.Messages)
		}
		for range 3 {
			<-s.Messages()
		}
		epoch, seq := s.Position()
		if seq != 3 || epoch == 0 {
			t.Fatalf("position (%d, %d) after taking 3 of 10 buffered messages, want seq 3", epoch, seq)
		}
		<-s.Messages()
		if _, seq := s.Position(); seq != 4 {
			t.Fatalf("position seq %d after taking 4, want 4", seq)
		}
	})
}
