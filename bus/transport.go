package bus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Transport is all the patterns need of a stack: send a mapping to a peer by
// name, receive mappings, and hear about peers coming and going. A road
// estate (Road), a lane yard (Lane) and the in-memory MemNet satisfy it; a
// third transport plugs in the same way.
//
// Send must be reliable and in order between two peers for one caller (the
// RAET stacks are: a road message is done when the remote has it whole; a
// lane page is in the destination's socket queue), may block for
// back-pressure until ctx ends, and must be safe for concurrent use.
// Receive and Events are read by one goroutine of the Node; they are closed,
// or Done is, when the transport stops.
type Transport interface {
	// Name is the local peer's name, as other peers address it.
	Name() string
	// Send sends body, a mapping, to the peer named to.
	Send(ctx context.Context, to string, body any) error
	// Receive is the channel of received messages.
	Receive() <-chan Message
	// Events is the channel of peer state changes.
	Events() <-chan PeerEvent
	// Done is closed when the transport has stopped.
	Done() <-chan struct{}
}

// Message is a mapping received from a peer.
type Message struct {
	From string
	Body map[string]any
}

// PeerState is what a peer event says about the peer.
type PeerState uint8

// The peer states.
const (
	// PeerUp: the peer can be reached (a session came up, it spoke after
	// being dead, or it restarted).
	PeerUp PeerState = iota + 1
	// PeerDown: the peer stopped answering; it may come back.
	PeerDown
	// PeerGone: the peer will not come back (reaped, removed, its socket
	// vanished, or it said goodbye).
	PeerGone
	// PeerReleased: a subscription of the peer at this publisher ended
	// (PeerEvent.Subscription); the reason says why: "unsubscribed" (the
	// subscriber closed it, or its node closed), "silent" (it answered no
	// heartbeat for Config.ReleaseSilent), "cut", "slow", "peer gone",
	// "peer restarted", "peer unknown". The peer itself may still be up.
	PeerReleased
)

// String returns the state's name.
func (s PeerState) String() string {
	switch s {
	case PeerUp:
		return "up"
	case PeerDown:
		return "down"
	case PeerGone:
		return "gone"
	case PeerReleased:
		return "released"
	}
	return "unknown"
}

// PeerEvent is a change of a peer's state, with its reason (the stack's
// event kind, "restarted", "silent", ...).
type PeerEvent struct {
	Peer   string
	State  PeerState
	Reason string
	Time   time.Time
	// Subscription is, for PeerReleased, the id of the peer's subscription
	// that ended.
	Subscription uint64
}

// Errors of the transports and of the patterns; test with errors.Is.
var (
	// ErrClosed: the Node or transport was closed.
	ErrClosed = errors.New("raet bus: closed")
	// ErrUnknownPeer: no peer of that name can be reached.
	ErrUnknownPeer = errors.New("raet bus: unknown peer")
)

// eventQueue is the capacity of the adapters' event channels.
const eventQueue = 256

// recvQueue is the capacity of the adapters' message channels: the
// adapter's goroutine runs ahead of the node's by this many messages.
const recvQueue = 64

// sink hands an adapter's messages and events to a node from the adapter's
// own goroutine instead of through its channels: one handoff less per
// message. A node attaches itself in New and detaches in Close; while none
// is attached the channels carry them.
type sink struct {
	mu  sync.RWMutex
	msg func(Message)
	ev  func(PeerEvent)
}

// attacher is a transport with a sink (Road, Lane).
type attacher interface {
	attach(msg func(Message), ev func(PeerEvent))
}

// attach sets the node's functions (nil, nil detaches), once no call to
// the previous ones is running.
func (s *sink) attach(msg func(Message), ev func(PeerEvent)) {
	s.mu.Lock()
	s.msg, s.ev = msg, ev
	s.mu.Unlock()
}

// message hands m to the attached node and reports whether there was one.
func (s *sink) message(m Message) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.msg == nil {
		return false
	}
	s.msg(m)
	return true
}

// event hands e to the attached node and reports whether there was one.
func (s *sink) event(e PeerEvent) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.ev == nil {
		return false
	}
	s.ev(e)
	return true
}

// carrier is what the stack adapters (Road, Lane) share: the goroutine that
// carries a stack's messages and peer events to the attached node, or else
// to the channels, and its stop.
type carrier struct {
	sink
	recv       chan Message
	events     chan PeerEvent
	attached   chan struct{} // a node attached: the pump hands it what the channels hold
	done       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
	eventDrops atomic.Uint64
}

// start makes the channels and runs pump on the carrier's goroutine.
func (c *carrier) start(pump func()) {
	c.recv, c.events, c.done = make(chan Message, recvQueue), make(chan PeerEvent, eventQueue), make(chan struct{})
	c.attached = make(chan struct{}, 1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		pump()
	}()
}

// attach attaches a node (see sink) and wakes the pump to hand it what
// came before it: an attached node does not read the channels, and a
// first hello left there was never answered.
func (c *carrier) attach(msg func(Message), ev func(PeerEvent)) {
	c.sink.attach(msg, ev)
	if msg != nil {
		select {
		case c.attached <- struct{}{}:
		default: // one is pending
		}
	}
}

// handQueued hands the attached node the messages (and events, if asked)
// queued while none was; pump only (the one writer of the channels), so nothing comes
// between them and the next delivery. One that finds the node gone again
// goes back to the queue.
func (c *carrier) handQueued(events bool) {
	c.mu.RLock()
	none := c.msg == nil
	c.mu.RUnlock()
	if none {
		return // the channels' reader keeps them, in order
	}
	for len(c.recv) > 0 {
		m := <-c.recv
		if !c.message(m) {
			c.recv <- m // room: the pump alone writes, and it took one
			return
		}
	}
	for events && len(c.events) > 0 {
		if e := <-c.events; !c.event(e) {
			c.events <- e
			return
		}
	}
}

// deliver hands m to the attached node, or else queues it; false when the
// carrier stopped first.
func (c *carrier) deliver(m Message) bool {
	if len(c.recv) > 0 {
		c.handQueued(false)
	}
	if c.message(m) {
		return true
	}
	select {
	case c.recv <- m:
		return true
	case <-c.done:
		return false
	}
}

// notify hands pe to the attached node, or else queues it, or counts it
// dropped when the queue is full.
func (c *carrier) notify(pe PeerEvent) {
	if c.event(pe) {
		return
	}
	select {
	case c.events <- pe:
	default:
		c.eventDrops.Add(1)
	}
}

// stop marks the carrier done.
func (c *carrier) stop() { c.once.Do(func() { close(c.done) }) }

// Receive is the channel of received messages.
func (c *carrier) Receive() <-chan Message { return c.recv }

// Events is the channel of peer events.
func (c *carrier) Events() <-chan PeerEvent { return c.events }

// Done is closed by Close (for a Lane, also when its stack closes).
func (c *carrier) Done() <-chan struct{} { return c.done }

// EventDrops counts peer events lost because Events was not read.
func (c *carrier) EventDrops() uint64 { return c.eventDrops.Load() }

// Close stops the goroutine; it does not close the stack.
func (c *carrier) Close() error {
	c.stop()
	c.wg.Wait()
	return nil
}
