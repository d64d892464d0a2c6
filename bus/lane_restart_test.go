package bus_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
)

// laneBeat is the heartbeat of the lane restart tests: short, so that a
// downtime of many heartbeats stays short in wall-clock time.
const laneBeat = 20 * time.Millisecond

// downLong waits until n no longer sees peer up (its heartbeats found the
// yard's socket gone), then for several heartbeats more: the peer is down
// far longer than a heartbeat, as a yard restarted by a supervisor is.
func downLong(t *testing.T, n *bus.Node, peer string) {
	t.Helper()
	eventually(t, func() error {
		if n.Peers()[peer] {
			return fmt.Errorf("%s still sees %s up", n.Name(), peer)
		}
		return nil
	})
	time.Sleep(10 * laneBeat)
}

// laneRun starts a node over a new yard name in dir; stop closes the
// node, the adapter and the yard (its socket goes).
func laneRun(t *testing.T, dir, name string, cfg *bus.Config) (n *bus.Node, stop func()) {
	t.Helper()
	l, s := laneYard(t, dir, name)
	n = newNode(t, l, cfg)
	return n, func() { n.Close(); l.Close(); s.Close() }
}

// subscriptionsAt waits until publisher pub serves n subscriptions.
func subscriptionsAt(t *testing.T, pub *bus.Node, n int) {
	t.Helper()
	eventually(t, func() error {
		if got := pub.Stats().Publisher.Subscriptions; got != n {
			return fmt.Errorf("%d subscriptions at %s, want %d", got, pub.Name(), n)
		}
		return nil
	})
}

// A publisher yard down for many heartbeats (its socket gone) and
// restarted under the same name gets its subscriber back, which receives
// every message after: with a durable history it resumes after the last
// message it had (replayed), with no report; with the in-memory one (the
// new run counts from 1 again) it is told of the gap first, never a
// silent loss.
func TestLanePublisherDownLongGetsSubscribersBack(t *testing.T) {
	for _, durable := range []bool{true, false} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			dir := laneDir(t)
			path := filepath.Join(t.TempDir(), "h.db")
			cfg := func() *bus.Config {
				c := &bus.Config{Heartbeat: laneBeat}
				if durable {
					h, err := bus.NewBoltHistory(path, 1000, 0)
					if err != nil {
						t.Fatal(err)
					}
					c.History = h
				}
				return c
			}
			pub, stop := laneRun(t, dir, "lpub", cfg())
			sn, _ := laneRun(t, dir, "lsub", &bus.Config{Heartbeat: laneBeat})
			s, err := sn.Subscribe("lpub", []string{"k.*"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ready(t, s)
			publishN(t, pub, "k.a", 0, 10)
			msgs, _ := collect(t, s, 10, 10*time.Second)
			seqs(t, msgs, 1)

			stop()
			downLong(t, sn, "lpub")
			pub, _ = laneRun(t, dir, "lpub", cfg())
			subscriptionsAt(t, pub, 1)
			publishN(t, pub, "k.b", 10, 10)
			msgs, all := collect(t, s, 10, 10*time.Second)
			from, reports := uint64(11), 0
			if !durable {
				from, reports = 1, 1
				if all[0].Kind != bus.DeliveryGap {
					t.Fatalf("first delivery after the restart %+v, want a gap notice", all[0])
				}
			}
			if len(all) != len(msgs)+reports {
				t.Fatalf("deliveries after the restart: %+v", all)
			}
			seqs(t, msgs, from)
			for i, m := range msgs {
				if m.Body.(map[string]any)["i"] != int64(10+i) {
					t.Fatalf("message %d after the restart is %+v", i, m)
				}
			}
			quiet(t, s, 5*laneBeat)
		})
	}
}

// A pusher yard down for many heartbeats and restarted under the same
// name gets its pullers' credit back: every job pushed by the new run is
// done.
func TestLanePusherDownLongGetsCreditBack(t *testing.T) {
	dir := laneDir(t)
	pusher, stop := laneRun(t, dir, "push", &bus.Config{Heartbeat: laneBeat})
	puller, _ := laneRun(t, dir, "puller", &bus.Config{Heartbeat: laneBeat})
	h := func(ctx context.Context, j *bus.Job) (any, error) { return j.Body, nil }
	if _, err := puller.Pull([]string{"push"}, 2, h); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, time.Minute)
	for i := range 5 {
		if _, err := pusher.Push(ctx, "job", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	results(t, pusher, 5)

	stop()
	downLong(t, puller, "push")
	pusher2, _ := laneRun(t, dir, "push", &bus.Config{Heartbeat: laneBeat})
	const n = 20
	for i := range n {
		if _, err := pusher2.Push(ctx, "job", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	for id, r := range results(t, pusher2, n) {
		if r.Err != "" || r.Puller != "puller" {
			t.Fatalf("job %d: %+v", id, r)
		}
	}
	if st := pusher2.Stats().Pusher; st.Done != n || st.Waiting != 0 || st.InFlight != 0 {
		t.Fatalf("pusher stats %+v", st)
	}
}

// A requester on a lane finds a queue group's members from the lane's
// directory, without a message from them: those there when it starts, and
// one that starts after it.
func TestLaneGroupFoundWithoutFirstMessage(t *testing.T) {
	dir := laneDir(t)
	serve := func(name string) {
		n, _ := laneRun(t, dir, name, &bus.Config{Heartbeat: laneBeat})
		if _, err := n.Serve("calc.>", func(ctx context.Context, r *bus.Request) (any, error) {
			return name, nil
		}, &bus.ServeOptions{Group: "calc"}); err != nil {
			t.Fatal(err)
		}
	}
	serve("m1")
	client, _ := laneRun(t, dir, "client", &bus.Config{Heartbeat: laneBeat})
	members := func(want ...string) {
		t.Helper()
		eventually(t, func() error {
			if got := client.GroupMembers("calc"); fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("group members %v, want %v", got, want)
			}
			return nil
		})
	}
	members("m1")
	serve("m2")
	members("m1", "m2")
	ctx := ctxT(t, 10*time.Second)
	by := map[any]int{}
	for range 4 {
		rep, err := client.RequestGroup(ctx, "calc", "calc.add", nil)
		if err != nil {
			t.Fatal(err)
		}
		by[rep.Body]++
	}
	if by["m1"] == 0 || by["m2"] == 0 {
		t.Fatalf("requests answered by %v, want both members", by)
	}
}
