package bus_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/road"
)

// Two peers on an in-memory network (a road estate or a lane yard plugs in
// the same way, through NewRoad or NewLane): one publishes, the other
// subscribes with a filter and asks for the last two messages first.
func ExampleNode_Subscribe() {
	net := bus.NewMemNet(0)
	pt, _ := net.Transport("pub")
	st, _ := net.Transport("sub")
	defer pt.Close()
	defer st.Close()
	pub, _ := bus.New(pt, nil)
	defer pub.Close()
	sub, _ := bus.New(st, nil)
	defer sub.Close()

	ctx := context.Background()
	for i := range 3 {
		pub.Publish(ctx, bus.Pub{Subject: "orders.eu.new", Body: map[string]any{"n": i}})
	}
	pub.Publish(ctx, bus.Pub{Subject: "stock.eu", Body: map[string]any{"n": 9}})
	s, _ := sub.Subscribe("pub", []string{"orders.>"}, &bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplayLast, N: 2}})
	<-s.Ready()
	pub.Publish(ctx, bus.Pub{Subject: "orders.us.new", Origin: "web", Body: map[string]any{"n": 3}})
	for range 3 {
		d := <-s.Messages()
		fmt.Printf("%d %s %v %q\n", d.Seq, d.Subject, d.Body.(map[string]any)["n"], d.Origin)
	}
	// Output:
	// 2 orders.eu.new 1 ""
	// 3 orders.eu.new 2 ""
	// 5 orders.us.new 3 "web"
}

// A request to a service, and to a queue group.
func ExampleNode_Request() {
	net := bus.NewMemNet(0)
	ct, _ := net.Transport("client")
	rt, _ := net.Transport("server")
	defer ct.Close()
	defer rt.Close()
	client, _ := bus.New(ct, nil)
	defer client.Close()
	server, _ := bus.New(rt, nil)
	defer server.Close()

	server.Serve("math.*", func(ctx context.Context, r *bus.Request) (any, error) {
		b := r.Body.(map[string]any)
		return map[string]any{"sum": b["a"].(int64) + b["b"].(int64)}, nil
	}, &bus.ServeOptions{Group: "calculators", Concurrency: 4})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rep, err := client.Request(ctx, "server", "math.add", map[string]any{"a": 2, "b": 3})
	fmt.Println(rep.From, rep.Body, err)
	for len(client.GroupMembers("calculators")) == 0 { // learnt from the server's hello
		time.Sleep(time.Millisecond)
	}
	rep, err = client.RequestGroup(ctx, "calculators", "math.add", map[string]any{"a": 4, "b": 5})
	fmt.Println(rep.From, rep.Body, err)
	// Output:
	// server map[sum:5] <nil>
	// server map[sum:9] <nil>
}

// A pusher hands jobs to a puller with a credit of 2; each result comes
// back once.
func ExampleNode_Push() {
	net := bus.NewMemNet(0)
	bt, _ := net.Transport("boss")
	wt, _ := net.Transport("worker")
	defer bt.Close()
	defer wt.Close()
	boss, _ := bus.New(bt, nil)
	defer boss.Close()
	worker, _ := bus.New(wt, nil)
	defer worker.Close()

	worker.Pull([]string{"boss"}, 2, func(ctx context.Context, j *bus.Job) (any, error) {
		return fmt.Sprintf("resized %v", j.Body), nil
	})
	ctx := context.Background()
	var ids []uint64
	for _, img := range []string{"a.png", "b.png", "c.png"} {
		id, _ := boss.Push(ctx, "resize", img)
		ids = append(ids, id)
	}
	done := map[uint64]string{}
	for range 3 {
		r := <-boss.Results()
		done[r.ID] = r.Body.(string)
	}
	fmt.Println(done[ids[0]], done[ids[1]], done[ids[2]])
	// Output:
	// resized a.png resized b.png resized c.png
}

