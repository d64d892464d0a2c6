package bus_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// roadPair starts a main estate and others on an in-memory network with
// imp on every link, joins each other to main and returns their adapters
// (main first), closed at cleanup.
func roadNet(t *testing.T, imp netsim.Impairment, names ...string) []*bus.Road {
	t.Helper()
	return roadNetWith(t, imp, nil, names...)
}

// roadNetWith is roadNet with tweak applied to each stack's config.
func roadNetWith(t *testing.T, imp netsim.Impairment, tweak func(*road.Config), names ...string) []*bus.Road {
	t.Helper()
	net := netsim.NewNetwork(11)
	t.Cleanup(func() { net.Close() })
	var stacks []*road.Stack
	for i, name := range names {
		addr := netip.MustParseAddrPort(fmt.Sprintf("10.0.0.%d:7530", i+1))
		conn, err := net.Listen(addr, imp)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &road.Config{Name: name, Main: i == 0, Auto: keep.AutoAlways, PacketConn: conn,
			AlivePeriod: -1, MessageTimeout: 20 * time.Second, JoinTimeout: time.Second, AllowTimeout: time.Second}
		if tweak != nil {
			tweak(cfg)
		}
		s, err := road.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stacks = append(stacks, s)
	}
	ctx := ctxT(t, time.Minute)
	errs := make(chan error, len(stacks))
	for _, s := range stacks[1:] {
		go func() {
			var err error
			for try := 0; try < 30; try++ {
				if _, err = s.Join(ctx, "10.0.0.1:7530"); err == nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range stacks[1:] {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	var out []*bus.Road
	for _, s := range stacks {
		r := bus.NewRoad(s)
		t.Cleanup(func() { r.Close() })
		out = append(out, r)
	}
	return out
}

// laneDir is a fresh socket directory short enough for socket paths.
func laneDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "bus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// laneYard starts a yard in dir and returns its adapter, closed at cleanup.
func laneYard(t *testing.T, dir, name string) (*bus.Lane, *lane.Stack) {
	t.Helper()
	s, err := lane.New(&lane.Config{Dir: dir, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	l := bus.NewLane(s)
	t.Cleanup(func() { l.Close(); s.Close() })
	return l, s
}

func recvMsg(t *testing.T, tr bus.Transport) bus.Message {
	t.Helper()
	select {
	case m := <-tr.Receive():
		return m
	case <-time.After(20 * time.Second):
		t.Fatalf("%s received nothing", tr.Name())
	}
	return bus.Message{}
}

func waitPeer(t *testing.T, tr bus.Transport, peer string, st bus.PeerState) bus.PeerEvent {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case ev := <-tr.Events():
			if ev.Peer == peer && ev.State == st {
				return ev
			}
		case <-deadline:
			t.Fatalf("%s: no %v event for %s", tr.Name(), st, peer)
		}
	}
}
