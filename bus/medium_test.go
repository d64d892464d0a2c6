package bus_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/netsim"
)

// Service.Close answers the requests still waiting for a handler with an
// error, and the one being handled with its handler's: none waits for its
// deadline.
func TestServiceCloseAnswersWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns, _ := memNodes(t, 0, nil, "client", "server")
		client, server := ns[0], ns[1]
		svc, err := server.Serve("s", func(ctx context.Context, r *bus.Request) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, &bus.ServeOptions{Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 3)
		for range 3 {
			go func() {
				_, err := client.Request(t.Context(), "server", "s", nil)
				errs <- err
			}()
		}
		synctest.Wait() // one handled, two waiting
		start := time.Now()
		svc.Close()
		for range 3 {
			var re *bus.RemoteError
			if err := <-errs; !errors.As(err, &re) {
				t.Fatalf("a request to a closed service: %v", err)
			}
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("answered %s after the close", d)
		}
	})
}

// A request to a peer known to be down (it went silent) fails at once with
// ErrNoResponders and ErrPeerDown, instead of waiting for its deadline.
func TestRequestToDownPeerFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns, ms := memNodes(t, 8, func(string) *bus.Config { return &bus.Config{Heartbeat: time.Second} }, "client", "server")
		client, server := ns[0], ns[1]
		if _, err := server.Serve("s", func(ctx context.Context, r *bus.Request) (any, error) { return "ok", nil }, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Request(t.Context(), "server", "s", nil); err != nil {
			t.Fatal(err)
		}
		ms[1].dead.Store(true) // killed
		server.Close()
		time.Sleep(10 * time.Second) // silent for many heartbeats
		start := time.Now()
		_, err := client.Request(t.Context(), "server", "s", nil)
		if !errors.Is(err, bus.ErrNoResponders) || !errors.Is(err, bus.ErrPeerDown) || time.Since(start) != 0 {
			t.Fatalf("request to a down peer: %v after %s", err, time.Since(start))
		}
	})
}

// A group member that refuses a request as busy (its backlog full) passes
// it to another member, and the requester gets the other's answer.
func TestGroupBusyTriesNextMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns, _ := memNodes(t, 0, func(string) *bus.Config { return &bus.Config{Heartbeat: time.Second} }, "filler", "client", "a", "b")
		filler, client, a, b := ns[0], ns[1], ns[2], ns[3]
		release := make(chan struct{})
		defer close(release)
		if _, err := a.Serve("s", func(ctx context.Context, r *bus.Request) (any, error) {
			<-release
			return "a", nil
		}, &bus.ServeOptions{Group: "g", Concurrency: 1, Backlog: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Serve("s", func(ctx context.Context, r *bus.Request) (any, error) { return "b", nil },
			&bus.ServeOptions{Group: "g"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second) // the client learns the group from the hellos
		errs := make(chan error, 10)
	fill: // until a refuses one: its handler and its backlog are taken
		for range 10 {
			go func() {
				_, err := filler.Request(t.Context(), "a", "s", nil)
				errs <- err
			}()
			synctest.Wait()
			select {
			case err := <-errs:
				var re *bus.RemoteError
				if !errors.As(err, &re) || re.Msg != "busy" {
					t.Fatalf("filling a: %v", err)
				}
				break fill
			default:
			}
		}
		if m := client.GroupMembers("g"); len(m) != 2 {
			t.Fatalf("members %v", m)
		}
		for i := range 4 { // the turn comes to a at least once
			rep, err := client.RequestGroup(t.Context(), "g", "s", nil)
			if err != nil || rep.Body != "b" {
				t.Fatalf("group request %d: %+v %v; members %v, stats %+v, peers %v", i, rep, err, client.GroupMembers("g"), client.Stats().Requester, client.Peers())
			}
		}
	})
}

// Node.RTT is the network's round trip, not a handler's time: requests to a
// slow handler do not count in it.
func TestRTTIsTheNetworks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ns, _ := memNodes(t, 0, func(string) *bus.Config { return &bus.Config{Heartbeat: time.Second} }, "client", "server")
		client, server := ns[0], ns[1]
		if _, err := server.Serve("s", func(ctx context.Context, r *bus.Request) (any, error) {
			time.Sleep(time.Second)
			return "ok", nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // a heartbeat measured the network
		rep, err := client.Request(t.Context(), "server", "s", nil)
		if err != nil || rep.RTT != time.Second {
			t.Fatalf("reply %+v %v: want the handler's second in the request's RTT", rep, err)
		}
		if rtt, _ := client.RTT("server"); rtt.Count == 0 || rtt.Last != 0 || rtt.Avg != 0 {
			t.Fatalf("RTT %+v: the handler's time counted", rtt)
		}
	})
}

