package bus

import (
	"context"
	"errors"

	"github.com/raet-go/raet/road"
)

// Road adapts a started road.Stack to Transport. It owns one goroutine that
// carries the stack's messages and events to the Node using it (straight
// into the node, from this goroutine), or else to its channels; Close stops
// it (the stack stays open: it is the caller's). Only one Road (or other reader)
// may read a stack's Receive and Events channels.
//
// Peer events: EventAllowed, EventAlive and EventUnreaped are PeerUp;
// EventDead is PeerDown; EventReaped, EventRemoved, EventForgotten and
// EventRejected are PeerGone. The reason is the road event's name.
type Road struct {
	s *road.Stack
	carrier
}

// NewRoad starts carrying s's messages and events.
func NewRoad(s *road.Stack) *Road {
	r := &Road{s: s}
	r.start(r.pump)
	return r
}

func (r *Road) pump() {
	for {
		select {
		case <-r.done:
			return
		case <-r.attached:
			r.handQueued(true)
		case m, ok := <-r.s.Receive():
			if !ok || !r.deliver(Message{From: m.From, Body: m.Body}) {
				return
			}
		case ev := <-r.s.Events():
			if st, ok := roadState(ev.Kind); ok {
				r.notify(PeerEvent{Peer: ev.Remote, State: st, Reason: ev.Kind.String(), Time: ev.Time})
			}
		}
	}
}

func roadState(k road.EventKind) (PeerState, bool) {
	switch k {
	case road.EventAllowed, road.EventAlive, road.EventUnreaped:
		return PeerUp, true
	case road.EventDead:
		return PeerDown, true
	case road.EventReaped, road.EventRemoved, road.EventForgotten, road.EventRejected:
		return PeerGone, true
	}
	return 0, false
}

// Name is the estate's name.
func (r *Road) Name() string { return r.s.Name() }

// Send sends body to the remote estate named to and returns when it is done
// (see road.Stack.Send). A remote the stack does not know, or forgot, gives
// an error wrapping both the road's and ErrUnknownPeer.
func (r *Road) Send(ctx context.Context, to string, body any) error {
	err := r.s.Send(ctx, to, body)
	if err != nil && (errors.Is(err, road.ErrUnknownRemote) || errors.Is(err, road.ErrForgotten)) {
		return errors.Join(err, ErrUnknownPeer)
	}
	return err
}
