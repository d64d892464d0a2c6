package bus_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/protocol"
)

// One subscription its application never reads holds up nothing else of
// its node: the node's other subscription gets every message, its service
// answers every request and its puller does every job, while the unread
// subscription's own policy applies at the publisher, its drops counted
// alike at both ends (issue 30, finding 2: on the base the node's reader
// waited for the full buffer, and everything to that node stopped).
func TestUnreadSubscriptionIsolated(t *testing.T) {
	for _, policy := range []bus.Policy{bus.DropNewest, bus.DropOldest, bus.Cut, bus.Block} {
		t.Run(policy.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// A short transport queue: on the base a stuck reader fills it at once.
				ns, _ := memNodes(t, 16, isolatedConfig, "pub", "sub")
				unreadIsolated(t, policy, ns[0], ns[1], time.Hour)
			})
		})
	}
	// Over the road, once: the road adapter hands messages to the node's
	// reader from its own goroutine.
	t.Run("road", func(t *testing.T) {
		trs := roadNet(t, netsim.Impairment{}, "pub", "sub")
		pub := newNode(t, trs[0], isolatedConfig("pub"))
		sn := newNode(t, trs[1], isolatedConfig("sub"))
		unreadIsolated(t, bus.DropNewest, pub, sn, 3*time.Second)
	})
}

func isolatedConfig(string) *bus.Config {
	return &bus.Config{Policies: allPolicies, BlockTimeout: time.Second}
}

// unreadIsolated runs the test over pub and sn, where a quiet of idle means
// nothing more is coming.
func unreadIsolated(t *testing.T, policy bus.Policy, pub, sn *bus.Node, idle time.Duration) {
	const window, hwm, total = 8, 10, 300
	unread := subscribed(t, sn, "x.>", &bus.SubOptions{Policy: policy, HWM: hwm, Buffer: window})
	read := subscribed(t, sn, "x.>", &bus.SubOptions{Policy: bus.DropNewest, HWM: total})
	if _, err := sn.Serve("ask.>", echo("sub"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sn.Pull([]string{"pub"}, 4, func(_ context.Context, j *bus.Job) (any, error) { return j.Body, nil }); err != nil {
		t.Fatal(err)
	}
	waitPullers(t, pub, 1)
	got := make(chan []bus.Delivery, 1)
	go func() { got <- drainIdle(read, total, idle) }()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	jobs := 0
	for i := 1; i <= total; i++ {
		if _, err := pub.Publish(ctx, bus.Pub{Subject: hwmSubject(i), Body: i}); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i%10 == 0 {
			rep, err := pub.Request(ctx, "sub", "ask.x", i)
			if err != nil {
				t.Fatalf("request after message %d: %v", i, err)
			}
			if fmt.Sprint(rep.Body.(map[string]any)["echo"]) != fmt.Sprint(i) {
				t.Fatalf("reply %+v", rep)
			}
			if _, err := pub.Push(ctx, "job.x", i); err != nil {
				t.Fatal(err)
			}
			jobs++
		}
	}
	gotAll(t, <-got, total)
	for range jobs {
		select {
		case r := <-pub.Results():
			if r.Err != "" {
				t.Fatalf("job %+v", r)
			}
		case <-time.After(idle):
			t.Fatalf("jobs not done")
		}
	}

	// The unread subscription, read at last: every message is delivered or
	// reported dropped, as the publisher counted.
	var atPub bus.SubscriberStats
	for _, st := range pub.Subscribers() {
		if st.HWM == hwm {
			atPub = st
		}
	}
	var msgs, drops uint64
	var last bus.Delivery
	for stop := false; !stop; {
		select {
		case d := <-unread.Messages():
			last = d
			if d.Kind == bus.DeliveryMessage {
				msgs++
			}
			for _, n := range d.Drops {
				drops += n
			}
			stop = d.Kind == bus.DeliveryCut || (policy != bus.Cut && policy != bus.Block && msgs+drops == total)
		case <-time.After(idle):
			stop = true
		}
	}
	var dropped uint64
	for _, n := range atPub.Drops {
		dropped += n
	}
	if dropped == 0 || drops != dropped || !maps.Equal(unread.Stats().Drops, atPub.Drops) {
		t.Fatalf("%v: the subscriber was told of %d drops (%v), the publisher dropped %d (%v)", policy, drops, unread.Stats().Drops, dropped, atPub.Drops)
	}
	switch policy {
	case bus.DropNewest, bus.DropOldest:
		if msgs+drops != total || atPub.Cut {
			t.Fatalf("%v: %d messages and %d drops of %d published", policy, msgs, drops, total)
		}
		if atPub.MaxQueued > hwm {
			t.Fatalf("%v: the publisher held %d for it, over its HWM %d", policy, atPub.MaxQueued, hwm)
		}
	default: // Cut, and Block cut as slow
		if last.Kind != bus.DeliveryCut || !errors.Is(unread.Err(), bus.ErrCut) || !atPub.Cut {
			t.Fatalf("%v: last delivery %+v, err %v, publisher %+v", policy, last, unread.Err(), atPub)
		}
		if msgs+drops > total {
			t.Fatalf("%v: %d messages and %d drops of %d published", policy, msgs, drops, total)
		}
	}
}

// drainIdle reads n messages of s, or fewer when nothing comes for idle.
func drainIdle(s *bus.Subscription, n int, idle time.Duration) []bus.Delivery {
	var msgs []bus.Delivery
	for len(msgs) < n {
		select {
		case d := <-s.Messages():
			if d.Kind == bus.DeliveryMessage {
				msgs = append(msgs, d)
			}
		case <-time.After(idle):
			return msgs
		}
	}
	return msgs
}

// waitPullers waits until pusher sees n pullers with credit.
func waitPullers(t *testing.T, pusher *bus.Node, n int) {
	t.Helper()
	eventually(t, func() error {
		if got := pusher.Stats().Pusher.Pullers; got < n {
			return fmt.Errorf("%d pullers", got)
		}
		return nil
	})
}

// dropAcks is a transport that loses the first n acknowledgements it is
// asked to send, as a full control queue would.
type dropAcks struct {
	bus.Transport
	n atomic.Int64
}

func (d *dropAcks) Send(ctx context.Context, to string, body any) error {
	if kind, _ := kindIndex(body); kind == protocol.BusKindAck && d.n.Add(-1) >= 0 {
		return nil
	}
	return d.Transport.Send(ctx, to, body)
}

// A lost acknowledgement stalls a subscription for a heartbeat at most: the
// subscriber repeats its last one there, and the publisher, which had
// filled the window, sends on.
func TestLostAckRepeated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trs := memTransports(t, bus.NewMemNet(0), "pub", "sub")
		pub := newNode(t, trs[0], nil)
		lossy := &dropAcks{Transport: trs[1]}
		lossy.n.Store(1 << 20) // every ack, until the publisher stalls
		sn := newNode(t, lossy, nil)
		s := subscribed(t, sn, "x.>", &bus.SubOptions{HWM: 100, Buffer: 4})
		publishN(t, pub, "x.y", 1, 50)
		msgs, _ := collectSynced(t, s, 4) // the window; no ack reaches the publisher
		synctest.Wait()
		if st := pub.Subscribers()[0]; st.Sent != 4 || st.Queued != 46 || st.Window != 4 || st.Unacked != 4 {
			t.Fatalf("with every ack lost: %+v, want 4 sent, unacknowledged, and 46 queued", st)
		}
		lossy.n.Store(0)
		more, _ := collectSynced(t, s, 46) // within a heartbeat or so
		seqs(t, append(msgs, more...), 1)
	})
}