// Over a road, a request to a peer the estate does not know fails at once
// with ErrUnknownPeer (and ErrPeerDown).
func TestRoadUnknownPeer(t *testing.T) {
	rs := roadNet(t, netsim.Impairment{}, "alone")
	n := newNode(t, rs[0], &bus.Config{Heartbeat: -1})
	_, err := n.Request(ctxT(t, 10*time.Second), "nobody", "s", nil)
	if !errors.Is(err, bus.ErrUnknownPeer) || !errors.Is(err, bus.ErrPeerDown) {
		t.Fatalf("request to an unknown estate: %v", err)
	}
}

// A requester that restarts under the same name while a reply to its
// previous run is on its way: the old reply is not taken as the answer to a
// new request (ids carry the run), and the new request gets its own.
func TestRequesterRestartIgnoresOldReplies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := bus.NewMemNet(0)
		srvT, _ := net.Transport("server")
		t.Cleanup(func() { srvT.Close() })
		srv := newNode(t, srvT, &bus.Config{Heartbeat: -1})
		release := map[string]chan struct{}{"old": make(chan struct{}), "new": make(chan struct{})}
		if _, err := srv.Serve("s", func(ctx context.Context, r *bus.Request) (any, error) {
			<-release[r.Body.(string)]
			return r.Body, nil
		}, nil); err != nil {
			t.Fatal(err)
		}
		c1T, _ := net.Transport("client")
		c1 := newNode(t, c1T, &bus.Config{Heartbeat: -1})
		// The first run gives up (its ctx is cancelled) well before the
		// deadline it told the server, so the server still answers it.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		first := make(chan error, 1)
		go func() {
			_, err := c1.Request(ctx, "server", "s", "old")
			first <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-first; !errors.Is(err, bus.ErrTimeout) {
			t.Fatalf("first run's request: %v", err)
		}
		c1.Close()
		c1T.Close()
		c2T, err := net.Transport("client")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c2T.Close() })
		c2 := newNode(t, c2T, &bus.Config{Heartbeat: -1})
		got := make(chan any, 1)
		go func() {
			rep, err := c2.Request(t.Context(), "server", "s", "new")
			if err != nil {
				got <- err
				return
			}
			got <- rep.Body
		}()
		synctest.Wait()
		close(release["old"]) // the first run's reply comes first
		synctest.Wait()
		close(release["new"])
		if b := <-got; b != "new" {
			t.Fatalf("the new run's request was answered %v", b)
		}
		if st := c2.Stats().Requester; st.Late != 1 {
			t.Fatalf("requester stats %+v: want the old reply counted late", st)
		}
	})
}

// A pusher that restarts under the same name while a puller still works on
// a job of its previous run: the old run's done does not complete the new
// run's job (ids carry the run).
func TestPusherRestartIgnoresOldDones(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := bus.NewMemNet(0)
		wT, _ := net.Transport("worker")
		t.Cleanup(func() { wT.Close() })
		w := newNode(t, wT, &bus.Config{Heartbeat: time.Second})
		release := map[string]chan struct{}{"old": make(chan struct{}), "new": make(chan struct{})}
		p1T, _ := net.Transport("boss")
		p1 := newNode(t, p1T, &bus.Config{Heartbeat: time.Second})
		if _, err := w.Pull([]string{"boss"}, 2, func(ctx context.Context, j *bus.Job) (any, error) {
			<-release[j.Body.(string)]
			return j.Body, nil
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := p1.Push(t.Context(), "job", "old"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		p1.Close()
		p1T.Close()
		p2T, err := net.Transport("boss")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p2T.Close() })
		p2 := newNode(t, p2T, &bus.Config{Heartbeat: time.Second})
		id, err := p2.Push(t.Context(), "job", "new")
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		close(release["old"]) // the first run's done comes first
		synctest.Wait()
		close(release["new"])
		res := <-p2.Results()
		if res.ID != id || res.Body != "new" {
			t.Fatalf("the new run's job %d was done with %+v", id, res)
		}
		if st := p2.Stats().Pusher; st.Duplicates != 1 {
			t.Fatalf("pusher stats %+v: want the old done counted a duplicate", st)
		}
	})
}
