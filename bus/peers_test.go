package bus_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
)

func waitHook(t *testing.T, n *bus.Node, peer string, st bus.PeerState, reason string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-n.PeerEvents():
			if ev.Peer == peer && ev.State == st && (reason == "" || ev.Reason == reason) {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no %v (%s) for %s", n.Name(), st, reason, peer)
		}
	}
}

// The connection hooks: a peer connects, disconnects (may come back),
// restarts, goes silent, and terminates, each with its reason.
func TestPeerHooks(t *testing.T) {
	net := bus.NewMemNet(0)
	at, _ := net.Transport("a")
	t.Cleanup(func() { at.Close() })
	a := newNode(t, at, &bus.Config{Heartbeat: 20 * time.Millisecond})
	open := func() (*bus.MemTransport, *bus.Node) {
		bt, err := net.Transport("b")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bt.Close() })
		return bt, newNode(t, bt, &bus.Config{Heartbeat: 20 * time.Millisecond})
	}
	bt, b := open()
	// Up with the transport's reason ("started") or, when b's hello is
	// read before the transport's event, "spoke": the node reads both at once.
	waitHook(t, a, "b", bus.PeerUp, "")
	// b answered a hello: a knows its run.
	eventually(t, func() error {
		if rtt, _ := a.RTT("b"); rtt.Count == 0 {
			return errors.New("no hello answered yet")
		}
		return nil
	})
	b.Close() // the node stops answering hellos; the transport stays
	waitHook(t, a, "b", bus.PeerDown, "silent")
	bt.Close()
	bt, _ = open() // b restarts: a new run
	waitHook(t, a, "b", bus.PeerUp, "")
	waitHook(t, a, "b", bus.PeerUp, "restarted")
	bt.Close()
	waitHook(t, a, "b", bus.PeerDown, "closed")
	bt, _ = open()
	waitHook(t, a, "b", bus.PeerUp, "")
	bt.Leave()
	waitHook(t, a, "b", bus.PeerGone, "left")
	if _, ok := a.Peers()["b"]; ok {
		t.Fatal("a gone peer is still tracked")
	}
	if rtt, _ := a.RTT("a"); rtt.Count != 0 {
		t.Fatal("RTT to oneself")
	}
}

// A publisher that restarts (with its durable history): its subscribers
// subscribe again by themselves and resume with no gap and no duplicate.
func TestPublisherRestartResubscribes(t *testing.T) {
	for _, w := range worlds(t) {
		t.Run(w.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "h.db")
			cfg := func() *bus.Config {
				h, err := bus.NewBoltHistory(path, 1000, 0)
				if err != nil {
					t.Fatal(err)
				}
				return &bus.Config{History: h, Heartbeat: 20 * time.Millisecond}
			}
			pname := "pub2-" + w.name
			ptr, kill := w.open(t, pname)
			pub := newNode(t, ptr, cfg())
			str, _ := w.open(t, "sub2-"+w.name)
			sn := newNode(t, str, &bus.Config{Heartbeat: 20 * time.Millisecond})
			s, err := sn.Subscribe(pname, []string{"k.*"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ready(t, s)
			publishN(t, pub, "k.a", 0, 10)
			msgs, _ := collect(t, s, 10, 10*time.Second)
			seqs(t, msgs, 1)
			pub.Close()
			kill()
			ptr2, _ := w.open(t, pname)
			pub2 := newNode(t, ptr2, cfg())
			// The subscriber hears the new run and subscribes again, asking
			// for what came after seq 10; then the live messages come.
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
			quiet(t, s, 50*time.Millisecond)
		})
	}
}

// A service runs at most Concurrency handlers at once; requests beyond
// the backlog are answered "busy" at once.
func TestServeBounded(t *testing.T) {
	trs := memKind().make(t, "client", "server")
	ns := nodes(t, trs, &bus.Config{Heartbeat: -1})
	var running, most atomic.Int64
	release := make(chan struct{})
	if _, err := ns[1].Serve("slow", func(ctx context.Context, r *bus.Request) (any, error) {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		defer running.Add(-1)
		<-release
		return "ok", nil
	}, &bus.ServeOptions{Concurrency: 2, Backlog: 3}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	res := make(chan error, 10)
	for range 10 {
		go func() {
			_, err := ns[0].Request(ctx, "server", "slow", nil)
			res <- err
		}()
	}
	busy := 0
	for range 5 { // 2 running and 3 waiting: the other 5 are refused
		var re *bus.RemoteError
		if err := <-res; !errors.As(err, &re) || re.Msg != "busy" {
			t.Fatalf("request beyond the backlog: %v", err)
		}
		busy++
	}
	// Both admitted handlers hold their slots until release: wait until
	// both run, so that the count below sees them at once.
	for i := 0; running.Load() < 2 && i < 5000; i++ {
		time.Sleep(time.Millisecond)
	}
	close(release)
	for range 5 {
		if err := <-res; err != nil {
			t.Fatal(err)
		}
	}
	if most.Load() != 2 {
		t.Fatalf("%d handlers at once, want 2", most.Load())
	}
}

// A peer that does not speak the bus (it never answers a hello) gets one
// hello when it comes up, and no heartbeats after it.
func TestNoHeartbeatsForForeignPeers(t *testing.T) {
	net := bus.NewMemNet(0)
	foreign, _ := net.Transport("foreign")
	t.Cleanup(func() { foreign.Close() })
	at, _ := net.Transport("a")
	t.Cleanup(func() { at.Close() })
	newNode(t, at, &bus.Config{Heartbeat: 10 * time.Millisecond})
	hellos := 0
	for deadline := time.After(300 * time.Millisecond); ; {
		select {
		case m := <-foreign.Receive():
			if m.Body["ek"] == int64(1) {
				hellos++
			}
			continue
		case <-deadline:
		}
		break
	}
	if hellos != 1 {
		t.Fatalf("%d hellos in 30 heartbeats, want the 1 when it came up", hellos)
	}
}
