package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
)

func echo(name string) bus.Handler {
	return func(ctx context.Context, r *bus.Request) (any, error) {
		return map[string]any{"by": name, "echo": r.Body}, nil
	}
}

// Requests over every transport get their replies; an error of the handler
// comes back as a RemoteError; a subject nobody serves is an error at once.
func TestRequestReply(t *testing.T) {
	for _, k := range []netKind{memKind(), roadKind(0), roadKind(0.10), laneKind()} {
		t.Run(k.name, func(t *testing.T) {
			ns := nodes(t, k.make(t, "client", "server"), &bus.Config{Heartbeat: -1})
			if _, err := ns[1].Serve("svc.echo", echo("server"), nil); err != nil {
				t.Fatal(err)
			}
			if _, err := ns[1].Serve("svc.fail.*", func(context.Context, *bus.Request) (any, error) {
				return nil, errors.New("no luck")
			}, nil); err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t, time.Minute)
			for i := range 20 {
				rep, err := ns[0].Request(ctx, "server", "svc.echo", map[string]any{"i": i})
				if err != nil {
					t.Fatal(err)
				}
				if body := rep.Body.(map[string]any); body["by"] != "server" || fmt.Sprint(body["echo"].(map[string]any)["i"]) != fmt.Sprint(i) {
					t.Fatalf("reply %+v", rep)
				}
			}
			_, err := ns[0].Request(ctx, "server", "svc.fail.x", map[string]any{})
			var re *bus.RemoteError
			if !errors.As(err, &re) || re.Msg != "no luck" || re.Peer != "server" {
				t.Fatalf("failing handler: %v", err)
			}
			if _, err := ns[0].Request(ctx, "server", "nobody.home", map[string]any{}); !errors.As(err, &re) {
				t.Fatalf("unserved subject: %v", err)
			}
			// The hellos of the first contact measured the network; the
			// requests, with their handlers' time, do not count. Each
			// time the transport says the peer is up (over a lane: its
			// socket found at the attach's rescan or a later scan, its
			// first message) the node asks again, so up to 3. The
			// answering hello travels on the control queue, beside the
			// replies, so it may come after the last of them.
			rtt, ok := ns[0].RTT("server")
			for i := 0; ok && rtt.Count == 0 && i < 1000; i++ {
				time.Sleep(10 * time.Millisecond)
				rtt, ok = ns[0].RTT("server")
			}
			if !ok || rtt.Count < 1 || rtt.Count > 3 || rtt.Min <= 0 || rtt.Avg < rtt.Min {
				t.Fatalf("RTT %+v", rtt)
			}
			if st := ns[0].Stats().Requester; st.Pending != 0 || st.Replies != 22 {
				t.Fatalf("requester stats %+v", st)
			}
		})
	}
}

// 100k requests that time out leave the pending table empty.
func TestTimedOutRequestsLeaveNothing(t *testing.T) {
	// Every request is taken by a peer that never answers.
	c := newNode(t, blackhole{}, &bus.Config{Heartbeat: -1})
	const n, par = 100_000, 500
	var timeouts atomic.Int64
	var maxPending atomic.Int64
	var wg sync.WaitGroup
	for w := range par {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += par {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				_, err := c.Request(ctx, "sink", "svc.slow", map[string]any{"i": i})
				cancel()
				if errors.Is(err, bus.ErrTimeout) {
					timeouts.Add(1)
				}
				if i%1000 == 0 {
					if p := int64(c.Stats().Requester.Pending); p > maxPending.Load() {
						maxPending.Store(p)
					}
				}
			}
		}()
	}
	wg.Wait()
	st := c.Stats().Requester
	if timeouts.Load() != n || st.Timeouts != n || st.Pending != 0 {
		t.Fatalf("%d timeouts, stats %+v", timeouts.Load(), st)
	}
	if maxPending.Load() > par {
		t.Fatalf("%d pending at once with %d requesters", maxPending.Load(), par)
	}
}

