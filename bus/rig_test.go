package bus_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/netsim"
)

// netKind is a transport the pattern tests run over.
type netKind struct {
	name string
	make func(t *testing.T, names ...string) []bus.Transport
}

func memKind() netKind {
	return netKind{"mem", func(t *testing.T, names ...string) []bus.Transport {
		var out []bus.Transport
		for _, tr := range memTransports(t, bus.NewMemNet(0), names...) {
			out = append(out, tr)
		}
		return out
	}}
}

// memTransports adds the peers named to net, closed at cleanup.
func memTransports(t *testing.T, net *bus.MemNet, names ...string) []*bus.MemTransport {
	t.Helper()
	var out []*bus.MemTransport
	for _, name := range names {
		tr, err := net.Transport(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		out = append(out, tr)
	}
	return out
}

func roadKind(loss float64) netKind {
	return netKind{fmt.Sprintf("road/loss%.0f%%", loss*100), func(t *testing.T, names ...string) []bus.Transport {
		imp := netsim.Impairment{Loss: loss, Duplicate: 0.05, Reorder: 0.10, Delay: 100 * time.Microsecond,
			Jitter: 100 * time.Microsecond, Limit: 100_000, Seed: uint64(loss*1000) + 1}
		var out []bus.Transport
		for _, r := range roadNet(t, imp, names...) {
			out = append(out, r)
		}
		return out
	}}
}

func laneKind() netKind {
	return netKind{"lane", func(t *testing.T, names ...string) []bus.Transport {
		dir := laneDir(t)
		var out []bus.Transport
		for _, name := range names {
			l, _ := laneYard(t, dir, name)
			out = append(out, l)
		}
		return out
	}}
}

// allKinds are the transports of the tests that must pass over each.
func allKinds() []netKind {
	return []netKind{memKind(), roadKind(0), roadKind(0.10), roadKind(0.30), laneKind()}
}

// newNode starts a node over tr, closed at cleanup.
func newNode(t *testing.T, tr bus.Transport, cfg *bus.Config) *bus.Node {
	t.Helper()
	n, err := bus.New(tr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func nodes(t *testing.T, trs []bus.Transport, cfg *bus.Config) []*bus.Node {
	var out []*bus.Node
	for _, tr := range trs {
		out = append(out, newNode(t, tr, cfg))
	}
	return out
}

func ready(t *testing.T, s *bus.Subscription) {
	t.Helper()
	select {
	case <-s.Ready():
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("subscription not confirmed")
	}
}

// collect reads n deliveries of kind Message (reports of other kinds are
// returned too, in order) or fails after d.
func collect(t *testing.T, s *bus.Subscription, n int, d time.Duration) (msgs, all []bus.Delivery) {
	t.Helper()
	deadline := time.After(d)
	for len(msgs) < n {
		select {
		case m := <-s.Messages():
			all = append(all, m)
			if m.Kind == bus.DeliveryMessage {
				msgs = append(msgs, m)
			}
		case <-deadline:
			t.Fatalf("got %d of %d messages", len(msgs), n)
		}
	}
	return msgs, all
}

// quiet checks that nothing more arrives for a while.
func quiet(t *testing.T, s *bus.Subscription, d time.Duration) {
	t.Helper()
	select {
	case m := <-s.Messages():
		t.Fatalf("unexpected delivery %+v", m)
	case <-time.After(d):
	}
}

// gate is a transport whose sends wait while it is shut.
type gate struct {
	bus.Transport
	mu   sync.Mutex
	open chan struct{}
}

func newGate(tr bus.Transport) *gate {
	return &gate{Transport: tr, open: make(chan struct{})}
}

// Shut makes sends to peer wait (every peer but the gate's).
func (g *gate) Shut() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) Open() {
	g.mu.Lock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
	g.mu.Unlock()
}

func (g *gate) Send(ctx context.Context, to string, body any) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	select {
	case <-open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Transport.Send(ctx, to, body)
}

// eventually retries check for a while, then fails with its error.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	var err error
	for range 400 {
		if err = check(); err == nil {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal(err)
}

// world makes transports that can be closed and made again under the same
// name (a restart): over the in-memory network or a lane.
type world struct {
	name string
	open func(t *testing.T, name string) (tr bus.Transport, kill func())
}

func worlds(t *testing.T) []world {
	mem := bus.NewMemNet(0)
	dir := laneDir(t)
	return []world{
		{"mem", func(t *testing.T, name string) (bus.Transport, func()) {
			tr, err := mem.Transport(name)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			return tr, func() { tr.Close() }
		}},
		{"lane", func(t *testing.T, name string) (bus.Transport, func()) {
			l, s := laneYard(t, dir, name)
			return l, func() { l.Close(); s.Close() }
		}},
	}
}
