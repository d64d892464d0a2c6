package lane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/queue"
)

// Message is a message received from a yard.
type Message struct {
	// From is the name of the yard that sent it (the head field sn).
	From string
	// Kind is how the body was serialized: a built-in pack kind or a
	// serializer plugin's (see BodyKindOf).
	Kind codec.PackKind
	// Body is the decoded body; an empty body gives an empty map. Values
	// have the types package packet documents for its serializers.
	Body map[string]any
	// Raw is the body as it came, its pages joined: compact JSON, msgpack,
	// CBOR or a plugin's encoding according to Kind. Decode it into your
	// own types, or keep key order with packet.OrderedMap. The stack does
	// not keep it.
	Raw []byte
}

// Stack states.
const (
	stateNew int32 = iota
	stateStarted
	stateClosed
)

// A Send waiting for a busy destination waits on the socket (woken when a
// receiver consumes one of our datagrams) for a slice of time, then tries
// again, checks its deadline and lets the next waiting Send have a turn.
// The slice starts short and doubles: the Go scheduler looks at socket
// readiness only when a P is idle, but runs timers at every scheduling
// round, so on a busy machine the timer is the faster wake-up; a
// destination that stays full is polled every retrySlice at most.
const (
	firstRetrySlice = 25 * time.Microsecond
	retrySlice      = 2 * time.Millisecond
)

// Stack is a yard on a lane: one AF_UNIX datagram socket at
// <Dir>/<Lane>.<Name>.uxd that sends pages to other yards and receives
// theirs. Create it with New, bind it with Start, stop it with Close. Its
// methods are safe for concurrent use.
type Stack struct {
	cfg     Config
	path    string
	ser     packet.Serializer
	log     *slog.Logger
	ctr     counters
	yards   yardTable
	in      *inbound
	recv    chan Message
	closing chan struct{}
	// ctx ends when the stack stops (Close, or a socket that failed for
	// good), with the reason as its cause: plugin calls, resending.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	// sendMu orders Sends against Close: a Send counts itself in sending
	// under a read lock, Close marks the stack closed under the write lock
	// and then waits (Config.Linger) for those counted.
	sendMu  sync.RWMutex
	sending sync.WaitGroup

	// The decoder goroutine (decode.go): dec is made by the reader when
	// it first needs it; deferred counts the messages handed to it and
	// not yet delivered.
	dec      chan Message
	deferred atomic.Int64

	mu       sync.Mutex // serializes Start and Close
	state    atomic.Int32
	sock     *sock
	retrying atomic.Int64
}

// New returns a stack for cfg (nil means the zero Config). It checks the
// configuration and starts nothing: no socket, no goroutine.
func New(cfg *Config) (*Stack, error) {
	c, err := populate(cfg)
	if err != nil {
		return nil, err
	}
	ser, err := sendSerializer(&c)
	if err != nil {
		return nil, err
	}
	path := SocketPath(c.Dir, c.Lane, c.Name)
	if len(path) > maxPathLen {
		return nil, fmt.Errorf("%w: %q is %d bytes, at most %d", ErrPathTooLong, path, len(path), maxPathLen)
	}
	s := &Stack{
		cfg:     c,
		path:    path,
		ser:     ser,
		log:     c.Logger,
		recv:    make(chan Message, c.ReceiveQueue),
		closing: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.yards = yardTable{
		m:      make(map[string]*yard),
		max:    c.MaxYards,
		self:   path,
		dir:    c.Dir,
		lane:   c.Lane,
		ctr:    &s.ctr,
		log:    c.Logger,
		newSID: newSessionID,
	}
	s.in = newInbound(&s.cfg, s.yards.source, &s.ctr)
	return s, nil
}

// Name returns the yard's name.
func (s *Stack) Name() string { return s.cfg.Name }

// Lane returns the lane's name.
func (s *Stack) Lane() string { return s.cfg.Lane }

// Path returns the yard's socket path.
func (s *Stack) Path() string { return s.path }

// Config returns the configuration in use, defaults filled in.
func (s *Stack) Config() Config { return s.cfg }

// Receive returns the channel of received messages. It is closed when the
// stack is closed. A consumer that falls behind holds up the stack's
// reading, so senders see back-pressure; nothing is dropped for it.
func (s *Stack) Receive() <-chan Message { return s.recv }

// Counters returns a snapshot of the stack's counters.
func (s *Stack) Counters() Counters { return s.ctr.snapshot() }

// Yards returns the names of the remote yards the stack knows, in no
// particular order.
func (s *Stack) Yards() []string { return s.yards.names() }

// Start creates the socket directory if needed (mode 0700), removes a
// stale socket file (after a connect probe shows nobody listens on it),
// binds the yard's socket (mode 0600) and starts the reader goroutine. A
// live socket at the path is an error wrapping ErrYardInUse and is left
// alone. Errors are *BindError. With a Config.Queue, Start reads the
// messages it holds and sends them in a goroutine (see Config.Queue); a
// queue that cannot list them is logged, not an error.
func (s *Stack) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state.Load() {
	case stateStarted:
		return ErrStarted
	case stateClosed:
		return ErrClosed
	}
	if err := s.makeDir(); err != nil {
		return err
	}
	sk, err := listen(s.path, s.log, &s.ctr)
	if err != nil {
		return err
	}
	s.sock = sk
	s.wg.Add(1)
	go s.readLoop()
	// Before the state is started: no Send has put a message yet, so the
	// pending ones are all from an earlier run.
	if q := s.cfg.Queue; q != nil {
		pending, err := q.Pending()
		switch {
		case err != nil:
			s.log.Error("lane queue: cannot list the messages of an earlier run; they stay queued", "yard", s.cfg.Name, "err", err)
		case len(pending) > 0:
			s.wg.Add(1)
			go s.resend(pending)
		}
	}
	s.state.Store(stateStarted)
	s.log.Info("lane yard started", "yard", s.cfg.Name, "path", s.path, "pack", s.cfg.PackKind.String())
	return nil
}