// A queue group of 3: requests made one at a time take turns exactly (each
// finds the members equally busy); a member holding a request is passed
// over while the others are less busy; and 3000 requests made by 30
// requesters at once are each served exactly once, by every member. (How
// they share those 3000 is not promised: the least busy member gets the
// next one, so a member that is scheduled less serves less.)
func TestQueueGroupShares(t *testing.T) {
	trs := memKind().make(t, "client", "r1", "r2", "r3")
	ns := nodes(t, trs, &bus.Config{Heartbeat: -1})
	var counts [3]atomic.Int64
	var served sync.Map // request number -> member
	var twice atomic.Int64
	hold := make(chan struct{})
	holding := make(chan int, 1)
	for i := range 3 {
		h := func(ctx context.Context, r *bus.Request) (any, error) {
			counts[i].Add(1)
			if r.Subject == "work.hold" {
				holding <- i
				<-hold
			}
			if body, ok := r.Body.(map[string]any); ok && body["i"] != nil {
				if _, dup := served.LoadOrStore(fmt.Sprint(body["i"]), i); dup {
					twice.Add(1)
				}
			}
			return map[string]any{"by": i}, nil
		}
		if _, err := ns[i+1].Serve("work.>", h, &bus.ServeOptions{Group: "workers"}); err != nil {
			t.Fatal(err)
		}
	}
	waitMembers(t, ns[0], "workers", 3)
	ctx := ctxT(t, time.Minute)
	get := func() [3]int64 {
		var c [3]int64
		for i := range counts {
			c[i] = counts[i].Load()
		}
		return c
	}

	// One at a time: turns.
	for range 300 {
		if _, err := ns[0].RequestGroup(ctx, "workers", "work.turn", map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	if c := get(); c != [3]int64{100, 100, 100} {
		t.Fatalf("300 requests one at a time served %v, want 100 each", c)
	}

	// A member busy with one request is passed over.
	held := make(chan error, 1)
	go func() {
		_, err := ns[0].RequestGroup(ctx, "workers", "work.hold", map[string]any{})
		held <- err
	}()
	busy := <-holding
	before := get()
	for range 20 {
		if _, err := ns[0].RequestGroup(ctx, "workers", "work.free", map[string]any{}); err != nil {
			t.Fatal(err)
		}
	}
	close(hold)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	after := get()
	for i := range after {
		want := int64(10)
		if i == busy {
			want = 0
		}
		if d := after[i] - before[i]; d != want {
			t.Fatalf("member %d busy: 20 requests served %v more, want 10 by each other member", busy+1, [3]int64{after[0] - before[0], after[1] - before[1], after[2] - before[2]})
		}
	}

	// 30 requesters at once: every request served exactly once.
	before = get()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for w := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 3000; i += 30 {
				rep, err := ns[0].RequestGroup(ctx, "workers", "work.item", map[string]any{"i": i})
				if err != nil {
					failed.Add(1)
					continue
				}
				if by, ok := served.Load(fmt.Sprint(i)); !ok || fmt.Sprint(rep.Body.(map[string]any)["by"]) != fmt.Sprint(by) {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	after = get()
	if failed.Load() != 0 || twice.Load() != 0 {
		t.Fatalf("%d requests failed or answered by another member than served them, %d served twice", failed.Load(), twice.Load())
	}
	var sum int64
	for i := range after {
		d := after[i] - before[i]
		if d == 0 {
			t.Fatalf("member %d served none of 3000", i+1)
		}
		sum += d
	}
	if sum != 3000 {
		t.Fatalf("3000 requests served %d times: %v", sum, after)
	}
	t.Logf("3000 at once shared %d %d %d", after[0]-before[0], after[1]-before[1], after[2]-before[2])
}

func waitMembers(t *testing.T, n *bus.Node, group string, want int) {
	t.Helper()
	eventually(t, func() error {
		// A group request to an empty group fails at once; probe the
		// membership through a request that nobody serves.
		_, err := n.RequestGroup(ctxT(t, time.Second), group, "probe.members", nil)
		if errors.Is(err, bus.ErrNoResponders) {
			return err
		}
		if got := n.GroupMembers(group); len(got) != want {
			return fmt.Errorf("group %s: members %v", group, got)
		}
		return nil
	})
}

// A member that dies with requests in hand: they go to the others, and
// every request gets its reply.
func TestQueueGroupMemberDies(t *testing.T) {
	net := bus.NewMemNet(0)
	var trs []*bus.MemTransport
	for _, name := range []string{"client", "r1", "r2", "r3"} {
		tr, err := net.Transport(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trs = append(trs, tr)
	}
	var ns []*bus.Node
	for _, tr := range trs {
		ns = append(ns, newNode(t, tr, &bus.Config{Heartbeat: -1}))
	}
	stuck := make(chan struct{}, 100)
	for i := 1; i <= 3; i++ {
		h := echo(fmt.Sprint("r", i))
		if i == 3 { // r3 takes requests and never answers
			h = func(ctx context.Context, r *bus.Request) (any, error) {
				stuck <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			}
		}
		if _, err := ns[i].Serve("work.>", h, &bus.ServeOptions{Group: "workers"}); err != nil {
			t.Fatal(err)
		}
	}
	waitMembers(t, ns[0], "workers", 3)
	ctx := ctxT(t, time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for w := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 300; i += 30 {
				rep, err := ns[0].RequestGroup(ctx, "workers", "work.item", map[string]any{"i": i})
				if err == nil && rep.From == "r3" {
					err = fmt.Errorf("reply from the dead member")
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	<-stuck // r3 holds a request
	<-stuck
	trs[3].Close() // r3's stack goes away: the others hear it is down
	ns[3].Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := ns[0].Stats().Requester; st.Retried < 2 || st.Pending != 0 {
		t.Fatalf("requester stats %+v", st)
	}
}

// blackhole is a transport whose peers take everything and say nothing.
type blackhole struct{}

func (blackhole) Name() string                                        { return "client" }
func (blackhole) Send(ctx context.Context, to string, body any) error { return nil }
func (blackhole) Receive() <-chan bus.Message                         { return nil }
func (blackhole) Events() <-chan bus.PeerEvent                        { return nil }
func (blackhole) Done() <-chan struct{}                               { return nil }
