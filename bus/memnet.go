package bus

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/raet-go/raet/packet"
)

// MemNet is an in-memory network of transports, for tests and examples: a
// Send is a channel send to the peer's queue (blocking while it is full, as a
// stack applies back-pressure), and closing a transport tells the others it
// is down, as a road stack's presence would. A new transport hears PeerUp
// ("present") for every peer there, and they hear PeerUp ("started") for
// it; one made again under the same name is the peer restarted.
type MemNet struct {
	mu    sync.Mutex
	peers map[string]*MemTransport
	queue int
}

// NewMemNet returns an empty network whose transports queue up to queue
// received messages each (0 means 1024).
func NewMemNet(queue int) *MemNet {
	if queue <= 0 {
		queue = 1024
	}
	return &MemNet{peers: map[string]*MemTransport{}, queue: queue}
}

// MemTransport is one peer of a MemNet.
type MemTransport struct {
	net    *MemNet
	name   string
	recv   chan Message
	events chan PeerEvent
	done   chan struct{}
	once   sync.Once
}

// Transport adds the peer name to the network and returns its transport. A
// name in use is an error.
func (n *MemNet) Transport(name string) (*MemTransport, error) {
	t := &MemTransport{net: n, name: name, recv: make(chan Message, n.queue),
		events: make(chan PeerEvent, eventQueue), done: make(chan struct{})}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.peers[name]; ok {
		return nil, fmt.Errorf("raet bus: memnet: peer %q exists", name)
	}
	n.peers[name] = t
	for _, o := range n.peers {
		if o != t {
			o.event(PeerEvent{Peer: name, State: PeerUp, Reason: "started", Time: time.Now()})
			t.event(PeerEvent{Peer: o.name, State: PeerUp, Reason: "present", Time: time.Now()})
		}
	}
	return t, nil
}

func (t *MemTransport) event(ev PeerEvent) {
	select {
	case t.events <- ev:
	default:
	}
}

// Name is the peer's name.
func (t *MemTransport) Name() string { return t.name }

// Send queues body for the peer named to, waiting while its queue is full.
// The body goes through the JSON body serializer both ways, as over a stack,
// so the receiver gets the types a stack delivers and nothing is shared.
func (t *MemTransport) Send(ctx context.Context, to string, body any) error {
	raw, err := packet.JSONBody{}.Marshal(nil, body)
	if err != nil {
		return fmt.Errorf("memnet send to %q: %w", to, err)
	}
	m := map[string]any{}
	if err := (packet.JSONBody{}).Unmarshal(raw, &m); err != nil {
		return fmt.Errorf("memnet send to %q: %w", to, err)
	}
	select {
	case <-t.done:
		return ErrClosed
	default:
	}
	t.net.mu.Lock()
	dst := t.net.peers[to]
	t.net.mu.Unlock()
	if dst == nil {
		return fmt.Errorf("memnet send to %q: %w", to, ErrUnknownPeer)
	}
	select {
	case dst.recv <- Message{From: t.name, Body: m}:
		return nil
	case <-dst.done:
		return fmt.Errorf("memnet send to %q: %w", to, ErrUnknownPeer)
	case <-t.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Receive is the channel of received messages.
func (t *MemTransport) Receive() <-chan Message { return t.recv }

// Events is the channel of peer events.
func (t *MemTransport) Events() <-chan PeerEvent { return t.events }

// Done is closed by Close.
func (t *MemTransport) Done() <-chan struct{} { return t.done }

// Close removes the peer from the network; the others hear PeerDown
// ("closed"), or PeerGone ("left") when gone is set by Leave.
func (t *MemTransport) Close() error { t.close(PeerDown, "closed"); return nil }

// Leave closes the peer for good: the others hear PeerGone.
func (t *MemTransport) Leave() error { t.close(PeerGone, "left"); return nil }

func (t *MemTransport) close(st PeerState, reason string) {
	t.once.Do(func() {
		close(t.done)
		t.net.mu.Lock()
		defer t.net.mu.Unlock()
		if t.net.peers[t.name] == t {
			delete(t.net.peers, t.name)
		}
		for _, o := range t.net.peers {
			o.event(PeerEvent{Peer: t.name, State: st, Reason: reason, Time: time.Now()})
		}
	})
}
