package road

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road/internal/core"
)

// Call is a message sent with Go, and then its outcome: Go returns it, and
// Done receives it once the outcome is known, with Err set.
type Call struct {
	To   string // the remote's name
	Body any    // the body, as given to Go (a mapping, or []byte or string)
	// Err is the outcome, set before the Call goes to Done: nil when the
	// remote said done, else what Send would have returned (*TxnError
	// wrapping ErrRejected, ErrTimeout, ErrNotAllowed or ErrClosed;
	// ErrUnknownRemote; ErrClosed).
	Err error
	// Done receives the Call when its outcome is known (see Go for when it
	// has no room).
	Done chan *Call

	s       *Stack
	plain   []byte  // the serialized body
	buf     *[]byte // plain's pooled buffer, or nil (Stack.marshal); the core's once handed over
	kind    codec.BodyKind
	mid     core.MsgID
	seq     uint64 // its seq in s.mids (without a Queue: done at the outcome)
	qid     uint64 // its Queue id, with a Queue
	started time.Time
}

// Go sends body to the remote named to without waiting for its outcome,
// as net/rpc's Client.Go does: it returns once the message is queued for
// the owner goroutine, and done receives the Call once the remote says
// done or the message fails.
// It is Send without a goroutine per message in flight: a sender keeps as
// many in flight as it likes (up to Config.SendQueue), and collects their
// outcomes from one channel. The messages of Calls queued together are
// handed to the owner together, and to a raet-go peer of the fast profile
// travel together (bundles).
//
// The body is a mapping (map, struct or packet.OrderedMap), serialized
// with Config.BodyKind (or Config.Serializer), or bytes: a []byte or a
// string (exactly those types; a named one such as json.RawMessage is a
// mapping to serialize) is sent as it is, with body kind raw (bk=2), and
// received as a Message whose Raw holds it and whose Body is nil, whatever
// the receiver's Config.BodyKind. Bytes cost no encoding nor decoding;
// they are copied, so the caller may reuse them once Go returns. A
// reference estate (RaetProtocol/raet 0.6.9) receives a raw body too,
// whole or segmented, and says done; its stack hands the bytes to its
// application (in rxMsgs) where other messages are mappings, so send
// bytes to one only when its application expects them (Salt's does not).
//
// Go returns an error, and no Call, when the message could not be queued:
// ErrNotStarted, ErrClosed, ErrNotMapping, ErrQueueFull (with
// Config.FailFast), a Config.Queue's failure, or ctx's error. A body that
// is neither a mapping nor bytes is ErrNotMapping, wrapping the
// serializer's error (a *packet.BodyError, for a built-in one); a mapping
// holding a value its body kind cannot carry (packet.ErrCannotCarry: an
// integer beyond 64 bits in msgpack; packet.ErrUnsupportedValue: NaN in
// JSON) or nested too deeply is that error, wrapped. ctx bounds
// only that wait (for room in the send queue, and for a BatchSerializer's
// encoding); a message once queued runs to its outcome (bounded by
// Config.MessageTimeout). Everything else (ErrUnknownRemote too) is the
// Call's Err.
//
// done nil makes a channel with room for one outcome; an unbuffered done
// panics (the stack never blocks on it). Outcomes go to done in the order
// they are known (with a Queue, a message's done once the Queue has
// forgotten it). An outcome that finds done full is never dropped nor
// waited for: the stack keeps it, and its room in the send queue (so a
// sender that does not read done is slowed down, not allowed to grow
// memory), and tries again every millisecond, keeping each channel's
// outcomes in order. So a goroutine that calls Go many times before it
// reads done needs room in done for those outcomes, or it waits in Go
// (until ctx ends) for room that only reading done makes. Close and Shutdown fail every Call not yet done with
// ErrClosed and wait, as they linger (Config.Linger, Shutdown's ctx), for
// done to take the outcomes; once they have returned every Call's Err is
// set, and an outcome whose done had no room until then is not handed
// over (logged at slog.LevelWarn).
func (s *Stack) Go(ctx context.Context, to string, body any, done chan *Call) (*Call, error) {
	if done == nil {
		done = make(chan *Call, 1)
	} else if cap(done) == 0 {
		panic("raet: Go: done channel is unbuffered")
	}
	c := &Call{To: to, Body: body, Done: done}
	if err := s.goCall(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// Send sends body to the remote named to, and returns once the remote
// says it is done, or an error: *TxnError wrapping ErrRejected, ErrTimeout,
// ErrNotAllowed; ErrUnknownRemote; ErrNotMapping; ErrQueueFull (with
// Config.FailFast); ErrClosed; or ctx's error (the message may still
// arrive). It is Go and a wait for the Call; to keep many messages in
// flight, Go needs no goroutine for each. The body is a mapping, or bytes
// ([]byte or string) sent raw, as Go says.
func (s *Stack) Send(ctx context.Context, to string, body any) error {
	c, _ := s.waits.Get().(*Call)
	if c == nil {
		c = &Call{Done: make(chan *Call, 1)}
	}
	c.To, c.Body = to, body
	if err := s.goCall(ctx, c); err != nil {
		s.reuse(c)
		return err
	}
	return s.await(ctx, c)
}

// await waits for the outcome of c (a Call of Send's, with its own Done),
// ctx, or Close; a Call that came back is reused.
func (s *Stack) await(ctx context.Context, c *Call) error {
	select {
	case <-c.Done:
		err := c.Err
		s.reuse(c)
		return err
	case <-ctx.Done():
		return ctx.Err() // c is abandoned: its outcome goes to its own Done
	case <-s.closing:
		return ErrClosed
	}
}

// reuse keeps a Call of Send's, with its Done, for the next Send.
func (s *Stack) reuse(c *Call) {
	*c = Call{Done: c.Done}
	s.waits.Put(c)
}

// goCall serializes c's body, gives it an id (and with a Queue, stores
// it), takes its room in the send queue, and queues it for the owner.
func (s *Stack) goCall(ctx context.Context, c *Call) error {
	select {
	case <-s.started:
	default:
		return ErrNotStarted
	}
	plain, buf, kind, err := s.marshal(ctx, c.Body)
	switch {
	case errors.Is(err, ErrNotStarted), errors.Is(err, ErrClosed), ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return err
	case errors.Is(err, packet.ErrUnsupportedValue), errors.Is(err, packet.ErrBodyTooDeep):
		// A mapping whose value its kind cannot carry (an integer beyond
		// 64 bits in msgpack, NaN in JSON): not "not a mapping".
		return fmt.Errorf("raet: message body: %w", err)
	case err != nil:
		return fmt.Errorf("%w: %w", ErrNotMapping, err)
	}
	c.s, c.plain, c.buf, c.kind = s, plain, buf, kind
	if err := s.takeRoom(ctx); err != nil {
		c.unbuffer()
		return err
	}
	if s.cfg.Queue == nil {
		c.mid, c.seq = s.beginID(c.To, 0, 0)
	} else {
		ticket := s.mids.reserve(c.To)
		id, err := s.cfg.Queue.Put(c.To, c.kind, plain)
		if err != nil {
			s.mids.cancel(ticket)
			<-s.sendSem
			return fmt.Errorf("raet: queue: %w", err)
		}
		c.qid = id
		c.mid, _ = s.beginID(c.To, id, ticket)
	}
	if err := s.post(c); err != nil {
		c.unbuffer()
		return err
	}
	return nil
}

// unbuffer gives back the pooled buffer of c's body, which the core did
// not get.
func (c *Call) unbuffer() {
	core.PutBodyBuffer(c.buf)
	c.plain, c.buf = nil, nil
}

// takeRoom takes a message's room in the send queue (Config.SendQueue),
// which its Call holds until its outcome is handed over.
func (s *Stack) takeRoom(ctx context.Context) error {
	if s.cfg.FailFast {
		select {
		case s.sendSem <- struct{}{}:
			return nil
		default:
			return ErrQueueFull
		}
	}
	select {
	case s.sendSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return ErrClosed
	}
}

// post queues c, which holds its room in the send queue, for the owner,
// waking it when the queue was empty: the Calls queued meanwhile are one
// hand-off. A Call of a stack that has stopped is refused (ErrClosed): its
// room is given back and, without a Queue, its id is done (a Queue keeps
// the message for the next Start).
func (s *Stack) post(c *Call) error {
	c.started = time.Now()
	s.sendMu.Lock()
	if s.sendStopped {
		s.sendMu.Unlock()
		if s.cfg.Queue == nil {
			s.mids.done(c.To, c.seq)
		}
		<-s.sendSem
		return ErrClosed
	}
	wake := len(s.sendq) == 0
	s.sendq = append(s.sendq, c)
	s.sendMu.Unlock()
	if wake {
		select {
		case s.sendWake <- struct{}{}:
		default: // a wake-up is waiting already
		}
	}
	return nil
}

// takeSends starts, on the owner goroutine, the messages of the Calls
// queued since the last time.
func (s *Stack) takeSends() {
	s.sendMu.Lock()
	q := s.sendq
	s.sendq = s.sendSpare
	s.sendMu.Unlock()
	now := time.Now()
	for i, c := range q {
		// c may be handed over, even reused, before SendFor returns: its
		// body (and buf) are the core's from now on.
		s.core.SendFor(c.To, c.plain, c.buf, c.kind, c.mid, (*callWaiter)(c), c.started, now)
		q[i] = nil
		s.handEarly()
	}
	s.sendSpare = q[:0]
}

// callWaiter is a Call as the core's Waiter: its outcome, on the owner
// goroutine.
type callWaiter Call

// MessageDone takes the outcome. A message done that its Queue holds goes
// to the queue goroutine, which forgets it there first; any other Call is
// handed over now.
func (w *callWaiter) MessageDone(err error) {
	c := (*Call)(w)
	s := c.s
	c.Err = err
	if s.cfg.Queue != nil && err == nil {
		s.queueMu.Lock()
		wake := len(s.queueDone) == 0
		s.queueDone = append(s.queueDone, c)
		s.queueMu.Unlock()
		if wake {
			select {
			case s.queueWake <- struct{}{}:
			default:
			}
		}
		return
	}
	if s.cfg.Queue == nil {
		s.mids.done(c.To, c.seq) // sent once; the caller may send the body again as a new message
	}
	s.handOver(c)
}

// handOver gives c to its Done and its room in the send queue back; when
// Done has no room, or holds back outcomes before c's, c waits in spill
// (holding its room) for retrySpill.
func (s *Stack) handOver(c *Call) {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	if !slices.ContainsFunc(s.spill, func(o *Call) bool { return o.Done == c.Done }) {
		select {
		case c.Done <- c:
			<-s.sendSem
			return
		default:
		}
	}
	s.spill = append(s.spill, c)
}

// retrySpill hands over the spilled outcomes whose Done has room now, in
// order per channel, and reports whether any still wait.
func (s *Stack) retrySpill() bool {
	s.spillMu.Lock()
	defer s.spillMu.Unlock()
	if len(s.spill) == 0 {
		return false
	}
	var full []chan *Call
	k := 0
	for _, c := range s.spill {
		if !slices.Contains(full, c.Done) {
			select {
			case c.Done <- c:
				<-s.sendSem
				continue
			default:
				full = append(full, c.Done)
			}
		}
		s.spill[k] = c
		k++
	}
	clear(s.spill[k:])
	s.spill = s.spill[:k]
	return k > 0
}

// endCalls, once every goroutine has stopped, settles the Calls left: the
// done ones its Queue must forget, and the ones still queued for the owner
// (ErrClosed); it refuses any Call posted from now on, and hands over the
// outcomes as their Done channels make room, until ctx (Close's linger)
// ends; it logs what is left then.
func (s *Stack) endCalls(ctx context.Context) {
	if s.cfg.Queue != nil {
		s.forgetQueued()
	}
	s.sendMu.Lock()
	s.sendStopped = true
	q := s.sendq
	s.sendq = nil
	s.sendMu.Unlock()
	for _, c := range q {
		if s.cfg.Queue == nil {
			s.mids.done(c.To, c.seq)
		}
		c.Err = ErrClosed
		s.handOver(c)
	}
	for s.retrySpill() {
		t := time.NewTimer(deliverRetry)
		select {
		case <-t.C:
			continue
		case <-ctx.Done():
			t.Stop()
		}
		s.spillMu.Lock()
		n := len(s.spill)
		s.spill = nil
		s.spillMu.Unlock()
		s.cfg.Logger.Warn("raet: outcomes of Go not handed over: their Done channels had no room while the stack stopped (each Call's Err is set)", "calls", n)
		return
	}
}