// makeDir creates the socket directory with mode 0700 if it is missing.
func (s *Stack) makeDir() error {
	dir := s.cfg.Dir
	fi, err := os.Stat(dir)
	switch {
	case err == nil:
		if !fi.IsDir() {
			return &BindError{Path: dir, Op: "mkdir", Err: fs.ErrExist}
		}
		if m := fi.Mode(); m&0o022 != 0 {
			if !s.cfg.AllowSharedDir {
				return &BindError{Path: dir, Op: "check dir", Err: fmt.Errorf("%w: mode %s", ErrSharedDir, m)}
			}
			s.log.Warn("lane socket directory is writable by others (Config.AllowSharedDir): another user can bind a yard's name while it is not running and receive its pages",
				"dir", dir, "mode", m.String(), "sticky", m&fs.ModeSticky != 0)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return &BindError{Path: dir, Op: "mkdir", Err: err}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &BindError{Path: dir, Op: "mkdir", Err: err}
	}
	if err := os.Chmod(dir, 0o700); err != nil { // whatever the umask
		return &BindError{Path: dir, Op: "mkdir", Err: err}
	}
	return nil
}

// Close stops the stack: new Sends fail with ErrClosed, the Sends in
// progress get up to Config.Linger to write their pages (so no receiver is
// left with half a book), then the others fail with ErrClosed, the reader
// goroutine stops, the socket is closed and its file removed (if it is
// still ours), and the Receive channel is closed. Close is idempotent; a
// second call returns once the first is done.
func (s *Stack) Close() error { return s.stop(ErrClosed) }

func (s *Stack) stop(cause error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendMu.Lock()
	prev := s.state.Load()
	s.state.Store(stateClosed)
	s.sendMu.Unlock()
	if prev == stateClosed {
		return nil
	}
	if prev == stateStarted {
		done := make(chan struct{})
		go func() { s.sending.Wait(); close(done) }()
		t := time.NewTimer(s.cfg.Linger)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	close(s.closing)
	s.cancel(cause)
	var err error
	if prev == stateStarted {
		err = s.sock.close()
		s.sending.Wait()
		s.wg.Wait()
		if uerr := s.sock.unlink(); uerr != nil {
			err = errors.Join(err, &BindError{Path: s.path, Op: "remove", Err: uerr})
		}
		s.log.Info("lane yard closed", "yard", s.cfg.Name, "path", s.path, "why", cause)
	}
	close(s.recv)
	return err
}

// Done returns a channel that is closed when the stack stops: Close, or a
// socket that failed for good (see Err).
func (s *Stack) Done() <-chan struct{} { return s.ctx.Done() }

// Err returns nil while the stack runs (or before Start), then why it
// stopped: ErrClosed after Close, or an error wrapping ErrSocket and the
// system's error when its socket failed for good.
func (s *Stack) Err() error { return context.Cause(s.ctx) }

// fail stops the stack after its socket failed for good; it is called by
// the reader goroutine, which returns right after.
func (s *Stack) fail(err error) {
	s.log.Error("lane socket failed; the yard stops", "yard", s.cfg.Name, "path", s.path, "err", err)
	go s.stop(fmt.Errorf("%w: %w", ErrSocket, err))
}

// readLoop is the reader goroutine: it owns s.in.
func (s *Stack) readLoop() {
	defer s.wg.Done()
	buf := make([]byte, MaxPageSize+1) // one more, to see oversize datagrams
	var deadline time.Time
	fails := 0
	for {
		n, from, err := s.sock.read(buf)
		switch {
		case err == nil:
			fails = 0
			if tap := s.cfg.Tap; tap != nil {
				tap(TapPacket{Local: s.path, Remote: from, Time: time.Now(), Data: buf[:n]})
			}
			if m, ok := s.in.page(buf[:n], from); ok {
				if m.Body == nil || s.deferred.Load() != 0 {
					if !s.toDecoder(m) {
						return
					}
				} else {
					select {
					case s.recv <- m:
					case <-s.closing:
						return
					}
				}
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			s.in.expire(s.in.now())
		case s.state.Load() == stateClosed:
			return // Close closed the socket
		case !isTransient(err):
			s.fail(err)
			return
		default:
			fails++
			s.log.Warn("lane read failed", "yard", s.cfg.Name, "err", err)
			t := time.NewTimer(min(time.Duration(fails)*10*time.Millisecond, time.Second))
			select {
			case <-t.C:
			case <-s.closing:
				t.Stop()
				return
			}
		}
		// Wake up when the oldest unfinished book expires.
		if next := s.in.nextExpiry(); !next.Equal(deadline) {
			if err := s.sock.setReadDeadline(next); err == nil {
				deadline = next
			}
		}
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func putBuf(b *[]byte) {
	if cap(*b) <= 4*MaxPageSize {
		*b = (*b)[:0]
		bufPool.Put(b)
	}
}

// Send sends body to the yard named yard on this stack's lane, at
// <Dir>/<Lane>.<yard>.uxd, or at the address it last sent from. body must
// be a mapping (map[string]any, packet.OrderedMap to keep key order, a
// struct, ...); it is serialized with Config.Serializer, or the built-in
// serializer of Config.PackKind, and cut into pages if needed.
//
// Send returns once every page is in the destination's socket queue (the
// kernel delivers unix datagrams reliably and in order), or with an error:
// the stack never drops a message silently. When the destination's queue
// is full (EAGAIN, ENOBUFS) Send waits for room, in order behind other
// Sends to the same yard, until ctx is done or Config.SendTimeout passes;
// then it fails with ErrBusy. A destination whose socket vanished
// (ECONNREFUSED, ENOENT) fails with ErrYardGone and is forgotten. Errors
// are *SendError. With a Config.Queue, the message is put in it first and
// marked done once sent; one that fails after the put stays queued
// (SendError.Queued) for the next Start.
func (s *Stack) Send(ctx context.Context, yard string, body any) error {
	s.sendMu.RLock()
	switch s.state.Load() {
	case stateNew:
		s.sendMu.RUnlock()
		return s.sendFailed(yard, -1, 0, ErrNotStarted)
	case stateClosed:
		s.sendMu.RUnlock()
		return s.sendFailed(yard, -1, 0, ErrClosed)
	}
	s.sending.Add(1)
	s.sendMu.RUnlock()
	defer s.sending.Done()
	if err := ctx.Err(); err != nil {
		return s.sendFailed(yard, -1, 0, err)
	}
	return s.sendBook(ctx, yard, s.cfg.PackKind, body, nil, s.cfg.Queue)
}

// sendBook sends a message to yard: body serialized by s.ser, or, when
// body is nil and raw is not, raw as it is, of pack kind pk. With q, the
// message is put in q before the first page and marked done after the
// last.
func (s *Stack) sendBook(ctx context.Context, yard string, pk codec.PackKind, body any, raw []byte, q queue.Queue) error {
	serialized := body == nil && raw != nil
	if _, costly := s.ser.(packet.BatchSerializer); costly && !serialized {
		// A plugin's call: made before taking the yard, so that the other
		// Sends to it do not wait on it.
		var err error
		if raw, err = s.ser.Marshal(nil, body); err != nil {
			return s.sendFailed(yard, -1, 0, err)
		}
		serialized = true
	}
	y, err := s.lockYard(ctx, yard)
	if err != nil {
		return s.sendFailed(yard, -1, 0, err)
	}
	defer y.unlock()

	bp := bufPool.Get().(*[]byte)
	defer putBuf(bp)
	bid := y.nextBid()
	h := codeclane.Head{
		PackKind:    pk,
		Source:      s.cfg.Name,
		Destination: yard,
		SessionID:   y.sid,
		BookID:      bid,
		PageCount:   1,
	}
	buf, err := codeclane.Append((*bp)[:0], &h)
	if err != nil {
		return s.sendFailed(yard, -1, 0, err)
	}
	hl := len(buf)
	if serialized {
		buf = append(buf, raw...)
	} else if buf, err = s.ser.Marshal(buf, body); err != nil {
		return s.sendFailed(yard, -1, 0, err)
	}
	*bp = buf
	size := len(buf) - hl
	if size > s.cfg.MaxMessageSize {
		return s.sendFailed(yard, -1, 0, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, size, s.cfg.MaxMessageSize))
	}
	section, count, err := paginate(hl, size, MaxPageSize)
	if err != nil {
		return s.sendFailed(yard, -1, 0, err)
	}
	y.bid = bid

	var qid uint64
	if q != nil {
		bk, _ := BodyKindOf(pk) // pk came from PackKindOf
		if qid, err = q.Put(yard, bk, buf[hl:]); err != nil {
			return s.sendFailed(yard, -1, 0, fmt.Errorf("%w: put: %w", ErrQueue, err))
		}
		*bp = nil // the queue may keep buf: not reused
	}
	if page, err := s.writeBook(ctx, y, &h, buf, hl, section, count); err != nil {
		se := s.sendFailed(yard, page, count, err)
		se.Queued = q != nil
		return se
	}
	s.ctr.messagesOut.Add(1)
	if q != nil {
		if err := q.Done(qid); err != nil {
			s.ctr.sendErr.Add(1)
			return &SendError{Yard: yard, Page: -1, Queued: true,
				Err: fmt.Errorf("%w: the message was sent, but marking it done failed (it is sent again after the next Start): %w", ErrQueue, err)}
		}
	}
	return nil
}

// writeBook writes the pages of the book in buf: the head h (for page 0
// of 1) of hl bytes, then the body, cut in count sections of section
// bytes. It returns the index of the page that failed.
func (s *Stack) writeBook(ctx context.Context, y *yard, h *codeclane.Head, buf []byte, hl, section, count int) (int, error) {
	var deadline time.Time // set when a retry first needs it
	if count == 1 {
		return 0, s.write(ctx, y, buf, &deadline)
	}
	pp := bufPool.Get().(*[]byte)
	defer putBuf(pp)
	data := buf[hl:]
	for i := range count {
		h.PageNumber, h.PageCount = uint16(i), uint16(count)
		page, err := codeclane.Append((*pp)[:0], h)
		if err != nil {
			return i, err
		}
		page = append(page, data[i*section:min((i+1)*section, len(data))]...)
		*pp = page
		if err := s.write(ctx, y, page, &deadline); err != nil {
			return i, err
		}
	}
	return count - 1, nil
}

// resend is the goroutine of Start that sends the messages a queue kept
// from an earlier run, oldest first, and marks each done when sent. After
// a message to a yard fails, the later ones to that yard stay queued too,
// so that they keep their order.
func (s *Stack) resend(pending []queue.Message) {
	defer s.wg.Done()
	q := s.cfg.Queue
	failed := map[string]int{} // yard: messages left queued
	sent := 0
	for _, m := range pending {
		if s.ctx.Err() != nil {
			return
		}
		if _, ok := failed[m.Remote]; ok {
			failed[m.Remote]++
			continue
		}
		pk, ok := PackKindOf(m.Kind)
		if !ok {
			s.log.Error("lane queue: a message of a body kind a lane cannot carry stays queued", "yard", s.cfg.Name,
				"to", m.Remote, "id", m.ID, "kind", m.Kind.String())
			continue
		}
		if err := s.sendBook(s.ctx, m.Remote, pk, nil, nonNil(m.Body), nil); err != nil {
			if s.ctx.Err() != nil {
				return
			}
			failed[m.Remote] = 1
			s.log.Warn("lane queue: a message of an earlier run not sent; it stays queued, with the later ones to its yard, until the next Start",
				"yard", s.cfg.Name, "to", m.Remote, "id", m.ID, "err", err)
			continue
		}
		s.ctr.resent.Add(1)
		sent++
		if err := q.Done(m.ID); err != nil {
			s.log.Error("lane queue: a message of an earlier run was sent, but marking it done failed", "yard", s.cfg.Name,
				"to", m.Remote, "id", m.ID, "err", err)
		}
	}
	left := 0
	for _, n := range failed {
		left += n
	}
	s.log.Info("lane queue: messages of an earlier run sent", "yard", s.cfg.Name, "sent", sent, "of", len(pending),
		"left_queued", left, "yards_failed", len(failed))
}

// nonNil returns b, or an empty non-nil slice for nil (an empty body).
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// lockYard finds (or makes) the record of the yard named name and takes
// its send lock, retrying when the record was removed meanwhile.
func (s *Stack) lockYard(ctx context.Context, name string) (*yard, error) {
	for range 3 {
		y, err := s.yards.forSend(name)
		if err != nil {
			return nil, err
		}
		if err := y.lock(ctx, s.closing); err != nil {
			return nil, err
		}
		if !y.gone.Load() {
			return y, nil
		}
		y.unlock()
	}
	return nil, ErrYardGone
}

func (s *Stack) sendFailed(yard string, page, pages int, err error) *SendError {
	s.ctr.sendErr.Add(1)
	return &SendError{Yard: yard, Page: page, Pages: pages, Err: err}
}

// write writes one page, retrying while the destination is busy.
func (s *Stack) write(ctx context.Context, y *yard, p []byte, deadline *time.Time) error {
	var at time.Time // a tapped page's time: when its sending began
	if s.cfg.Tap != nil {
		at = time.Now()
	}
	err := s.sock.send(p, y.to)
	if err != nil && isBusy(err) {
		err = s.retry(ctx, y, p, deadline)
	}
	if err == nil {
		s.ctr.pagesOut.Add(1)
		s.ctr.bytesOut.Add(uint64(len(p)))
		if tap := s.cfg.Tap; tap != nil {
			tap(TapPacket{Out: true, Local: s.path, Remote: y.path, Time: at, Data: p})
		}
		return nil
	}
	switch {
	case s.state.Load() == stateClosed, errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrClosed):
		return ErrClosed // a file closing error is not os.ErrClosed
	case isGone(err):
		s.yards.remove(y)
		return fmt.Errorf("%w: %w", ErrYardGone, err)
	case isMsgSize(err):
		return fmt.Errorf("%w: %w", ErrTooLarge, err)
	}
	return err
}

// retry is the bounded retry queue: at most Config.RetryQueue Sends wait
// here at once, one of them at a time on the socket, each until its
// deadline (ctx and Config.SendTimeout).
func (s *Stack) retry(ctx context.Context, y *yard, p []byte, deadline *time.Time) error {
	if s.retrying.Add(1) > int64(s.cfg.RetryQueue) {
		s.retrying.Add(-1)
		return fmt.Errorf("%w: retry queue full (%d sends waiting)", ErrBusy, s.cfg.RetryQueue)
	}
	defer s.retrying.Add(-1)
	if deadline.IsZero() {
		*deadline = time.Now().Add(s.cfg.SendTimeout)
		if d, ok := ctx.Deadline(); ok && d.Before(*deadline) {
			*deadline = d
		}
	}
	for slice := firstRetrySlice; ; slice = min(2*slice, retrySlice) {
		s.ctr.retries.Add(1)
		if err := s.acquireWait(ctx, *deadline); err != nil {
			return err
		}
		now := time.Now()
		if !now.Before(*deadline) {
			<-s.sock.wait
			return s.busy(ctx)
		}
		until := now.Add(slice)
		if deadline.Before(until) {
			until = *deadline
		}
		err := s.sock.sendWait(p, y.to, until)
		<-s.sock.wait
		switch {
		case err == nil:
			return nil
		case !isBusy(err) && !errors.Is(err, os.ErrDeadlineExceeded):
			return err
		case ctx.Err() != nil:
			return s.busy(ctx)
		}
	}
}

// acquireWait takes the turn to wait on the socket.
func (s *Stack) acquireWait(ctx context.Context, deadline time.Time) error {
	select {
	case s.sock.wait <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case s.sock.wait <- struct{}{}:
		return nil
	case <-ctx.Done():
		return s.busy(ctx)
	case <-s.closing:
		return ErrClosed
	case <-t.C:
		return s.busy(ctx)
	}
}

func (s *Stack) busy(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return fmt.Errorf("%w: %w", ErrBusy, context.DeadlineExceeded)
	}
	return fmt.Errorf("%w: no room within %v", ErrBusy, s.cfg.SendTimeout)
}
