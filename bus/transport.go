package bus

import (
	"context"
	"errors"
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
