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
		sa, err := a.Subscribe("pub", []string{"x.>"}, &bus.SubOptions{Policy: bus.Block, HWM: 4})
		if err != nil {
			t.Fatal(err)
		}
		sb, err := b.Subscribe("pub", []string{"x.>"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-sa.Ready()
		<-sb.Ready()
		if got := pub.Stats().Publisher.Subscriptions; got != 2 {
			t.Fatalf("%d subscriptions", got)
		}
		a.Close()
		synctest.Wait()
		if got := pub.Stats().Publisher.Subscriptions; got != 1 {
			t.Fatalf("%d subscriptions after the subscriber closed, want 1", got)
		}
		if ev := released(t, pub, "a"); ev.Reason != "unsubscribed" || ev.Subscription == 0 {
			t.Fatalf("release %+v", ev)
		}
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
		sk, err := k.Subscribe("pub", []string{"x.>"}, &bus.SubOptions{Policy: bus.Block, HWM: 4})
		if err != nil {
			t.Fatal(err)
		}
		so, err := ok.Subscribe("pub", []string{"x.>"}, &bus.SubOptions{Policy: bus.DropNewest, HWM: 1000})
		if err != nil {
			t.Fatal(err)
		}
		<-sk.Ready()
		<-so.Ready()
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
		msgs := <-got
		if len(msgs) != 200 {
			t.Fatalf("the other subscriber got %d of 200", len(msgs))
		}
		seqs(t, msgs, 1)
		if ev := released(t, pub, "killed"); ev.Reason != "silent" {
			t.Fatalf("release %+v", ev)
		}
		st := pub.Subscribers()
		if len(st) != 2 || st[1].Peer != "killed" || st[1].Ended != "silent" {
			t.Fatalf("subscribers %+v", st)
		}
	})
}

// drain reads n messages of s, or fewer when the synctest bubble stays idle
// an hour first.
func drain(s *bus.Subscription, n int) []bus.Delivery {
	var msgs []bus.Delivery
	for len(msgs) < n {
		select {
		case d := <-s.Messages():
			if d.Kind == bus.DeliveryMessage {
				msgs = append(msgs, d)
			}
		case <-time.After(time.Hour):
			return msgs
		}
	}
	return msgs
}

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
		s, err := g.Subscribe("pub", []string{">"}, &bus.SubOptions{Policy: bus.Block, HWM: 100_000_000, Buffer: 1})
		if err != nil {
			t.Fatal(err)
		}
		<-s.Ready()
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
		ss, err := slow.Subscribe("pub", []string{">"}, &bus.SubOptions{Policy: bus.Block, HWM: 4, Buffer: 1})
		if err != nil {
			t.Fatal(err)
		}
		sf, err := fast.Subscribe("pub", []string{">"}, &bus.SubOptions{Policy: bus.Block, HWM: 4})
		if err != nil {
			t.Fatal(err)
		}
		<-ss.Ready()
		<-sf.Ready()
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
		msgs := <-got
		if len(msgs) != 100 {
			t.Fatalf("the fast subscriber got %d of 100", len(msgs))
		}
		seqs(t, msgs, 1)
		if ev := released(t, pub, "slow"); ev.Reason != "slow" {
			t.Fatalf("release %+v", ev)
		}
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
