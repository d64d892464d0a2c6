package road

import (
	"context"
	"runtime"
	"time"

	"github.com/raet-go/raet/road/internal/core"
)

// run is the owner goroutine: the only one that touches the core.
func (s *Stack) run() {
	defer s.wg.Done()
	defer close(s.outbound) // the writer writes what is in it, then stops
	defer s.drainKeep()
	c := s.core
	var alarm alarm
	defer alarm.stop()
	defer c.Shutdown()
	var d rxDatagram    // reused: the core keeps no pointer into it
	var retry time.Time // deliveries or decodes wait for room
	for {
		select {
		case <-s.closing:
			return
		case d = <-s.inbound:
			now := time.Now()
			c.Receive(&d.in, now)
			s.bufs.Put(d.buf)
			s.moreInbound(&d, now) // what else has arrived, before flushing
		case f := <-s.cmds:
			f(c)
			s.moreCommands()
		case <-s.sendWake:
			s.takeSends()
			s.moreCommands()
		case <-alarm.set(earliest(c.Deadline(), retry)):
			alarm.rang()
			now := time.Now()
			// What arrived meanwhile first: an owner that wakes late (a
			// loaded machine) finds the timer and the answer it waits for
			// both ready, and a select takes either; the answer must win,
			// or the timer resends what was answered already.
			s.moreInbound(&d, now)
			c.Tick(now)
		case <-s.durableC:
			s.takeDurable()
		}
		s.core.PublishKeys()
		var ok bool
		if retry, ok = s.flush(); !ok {
			return
		}
	}
}

// alarm is the owner's timer. armed is when it rings (zero: stopped); it is
// set again only when that changes, not on every turn: most turns (a
// datagram, a Send) leave the next deadline where it was. Since Go 1.23 a
// timer Stop or Reset leaves nothing stale in its channel.
type alarm struct {
	t     *time.Timer
	armed time.Time
}

// set makes the alarm ring at wake (zero: never) and returns its channel,
// nil when it is stopped.
func (a *alarm) set(wake time.Time) <-chan time.Time {
	if !wake.Equal(a.armed) {
		switch {
		case wake.IsZero():
			a.t.Stop()
		case a.t == nil:
			a.t = time.NewTimer(max(time.Until(wake), 0))
		default:
			a.t.Reset(max(time.Until(wake), 0))
		}
		a.armed = wake
	}
	if a.armed.IsZero() {
		return nil
	}
	return a.t.C
}

// rang says the alarm rang: it is stopped until set again.
func (a *alarm) rang() { a.armed = time.Time{} }

func (a *alarm) stop() {
	if a.t != nil {
		a.t.Stop()
	}
}

// moreInbound hands the core the datagrams that wait in inbound (up to
// 64), through d, as received at now.
func (s *Stack) moreInbound(d *rxDatagram, now time.Time) {
	for range 64 {
		select {
		case *d = <-s.inbound:
			s.core.Receive(&d.in, now)
			s.bufs.Put(d.buf)
			s.handEarly()
		default:
			return
		}
	}
}

// moreCommands runs the commands and starts the sends queued meanwhile
// (up to 64 hand-offs) before the owner flushes, so that the messages go
// out together (bundled, to raet-go peers of the fast profile). While
// messages wait for a bundle it yields once first (runtime.Gosched, no
// timer): senders that are about to queue theirs get to. With 16 Sends of
// 64 B in flight that is 0.26 datagrams a message (both ways) instead of
// 1.2 (BenchmarkRoad).
func (s *Stack) moreCommands() {
	c := s.core
	yielded := false
	for range 64 {
		select {
		case f := <-s.cmds:
			f(c)
			continue
		case <-s.sendWake:
			s.takeSends()
			continue
		default:
		}
		if yielded || !c.Bundling() {
			return
		}
		runtime.Gosched()
		yielded = true
	}
}

// earliest returns the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// flush hands the core's output to the receivers, the writer and the event
// readers, and the bodies to decode to the decoder goroutine. It returns
// when to try again with what found no room (zero: all went), and false
// when Close's linger ran out. Deliveries go first: the room they free
// delivers the messages that waited for it, whose dones then go out with
// the rest.
func (s *Stack) flush() (time.Time, bool) {
	c := s.core
	var retry time.Time
	n := 0
	deliveries := c.Deliveries()
	for i := range deliveries {
		select {
		case s.recv <- messageOf(&deliveries[i]):
			n++
			continue
		default:
		}
		break
	}
	c.Delivered(n)
	if len(c.Deliveries()) > 0 {
		retry = time.Now().Add(deliverRetry)
	}
	if c.OutLen() > 0 && !s.handOut() {
		return time.Time{}, false
	}
	events := c.Events()
	for i := range events {
		select {
		case s.events <- eventOf(&events[i]):
		default:
			s.eventDrops++
		}
	}
	c.ClearEvents()
	if len(c.Decodes()) > 0 && !s.handDecodes() {
		retry = earliest(retry, time.Now().Add(time.Millisecond))
	}
	if s.retrySpill() {
		retry = earliest(retry, time.Now().Add(deliverRetry))
	}
	return retry, true
}

// handEarly sends what the core made so far (direct, or through the
// writer), in the middle of a turn of the owner (sends to start, datagrams
// to take), once it is more than a small flush and no message waits for
// the bundles of this moment. So a segmented message leaves before the
// owner seals the next one, and the receiver takes it on meanwhile, rather
// than the turn's messages waiting for its end to leave together: then the
// stages of a message's way (the owner's sealing, the system call, the
// receiver's reader and owner, the done's way back) took turns with the
// whole window in one of them, a convoy that kept one core busy of two
// (16 messages of 16 KiB in flight: each turn sealed all 16, 208
// datagrams, in 29% of the turns).
func (s *Stack) handEarly() {
	if c := s.core; c.Ready() > maxDirect && !c.Bundling() {
		s.handOut() // false: Close's linger ran out, which the flush at the turn's end finds too
	}
}

// do runs f on the owner goroutine.
func (s *Stack) do(ctx context.Context, f func(*core.Core)) error {
	select {
	case <-s.started:
	default:
		return ErrNotStarted
	}
	select {
	case s.cmds <- f:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return ErrClosed
	}
}

// wait waits for a result, ctx or Close.
func (s *Stack) wait(ctx context.Context, res <-chan error) error {
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return ErrClosed
	}
}

// keepDurable is the keep writer's OnDurable: it tells the owner.
func (s *Stack) keepDurable(seq uint64) {
	s.durable.Store(seq)
	select {
	case s.durableC <- struct{}{}:
	default: // a token is waiting: the owner reads the newest seq
	}
}

// takeDurable reports to the core what the keep writer made durable.
func (s *Stack) takeDurable() {
	s.core.KeepDurable(s.durable.Load(), s.kw.Err(), time.Now())
}

// drainKeep waits, as Close lingers, for the keep writes the core made to
// be durable and sends what they held back, so that a join answered is
// kept and a join kept is answered.
func (s *Stack) drainKeep() {
	for s.core.KeepPending() {
		select {
		case <-s.durableC:
			s.takeDurable()
			s.core.PublishKeys()
			if _, ok := s.flush(); !ok {
				return
			}
		case <-s.abort:
			return
		}
	}
}
