package bus

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
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
	s      *lane.Stack
	recv   chan Message
	events chan PeerEvent
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup

	sink
	mu    sync.Mutex
	heard map[string]bool // yards heard from, at most maxHeard
	order []string        // heard, oldest first, to forget the oldest

	eventDrops atomic.Uint64
}

// maxHeard bounds the yards a Lane remembers having heard from.
const maxHeard = lane.DefaultMaxYards

// NewLane starts carrying s's messages.
func NewLane(s *lane.Stack) *Lane {
	l := &Lane{s: s, recv: make(chan Message, recvQueue), events: make(chan PeerEvent, eventQueue), done: make(chan struct{}),
		heard: map[string]bool{}}
	l.wg.Add(1)
	go l.pump()
	return l
}

func (l *Lane) pump() {
	defer l.wg.Done()
	for {
		select {
		case <-l.done:
			return
		case m, ok := <-l.s.Receive():
			if !ok {
				l.stop()
				return
			}
			if l.hear(m.From) {
				l.peerEvent(m.From, PeerUp, "first message")
			}
			msg := Message{From: m.From, Body: m.Body}
			if l.message(msg) {
				continue
			}
			select {
			case l.recv <- msg:
			case <-l.done:
				return
			}
		}
	}
}

// stop marks the adapter done (Close, or the stack closed under it).
func (l *Lane) stop() { l.once.Do(func() { close(l.done) }) }

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
	pe := PeerEvent{Peer: peer, State: st, Reason: reason, Time: time.Now()}
	if l.event(pe) {
		return
	}
	select {
	case l.events <- pe:
	default:
		l.eventDrops.Add(1)
	}
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

// Receive is the channel of received messages.
func (l *Lane) Receive() <-chan Message { return l.recv }

// Events is the channel of peer events.
func (l *Lane) Events() <-chan PeerEvent { return l.events }

// Done is closed by Close, or when the stack closes.
func (l *Lane) Done() <-chan struct{} { return l.done }

// EventDrops counts peer events lost because Events was not read.
func (l *Lane) EventDrops() uint64 { return l.eventDrops.Load() }

// Close stops the goroutine; it does not close the stack.
func (l *Lane) Close() error {
	l.stop()
	l.wg.Wait()
	return nil
}