// A responder's budget per peer: with Config.MaxPeerRequests at 1, a client
// whose request is still in a handler has its next one refused at once
// with ErrRequestBudget, whatever the service's backlog; another peer's
// requests are not held up by it.
func ExampleConfig_maxPeerRequests() {
	net := bus.NewMemNet(0)
	ct, _ := net.Transport("client")
	rt, _ := net.Transport("server")
	defer ct.Close()
	defer rt.Close()
	client, _ := bus.New(ct, nil)
	defer client.Close()
	server, _ := bus.New(rt, &bus.Config{MaxPeerRequests: 1})
	defer server.Close()

	started, release := make(chan struct{}), make(chan struct{})
	server.Serve("slow", func(ctx context.Context, r *bus.Request) (any, error) {
		close(started)
		<-release
		return "done", nil
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	first := make(chan any)
	go func() {
		rep, _ := client.Request(ctx, "server", "slow", nil)
		first <- rep.Body
	}()
	<-started
	_, err := client.Request(ctx, "server", "slow", nil)
	fmt.Println(errors.Is(err, bus.ErrRequestBudget))
	close(release)
	fmt.Println(<-first, server.Stats().Responder.OverBudget)
	// Output:
	// true
	// done 1
}

// A lane yard as a transport: the same node code over Unix datagram
// sockets.
func ExampleNewLane() {
	dir, _ := os.MkdirTemp("", "bus")
	defer os.RemoveAll(dir)
	start := func(name string) (*bus.Node, func()) {
		s, _ := lane.New(&lane.Config{Dir: dir, Name: name})
		s.Start()
		t := bus.NewLane(s)
		n, _ := bus.New(t, nil)
		return n, func() { n.Close(); t.Close(); s.Close() }
	}
	server, stop := start("server")
	defer stop()
	client, stop2 := start("client")
	defer stop2()
	server.Serve("echo", func(ctx context.Context, r *bus.Request) (any, error) { return r.Body, nil }, nil)
	rep, err := client.Request(context.Background(), "server", "echo", map[string]any{"hello": "lane"})
	fmt.Println(rep.Body, err)
	// Output:
	// map[hello:lane] <nil>
}

// Subject filters: * is one token, > the rest.
func ExampleMatch() {
	for _, f := range []string{"orders.*", "orders.>", "*.eu.>", "orders.eu"} {
		fmt.Println(f, bus.Match(f, "orders.eu"), bus.Match(f, "orders.eu.new"))
	}
	// Output:
	// orders.* true false
	// orders.> true true
	// *.eu.> false true
	// orders.eu true false
}

// Two road estates on loopback: the node code is the same as over a lane.
func ExampleNewRoad() {
	start := func(name string, main bool) (*road.Stack, *bus.Node, func()) {
		s, _ := road.New(&road.Config{Name: name, Main: main, Listen: "127.0.0.1:0", Auto: keep.AutoAlways})
		s.Start()
		t := bus.NewRoad(s)
		n, _ := bus.New(t, nil)
		return s, n, func() { n.Close(); t.Close(); s.Close() }
	}
	ms, server, stop := start("server", true)
	defer stop()
	cs, client, stop2 := start("client", false)
	defer stop2()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.Join(ctx, ms.Addr().String()); err != nil {
		fmt.Println(err)
		return
	}
	server.Serve("time.now", func(ctx context.Context, r *bus.Request) (any, error) {
		return map[string]any{"ok": true}, nil
	}, nil)
	rep, err := client.Request(ctx, "server", "time.now", nil)
	fmt.Println(rep.From, rep.Body, err)
	// Output:
	// server map[ok:true] <nil>
}

// A durable history: what a publisher retained is there after a restart.
func ExampleNewBoltHistory() {
	dir, _ := os.MkdirTemp("", "bus")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "history.db")
	h, _ := bus.NewBoltHistory(path, 100, 0)
	h.Append(bus.Retained{Seq: 1, Subject: "a", Body: map[string]any{"n": 1}})
	h.Close()
	h, _ = bus.NewBoltHistory(path, 100, 0)
	defer h.Close()
	msgs, _, _ := h.Select(bus.Query{Filters: []string{">"}, Replay: bus.ReplayLast, Arg: 10})
	fmt.Println(h.LastSeq(), len(msgs), msgs[0].Subject, msgs[0].Body)
	// Output:
	// 1 1 a map[n:1]
}

// A subscriber that keeps its Position after each message it processes, is
// killed (kill -9: its buffered messages are lost with it) and restarts
// from that position gets the rest, with no gap and no duplicate.
func ExampleSubscription_Position() {
	net := bus.NewMemNet(0)
	pt, _ := net.Transport("pub")
	defer pt.Close()
	pub, _ := bus.New(pt, nil)
	defer pub.Close()
	ctx := context.Background()

	st, _ := net.Transport("sub")
	sub, _ := bus.New(st, nil)
	s, _ := sub.Subscribe("pub", []string{"orders.>"}, nil)
	<-s.Ready()
	for i := range 6 {
		pub.Publish(ctx, bus.Pub{Subject: "orders.new", Body: i})
	}
	var epoch, seq uint64
	for range 2 { // processes two; the others wait in its buffer
		d := <-s.Messages()
		fmt.Println("processed", d.Seq)
		epoch, seq = s.Position() // stored with the result, say
	}
	st.Close() // killed
	sub.Close()

	st, _ = net.Transport("sub")
	defer st.Close()
	sub, _ = bus.New(st, nil)
	defer sub.Close()
	s, _ = sub.Subscribe("pub", []string{"orders.>"},
		&bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplaySinceSeq, Seq: seq, Epoch: epoch}})
	for range 4 {
		d := <-s.Messages()
		fmt.Println("after the restart", d.Seq)
	}
	// Output:
	// processed 1
	// processed 2
	// after the restart 3
	// after the restart 4
	// after the restart 5
	// after the restart 6
}

// A publisher's owner sets what one peer may ask of it: here at most two
// subscriptions per peer. The third is refused, and the subscriber's Err
// says which budget it went over.
func ExampleErrOverBudget() {
	net := bus.NewMemNet(0)
	pt, _ := net.Transport("pub")
	st, _ := net.Transport("sub")
	defer pt.Close()
	defer st.Close()
	pub, _ := bus.New(pt, &bus.Config{MaxPeerSubscriptions: 2})
	defer pub.Close()
	sub, _ := bus.New(st, nil)
	defer sub.Close()

	for _, filter := range []string{"a.>", "b.>", "c.>"} {
		s, _ := sub.Subscribe("pub", []string{filter}, nil)
		<-s.Ready()
		fmt.Println(filter, errors.Is(s.Err(), bus.ErrOverBudget), s.Err())
	}
	fmt.Println("refused over budget:", pub.Stats().Publisher.OverBudget)
	// Output:
	// a.> false <nil>
	// b.> false <nil>
	// c.> true raet bus: over the publisher's budget: pub refused the subscription: over budget: subscriptions of a peer (2)
	// refused over budget: 1
}
