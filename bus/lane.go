package bus

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/raet-go/raet/lane"
)

// Lane adapts a started lane.Stack to Transport. A lane has no handshake and
// no presence, so the adapter makes the peer events itself: PeerUp
// ("first message") when a yard it has not heard from sends, PeerGone ("yard
// gone") when a Send finds the yard's socket gone (lane.ErrYardGone). The
// Node's heartbeats (Config.Heartbeat) notice a yard that is silent or that
// restarted. It owns one goroutine that carries messages, as Road's does,
// and that Close stops; the stack stays open.
type Lane struct {
	s *lane.Stack
	carrier

	mu    sync.Mutex
	heard map[string]bool // yards heard from, at most maxHeard
	order []string        // heard, oldest first, to forget the oldest
}

// maxHeard bounds the yards a Lane remembers having heard from.
const maxHeard = lane.DefaultMaxYards

// NewLane starts carrying s's messages.
func NewLane(s *lane.Stack) *Lane {
	l := &Lane{s: s, heard: map[string]bool{}}
	l.start(l.pump)
	return l
}

func (l *Lane) pump() {
	for {
		select {
		case <-l.done:
			return
		case m, ok := <-l.s.Receive():
			if !ok {
				l.stop() // the stack closed under the adapter
				return
			}
			if l.hear(m.From) {
				l.peerEvent(m.From, PeerUp, "first message")
			}
			if !l.deliver(Message{From: m.From, Body: m.Body}) {
				return
			}
		}
	}
}

// hear records that yard spoke and reports whether it is new.
func (l *Lane) hear(yard string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.heard[yard] {
		return false
	}
	if len(l.order) >= maxHeard {
		delete(l.heard, l.order[0])
		l.order = l.order[1:]
	}
	l.heard[yard] = true
	l.order = append(l.order, yard)
	return true
}

func (l *Lane) forget(yard string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.heard[yard] {
		return false
	}
	delete(l.heard, yard)
	for i, y := range l.order {
		if y == yard {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	return true
}

func (l *Lane) peerEvent(peer string, st PeerState, reason string) {
	l.notify(PeerEvent{Peer: peer, State: st, Reason: reason, Time: time.Now()})
}

// Name is the yard's name.
func (l *Lane) Name() string { return l.s.Name() }

// Send sends body to the yard named to (see lane.Stack.Send). A yard whose
// socket is gone gives an error wrapping both lane.ErrYardGone and
// ErrUnknownPeer, and a PeerGone event if it had been heard from.
func (l *Lane) Send(ctx context.Context, to string, body any) error {
	err := l.s.Send(ctx, to, body)
	if err != nil && errors.Is(err, lane.ErrYardGone) {
		if l.forget(to) {
			l.peerEvent(to, PeerGone, "yard gone")
		}
		return errors.Join(err, ErrUnknownPeer)
	}
	return err
}
