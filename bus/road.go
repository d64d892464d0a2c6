package bus

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/raet-go/raet/road"
)

// Road adapts a started road.Stack to Transport. It owns one goroutine that
// carries the stack's messages and events to the Node using it (straight
// into the node, from this goroutine), or else to its channels; Close stops
// it (the stack stays open: it is the caller's). Only one Road (or other reader)
// may read a stack's Receive and Events channels.
//
// Peer events: EventAllowed, EventAlive and EventUnreaped are PeerUp;
// EventDead is PeerDown; EventReaped, EventRemoved and EventRejected are
// PeerGone. The reason is the road event's name.
type Road struct {
	s      *road.Stack
	recv   chan Message
	events chan PeerEvent
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	sink
	// EventDrops counts peer events lost because Events was not read.
	eventDrops atomic.Uint64
}

// NewRoad starts carrying s's messages and events.
func NewRoad(s *road.Stack) *Road {
	r := &Road{s: s, recv: make(chan Message, recvQueue), events: make(chan PeerEvent, eventQueue), done: make(chan struct{})}
	r.wg.Add(1)
	go r.pump()
	return r
}

func (r *Road) pump() {
	defer r.wg.Done()
	for {
		select {
		case <-r.done:
			return
		case m := <-r.s.Receive():
			msg := Message{From: m.From, Body: m.Body}
			if r.message(msg) {
				continue
			}
			select {
			case r.recv <- msg:
			case <-r.done:
				return
			}
		case ev := <-r.s.Events():
			st, ok := roadState(ev.Kind)
			if !ok {
				continue
			}
			pe := PeerEvent{Peer: ev.Remote, State: st, Reason: ev.Kind.String(), Time: ev.Time}
			if r.event(pe) {
				continue
			}
			select {
			case r.events <- pe:
			default:
				r.eventDrops.Add(1)
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
	case road.EventReaped, road.EventRemoved, road.EventRejected:
		return PeerGone, true
	}
	return 0, false
}

// Name is the estate's name.
func (r *Road) Name() string { return r.s.Name() }

// Send sends body to the remote estate named to and returns when it is done
// (see road.Stack.Send).
func (r *Road) Send(ctx context.Context, to string, body any) error {
	return r.s.Send(ctx, to, body)
}

// Receive is the channel of received messages.
func (r *Road) Receive() <-chan Message { return r.recv }

// Events is the channel of peer events.
func (r *Road) Events() <-chan PeerEvent { return r.events }

// Done is closed by Close.
func (r *Road) Done() <-chan struct{} { return r.done }

// EventDrops counts peer events lost because Events was not read.
func (r *Road) EventDrops() uint64 { return r.eventDrops.Load() }

// Close stops the goroutine; it does not close the stack.
func (r *Road) Close() error {
	r.once.Do(func() { close(r.done) })
	r.wg.Wait()
	return nil
}
