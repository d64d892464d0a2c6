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

// A publisher yard down for many heartbeats (its socket gone) and
// restarted under the same name gets its subscriber back: the subscriber
// resumes after the last message it had (replayed from the durable
// history) and receives every message after, with no gap and no report.
func TestLanePublisherDownLongGetsSubscribersBack(t *testing.T) {
	dir := laneDir(t)
	path := filepath.Join(t.TempDir(), "h.db")
	cfg := func() *bus.Config {
		h, err := bus.NewBoltHistory(path, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		return &bus.Config{History: h, Heartbeat: laneBeat}
	}
	pl, ps := laneYard(t, dir, "lpub")
	pub := newNode(t, pl, cfg())
	sl, _ := laneYard(t, dir, "lsub")
	sn := newNode(t, sl, &bus.Config{Heartbeat: laneBeat})
	s, err := sn.Subscribe("lpub", []string{"k.*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	publishN(t, pub, "k.a", 0, 10)
	msgs, _ := collect(t, s, 10, 10*time.Second)
	seqs(t, msgs, 1)

	pub.Close()
	pl.Close()
	ps.Close()
	downLong(t, sn, "lpub")

	pl2, _ := laneYard(t, dir, "lpub")
	pub2 := newNode(t, pl2, cfg())
	eventually(t, func() error {
		if st := pub2.Stats().Publisher; st.Subscriptions != 1 {
			return fmt.Errorf("%d subscriptions at the restarted publisher", st.Subscriptions)
		}
		return nil
	})
	publishN(t, pub2, "k.b", 10, 10)
	msgs, all := collect(t, s, 10, 10*time.Second)
	if len(all) != 10 {
		t.Fatalf("reports besides messages: %+v", all)
	}
	seqs(t, msgs, 11)
	quiet(t, s, 5*laneBeat)
}

// A subscriber of a publisher without durable history (a new run starts
// its sequence again) gets a gap notice for what it cannot have, never a
// silent loss, and then every message of the new run.
func TestLanePublisherDownLongMemoryHistory(t *testing.T) {
	dir := laneDir(t)
	pl, ps := laneYard(t, dir, "mpub")
	pub := newNode(t, pl, &bus.Config{Heartbeat: laneBeat})
	sl, _ := laneYard(t, dir, "msub")
	sn := newNode(t, sl, &bus.Config{Heartbeat: laneBeat})
	s, err := sn.Subscribe("mpub", []string{"k.*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	publishN(t, pub, "k.a", 0, 5)
	collect(t, s, 5, 10*time.Second)

	pub.Close()
	pl.Close()
	ps.Close()
	downLong(t, sn, "mpub")

	pl2, _ := laneYard(t, dir, "mpub")
	pub2 := newNode(t, pl2, &bus.Config{Heartbeat: laneBeat})
	eventually(t, func() error {
		if st := pub2.Stats().Publisher; st.Subscriptions != 1 {
			return fmt.Errorf("%d subscriptions at the restarted publisher", st.Subscriptions)
		}
		return nil
	})
	publishN(t, pub2, "k.b", 0, 10)
	msgs, all := collect(t, s, 10, 10*time.Second)
	if len(all) != 11 || all[0].Kind != bus.DeliveryGap {
		t.Fatalf("after the restart, want a gap notice then 10 messages: %+v", all)
	}
	for i, m := range msgs {
		if m.Body.(map[string]any)["i"] != int64(i) || m.Seq != uint64(i+1) {
			t.Fatalf("message %d of the new run is %+v", i, m)
		}
	}
	quiet(t, s, 5*laneBeat)
}

// A pusher yard down for many heartbeats and restarted under the same
// name gets its pullers' credit back: every job pushed by the new run is
// done.
func TestLanePusherDownLongGetsCreditBack(t *testing.T) {
	dir := laneDir(t)
	pl, ps := laneYard(t, dir, "push")
	pusher := newNode(t, pl, &bus.Config{Heartbeat: laneBeat})
	ql, _ := laneYard(t, dir, "puller")
	puller := newNode(t, ql, &bus.Config{Heartbeat: laneBeat})
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

	pusher.Close()
	pl.Close()
	ps.Close()
	downLong(t, puller, "push")

	pl2, _ := laneYard(t, dir, "push")
	pusher2 := newNode(t, pl2, &bus.Config{Heartbeat: laneBeat})
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
		l, _ := laneYard(t, dir, name)
		n := newNode(t, l, &bus.Config{Heartbeat: laneBeat})
		if _, err := n.Serve("calc.>", func(ctx context.Context, r *bus.Request) (any, error) {
			return name, nil
		}, &bus.ServeOptions{Group: "calc"}); err != nil {
			t.Fatal(err)
		}
	}
	serve("m1")
	cl, _ := laneYard(t, dir, "client")
	client := newNode(t, cl, &bus.Config{Heartbeat: laneBeat})
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
