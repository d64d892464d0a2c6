package bus_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/bus"
)

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
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		if _, err := c1.Request(ctx, "server", "s", "old"); !errors.Is(err, bus.ErrTimeout) {
			t.Fatalf("first run's request: %v", err)
		}
		cancel()
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
