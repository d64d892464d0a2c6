package road

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/queue"
	"github.com/raet-go/raet/road/internal/core"
)

// Stack is a road estate: one UDP socket, the transactions with its
// remotes, and the goroutines that run them.
//
// Goroutines: Start starts four (five with a packet.BatchSerializer), all
// stopped and joined by Close. The owner goroutine holds all protocol state
// (the core: road/internal/core, no I/O and no clock, reached only through
// its API) and is the only one to call it; a reader goroutine reads
// datagrams from the socket (recvmmsg on Linux, up to 32 at a time), parses
// them and checks their Ed25519 signatures (while what comes is light,
// one reader reads alone); a writer goroutine signs the Ed25519 feet of
// the message datagrams the owner flushes (so that the owner's work and
// the signing run on different cores) and writes them (sendmmsg, with UDP
// GSO for runs of equal-sized datagrams to one peer where Linux has it;
// see Config.NoOffload), and the owner writes a small flush, or a
// segmented message's run of datagrams, with nothing to sign itself while
// the writer is idle, as soon as it is made; a decoder goroutine, and with
// a BatchSerializer an encoder goroutine, make the serializer's costly
// calls in batches. The calls (Join, Send, Remotes, …) talk to the owner through
// channels.
type Stack struct {
	cfg  *Config
	core *core.Core // touched by the owner goroutine only
	name string
	ser  packet.Serializer

	conn    net.PacketConn
	io      packetIO
	addr    netip.AddrPort
	keylogF *os.File

	cmds     chan func(*core.Core)
	inbound  chan rxDatagram
	outbound chan *[]core.Datagram
	recv     chan Message
	events   chan Event
	// sendSem holds a token for each message sent (Go, Send) whose
	// outcome is not handed over yet: Config.SendQueue.
	sendSem chan struct{}

	// The Calls of Go and Send on their way to the owner: sendq (with
	// sendStopped, once the stack has stopped, under sendMu), and a token
	// in sendWake when sendq was empty; sendSpare is the owner's spare
	// memory for sendq.
	sendMu      sync.Mutex
	sendq       []*Call
	sendSpare   []*Call
	sendStopped bool
	sendWake    chan struct{}
	// spill holds the outcomes whose Done had no room (handOver).
	spillMu sync.Mutex
	spill   []*Call
	// queueDone holds the Calls done whose Queue must forget them, for
	// the queue goroutine (woken by a token in queueWake).
	queueMu   sync.Mutex
	queueDone []*Call
	queueWake chan struct{}
	// waits are Send's Calls, with their Done, for reuse.
	waits sync.Pool
	// bodySize is the size of the last body serialized: the room the next
	// one starts with.
	bodySize atomic.Int64

	startOnce sync.Once
	started   chan struct{}

	// keys is the key table the readers verify with; the owner brings it
	// up to date after each event (core.PublishKeys).
	keys       *core.KeyTable
	sendErrs   atomic.Uint64 // Counters.SendErrors, counted by the writer
	verifies   atomic.Uint64 // Counters.Verifications, counted by the readers
	eventDrops uint64        // Counters.EventDrops, counted by the owner
	closeOnce  sync.Once
	closing    chan struct{}
	// life ends when the stack stops (Close, Shutdown, or a socket that
	// failed for good), with the reason as its cause; it bounds the
	// serializer calls.
	life    context.Context
	endLife context.CancelCauseFunc
	// abort ends the writer's linger; writerDone is closed when the writer
	// has stopped (everything flushed to it written, or aborted).
	abort      chan struct{}
	writerDone chan struct{}
	keepLock   *keep.Lock

	// keep, when the stack has one on disk, is written behind by kw (from
	// Start), whose goroutine reports in durable (the sequence number of
	// the last write durable) and a token in durableC what the owner then
	// reports to the core; keepErr is kw's failure, seen at Close.
	keep     *keep.Keep
	kw       *keep.Writer
	durable  atomic.Uint64
	durableC chan struct{}
	keepErr  atomic.Pointer[error]

	decodeCh chan decodeJob // to the decoder goroutine
	encodeCh chan encodeJob // to the encoder goroutine, with a BatchSerializer
	wg       sync.WaitGroup
	bufs     sync.Pool // read buffers, recvSize bytes each, shared by the readers
	batches  sync.Pool // *[]core.Datagram: the owner's flushes, back from the writer
	// handed counts the batches handed to the writer and not yet written:
	// while it is not zero the owner writes none itself (direct).
	handed atomic.Int32
	failed atomic.Bool // the socket failed for good (fail)

	mids *midSource // the ids of the messages we send
	// hosts are the remotes' host names for the allow's fqdn (fqdn.go).
	hosts fqdns
	// resent is closed when the messages a Queue held at Start have been
	// sent again (resentDone of them done, resentFailed still queued).
	resent                   chan struct{}
	resentDone, resentFailed atomic.Int64

	// unreadable counts Counters.Drops["unreadable"]: datagrams the readers
	// skipped, cut short by the read buffer (or from no IP address).
	unreadable atomic.Uint64
}

// rxDatagram is a datagram a reader parsed and, for an Ed25519 foot,
// checked, in its read buffer.
type rxDatagram struct {
	buf *[]byte
	in  core.Inbound
}

// The channels' room, sized to need: every slot is heap a stack holds,
// idle or not (an rxDatagram is 224 bytes).
const (
	// inboundQueue is the readers' room ahead of the owner: four full
	// reads; a reader that finds it full waits, and the socket buffer
	// holds what comes meanwhile.
	inboundQueue = 4 * ioBatch
	// recvChannel is the most delivered messages the Receive channel
	// holds; the rest of ReceiveQueue waits in the core, and the owner
	// hands them over as the channel empties (deliverRetry).
	recvChannel = 128
	// deliverRetry is how soon the owner tries again to hand over
	// messages that found the Receive channel full.
	deliverRetry = time.Millisecond
)

// maxDatagram is the largest UDP payload.
const maxDatagram = 65535

// socketBuffer is the socket buffer size asked for.
const socketBuffer = 4 << 20

// New makes a stack from cfg (nil for defaults): it opens the keep, restores
// or makes the local estate and its keys, and restores kept remotes. It
// starts nothing; call Start.
func New(cfg *Config) (*Stack, error) {
	c, cc, err := populate(cfg)
	if err != nil {
		return nil, err
	}
	var st core.Store
	var lock *keep.Lock
	var k *keep.Keep
	if c.KeepDir != "" {
		if k, err = keep.Open(c.KeepDir, &keep.Config{Auto: c.Auto}); err != nil {
			return nil, fmt.Errorf("raet: open keep: %w", err)
		}
		if lock, err = k.Lock(); err != nil {
			return nil, fmt.Errorf("raet: %w", err)
		}
		st = core.DiskStore(k)
	} else {
		st = core.MemStore()
	}
	s := &Stack{
		cfg:       c,
		cmds:      make(chan func(*core.Core), 64),
		inbound:   make(chan rxDatagram, inboundQueue),
		outbound:  make(chan *[]core.Datagram, 64),
		recv:      make(chan Message, min(c.ReceiveQueue, recvChannel)),
		events:    make(chan Event, 256),
		sendSem:   make(chan struct{}, c.SendQueue),
		sendWake:  make(chan struct{}, 1),
		queueWake: make(chan struct{}, 1),
		started:   make(chan struct{}),
		closing:   make(chan struct{}),
		abort:     make(chan struct{}),
		keepLock:  lock,
		keep:      k,
		durableC:  make(chan struct{}, 1),
		decodeCh:  make(chan decodeJob, 2*maxCallBatch),
	}
	s.life, s.endLife = context.WithCancelCause(context.Background())
	cc.FQDN = func(a netip.Addr) string { return s.hosts.get(s.life, a) }
	var stream uint64 // a durable queue's ids are stable: their stream is its store
	if q, ok := c.Queue.(queue.Stable); ok {
		stream = q.Instance()
	}
	s.mids = newMidSource(stream)
	s.resent = make(chan struct{})
	rx := recvSize(c)
	s.bufs.New = func() any { b := make([]byte, rx); return &b }
	if s.ser = c.Serializer; s.ser == nil {
		if s.ser, err = packet.Builtin(cc.BodyKind); err != nil {
			return nil, err
		}
	}
	if _, ok := s.ser.(packet.BatchSerializer); ok {
		s.encodeCh = make(chan encodeJob, 2*maxCallBatch)
	}
	if err := s.openKeyLog(cc); err != nil {
		lock.Unlock()
		return nil, err
	}
	if s.core, err = core.New(cc, st, time.Now()); err != nil {
		if s.keylogF != nil {
			s.keylogF.Close()
		}
		return nil, err
	}
	s.name, s.keys = s.core.Name(), s.core.KeyTable()
	return s, nil
}

func (s *Stack) openKeyLog(cc *core.Config) error {
	if s.cfg.KeyLog != nil {
		return nil
	}
	path := s.cfg.KeyLogFile
	if path == "" {
		path = os.Getenv("RAET_KEYLOGFILE")
	}
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("raet: keylog: %w", err)
	}
	s.keylogF = f
	cc.KeyLog = f
	return nil
}

// Name is the local estate's name.
func (s *Stack) Name() string { return s.name }

// Addr is the address the stack listens and sends on (valid after Start).
func (s *Stack) Addr() netip.AddrPort { return s.addr }

// Start opens the socket (or takes Config.PacketConn) and starts the
// stack's goroutines.
func (s *Stack) Start() error {
	err := ErrClosed
	s.startOnce.Do(func() {
		err = s.start()
	})
	return err
}

func (s *Stack) start() error {
	select {
	case <-s.closing:
		return ErrClosed
	default:
	}
	if s.cfg.PacketConn != nil {
		s.conn = s.cfg.PacketConn
	} else {
		ua, err := net.ResolveUDPAddr("udp", s.cfg.Listen)
		if err != nil {
			return fmt.Errorf("raet: listen address %q: %w", s.cfg.Listen, err)
		}
		conn, err := net.ListenUDP("udp", ua)
		if err != nil {
			return fmt.Errorf("raet: listen: %w", err)
		}
		// Room for a burst of segments; the kernel caps it at rmem_max.
		_ = conn.SetReadBuffer(socketBuffer)
		_ = conn.SetWriteBuffer(socketBuffer)
		s.conn = conn
	}
	s.io = newPacketIO(s.conn, s.cfg.NoOffload)
	ap, err := addrPort(s.conn.LocalAddr())
	if err != nil {
		s.conn.Close()
		return fmt.Errorf("raet: local address: %w", err)
	}
	s.addr = ap
	s.writerDone = make(chan struct{})
	if s.keep != nil {
		s.kw = s.keep.StartWriter(&keep.WriterConfig{Queue: s.cfg.KeepQueue, OnDurable: s.keepDurable})
		if err := s.core.WriteBehind(s.kw); err != nil {
			s.kw.Close()
			s.conn.Close()
			return err
		}
	}
	s.core.Start(ap, time.Now())
	s.core.PublishKeys()
	readers := min(runtime.GOMAXPROCS(0), maxReaders)
	turns := make([]readerTurns, readers)
	for i := range turns {
		turns[i] = readerTurns{read: make(chan struct{}, 1), push: make(chan struct{}, 1)}
	}
	turns[0].read <- struct{}{}
	turns[0].push <- struct{}{}
	s.wg.Add(3 + readers)
	feet := core.NewFootChecker(&s.verifies) // one memory of checked feet for all readers
	s.core.OwnFeet(feet)                     // sized to the remotes: given back as they go
	for i := range readers {
		if i > 0 {
			feet = feet.Twin()
		}
		go s.readLoop(turns[i], turns[(i+1)%readers], feet)
	}
	go s.writeLoop()
	go s.run()
	go s.decodeLoop()
	if bs, ok := s.ser.(packet.BatchSerializer); ok {
		s.wg.Add(1)
		go s.encodeLoop(bs)
	}
	if s.cfg.Queue != nil {
		s.wg.Add(1)
		go s.queueLoop()
	}
	close(s.started)
	var pending []QueuedMessage
	if s.cfg.Queue != nil {
		if pending, err = s.cfg.Queue.Pending(); err != nil {
			s.cfg.Logger.Error("raet: queue: pending messages", "err", err)
		}
	}
	if len(pending) == 0 {
		close(s.resent)
		return nil
	}
	for _, m := range pending {
		s.mids.hold(m.Remote, m.ID) // not done: the floor stays below it
	}
	s.wg.Add(1)
	go s.resendPending(pending)
	return nil
}

// WaitPending waits until the messages the Queue held at Start (those of
// an earlier run: sent again as soon as their remote is allowed) have been
// sent again, and returns how many of them are done and how many failed
// again (still queued for the next Start). Without a Queue, or with
// nothing pending, it returns at once; before Start, ErrNotStarted.
func (s *Stack) WaitPending(ctx context.Context) (done, failed int, err error) {
	select {
	case <-s.started:
	default:
		return 0, 0, ErrNotStarted
	}
	select {
	case <-s.resent:
		return int(s.resentDone.Load()), int(s.resentFailed.Load()), nil
	case <-ctx.Done():
		return int(s.resentDone.Load()), int(s.resentFailed.Load()), ctx.Err()
	case <-s.closing:
		return int(s.resentDone.Load()), int(s.resentFailed.Load()), ErrClosed
	}
}

// resendPending sends the messages a queue kept from an earlier run, each
// once its remote is allowed, and tells the queue when each is done. It
// ends with the stack.
func (s *Stack) resendPending(pending []QueuedMessage) {
	defer s.wg.Done()
	completed := false
	defer func() {
		if completed {
			close(s.resent)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, m := range pending {
		for {
			r, err := s.remoteInfo(ctx, func(c *core.Core) (core.Remote, bool) { return c.RemoteNamed(m.Remote) })
			if err == nil && r.Allowed {
				break
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-s.closing:
				return
			}
		}
		mid, _ := s.beginID(m.Remote, m.ID, 0)
		c := &Call{To: m.Remote, Done: make(chan *Call, 1), s: s, plain: m.Body, kind: m.Kind, mid: mid, qid: m.ID}
		err := s.takeRoom(ctx)
		if err == nil {
			err = s.post(c)
		}
		if err == nil {
			err = s.await(ctx, c) // done: the queue goroutine told the Queue
		}
		if err != nil {
			s.cfg.Logger.Warn("raet: queued message not sent", "remote", m.Remote, "id", m.ID, "err", err)
			s.resentFailed.Add(1)
			continue // stays queued for the next run
		}
		s.resentDone.Add(1)
	}
	completed = true
}

// beginID gives seq of a message to remote (a queue id, with the ticket of
// its Put; 0 for the next of our own) its message id, warning when an
// unfinished older message leaves it none, and returns it with the seq.
func (s *Stack) beginID(remote string, seq, ticket uint64) (core.MsgID, uint64) {
	id, seq := s.mids.begin(remote, seq, ticket)
	if id.Seq == 0 && s.mids.warn(time.Now()) {
		s.cfg.Logger.Warn("raet: message sent without an id: an older one is still unfinished (a receiver may deliver it twice after a crash)",
			"remote", remote, "seq", seq, "oldest", id.Floor, "window", core.MidWindow, "logged", "once a minute")
	}
	return id, seq
}

// doneQueued forgets a queued message its remote has.
func (s *Stack) doneQueued(remote string, id uint64) error {
	s.mids.done(remote, id)
	if err := s.cfg.Queue.Done(id); err != nil {
		s.cfg.Logger.Error("raet: queue: done", "id", id, "err", err)
		return err
	}
	return nil
}

// Close stops the stack as Shutdown does, with Config.Linger (default 1s)
// to write the replies already queued. It is safe to call more than once
// and from any goroutine; it always returns nil.
func (s *Stack) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Linger)
	defer cancel()
	s.stop(ErrClosed, ctx)
	return nil
}

// Shutdown stops the stack cleanly: it stops taking packets and calls,
// fails the calls still waiting with ErrClosed, writes every datagram
// already queued (the done of each message delivered, the acks) until ctx
// ends, and then closes the socket and stops every goroutine. So a peer
// whose messages were delivered does not resend them. It returns ctx's
// error when ctx ended before everything queued was written. Later calls
// (and Close) wait for the first to finish and return nil.
func (s *Stack) Shutdown(ctx context.Context) error {
	return s.stop(ErrClosed, ctx)
}

// stop ends the stack once, with cause as Err's value.
func (s *Stack) stop(cause error, ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closing)
		s.endLife(cause)
		if s.conn != nil {
			select {
			case <-s.writerDone:
			case <-ctx.Done():
				err = ctx.Err()
			}
			close(s.abort)
			s.conn.Close()
		}
		s.wg.Wait()
		// The owner, which starts the lookups, is gone: they end with life.
		s.hosts.lookups.Wait()
		close(s.recv) // nothing delivers any more: the owner is gone
		s.endCalls(ctx)
		if s.kw != nil {
			if kerr := s.kw.Close(); kerr != nil {
				s.keepErr.Store(&kerr)
			}
		}
		if s.keylogF != nil {
			s.keylogF.Close()
		}
		s.keepLock.Unlock()
	})
	return err
}

// Done returns a channel that is closed when the stack stops: Close,
// Shutdown, or a socket that failed for good (see Err).
func (s *Stack) Done() <-chan struct{} { return s.life.Done() }

// Err returns nil while the stack runs, and then why it stopped: ErrClosed
// after Close or Shutdown, or an error wrapping ErrSocket (and the
// system's error) when its socket failed for good. When the keep could not
// be written (a write failed, and the stack answered joins keep-busy from
// then on, see Config.KeepQueue), the error once Close returned also wraps
// keep.ErrWriterFailed and the cause.
func (s *Stack) Err() error {
	err := context.Cause(s.life)
	if kerr := s.keepErr.Load(); kerr != nil && err != nil {
		return fmt.Errorf("%w; and the keep failed: %w", err, *kerr)
	}
	return err
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

// Context returns a context that ends when the stack stops, with Err as
// its cause.
func (s *Stack) Context() context.Context { return s.life }

// fail stops the stack after its socket failed for good. Only the first
// failure counts: the owner, the writer and the readers may each meet it.
func (s *Stack) fail(err error) {
	select {
	case <-s.closing:
		return // stopping anyway
	default:
	}
	if !s.failed.CompareAndSwap(false, true) {
		return // stopping already
	}
	s.cfg.Logger.Error("raet: the socket failed; the stack stops", "addr", s.addr, "err", err)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Linger)
		defer cancel()
		s.stop(fmt.Errorf("%w: %w", ErrSocket, err), ctx)
	}()
}

// maxReaders bounds the reader goroutines: one per core, up to four.
const maxReaders = 4

// readerTurns are the tokens that let a reader goroutine read the socket
// and push what it read to the owner. The readers pass both round a ring,
// so they read batches in turn, check signatures at the same time, and
// hand the batches to the owner in the order they were read: a burst of
// segments is not reordered on its way in. A reader keeps both turns, and
// reads again itself, while what it reads is light (fewer datagrams than
// it offered buffers for, and the batch before had no signature to
// check): then nothing waits that another reader could take on at the
// same time, and passing the turns on would cost each datagram two
// wake-ups (the next reader's, to find the socket empty, and the
// turn's way back).
type readerTurns struct {
	read, push chan struct{}
}

// take waits for a turn; false when the stack is closing.
func (s *Stack) take(turn chan struct{}) bool {
	select {
	case <-turn:
		return true
	case <-s.closing:
		return false
	}
}

func (s *Stack) readLoop(mine, next readerTurns, feet *core.FootChecker) {
	defer s.wg.Done()
	var (
		ptrs [ioBatch]*[]byte
		// bufs[i] is *ptrs[i] while this reader holds it and nil once it
		// is handed on: a slice left behind keeps its buffer live (for
		// good, beyond the last batch as large).
		bufs  [ioBatch][]byte
		ns    [ioBatch]int
		froms [ioBatch]netip.AddrPort
		ds    [ioBatch]rxDatagram
		fails int // transient read errors in a row
	)
	defer func() {
		for _, bp := range ptrs {
			if bp != nil {
				s.bufs.Put(bp)
			}
		}
	}()
	want := minReadBatch // the buffers of the next read
	holding := false     // this reader holds both turns (it reads alone)
	heavy := false       // the last batch had signatures to check
	for {
		if !holding && !s.take(mine.read) {
			return
		}
		// Only the reader whose turn it is holds empty buffers, as many as
		// twice what the last read took: the others, and an idle stack,
		// hold few.
		for i := range want {
			if ptrs[i] == nil {
				ptrs[i] = s.bufs.Get().(*[]byte)
				bufs[i] = *ptrs[i]
			}
		}
		n, err := s.io.read(bufs[:want], ns[:want], froms[:want])
		for i := n; i < len(ptrs); i++ {
			if ptrs[i] != nil { // unused: for the next reader
				s.bufs.Put(ptrs[i])
				ptrs[i], bufs[i] = nil, nil
			}
		}
		share := err != nil || n == want || heavy
		want = min(ioBatch, max(minReadBatch, 2*n))
		if share {
			next.read <- struct{}{}
		}
		if err != nil {
			n = 0
			select {
			case <-s.closing:
				return
			default:
			}
			if !transient(err) {
				s.fail(err)
				return
			}
			// A transient error (ICMP unreachable and such): wait a little
			// more after each one in a row, and still take the push turn,
			// to pass it on.
			fails++
			if !s.pause(fails) {
				return
			}
		} else {
			fails = 0
		}
		k := 0
		feet.Shed = n == ioBatch
		verified := s.verifies.Load()
		for i := range n {
			if ns[i] < 0 {
				s.unreadable.Add(1)
				continue
			}
			b := bufs[i][:ns[i]]
			if s.cfg.Tap != nil {
				s.cfg.Tap(TapPacket{Local: s.addr, Remote: froms[i], Time: time.Now(), Data: b})
			}
			// Parse and verify here, off the owner goroutine, so that the
			// signature checks of received packets run beside the owner's
			// work; the owner never verifies them again. A full batch says
			// the socket holds more: presence is shed (FootChecker.Shed).
			ds[k].buf = ptrs[i]
			ptrs[i], bufs[i] = nil, nil
			feet.Parse(&ds[k].in, b, froms[i], s.keys)
			k++
		}
		heavy = s.verifies.Load() != verified
		if !holding && !s.take(mine.push) {
			for i := range k {
				s.bufs.Put(ds[i].buf)
			}
			return
		}
		for i := range k {
			select {
			case s.inbound <- ds[i]:
			case <-s.closing:
				for _, d := range ds[i:k] {
					s.bufs.Put(d.buf)
				}
				return
			}
			ds[i] = rxDatagram{}
		}
		if holding = !share; share {
			next.push <- struct{}{}
		}
	}
}

// pause waits after the nth transient read error in a row: 1ms, doubling
// up to 100ms, so a socket that keeps failing is not spun on. It reports
// false when the stack is stopping.
func (s *Stack) pause(n int) bool {
	t := time.NewTimer(min(time.Millisecond<<min(n-1, 7), 100*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}

// writeLoop is the writer goroutine. It writes what the owner flushes
// until the owner closes outbound (it has stopped: everything is written)
// or the linger of Close runs out.
func (s *Stack) writeLoop() {
	defer s.wg.Done()
	defer close(s.writerDone)
	for {
		select {
		case bp, ok := <-s.outbound:
			if !ok {
				return
			}
			if !s.write(*bp) {
				return
			}
			s.handed.Add(-1) // after the write: the owner may write the next itself
			*bp = (*bp)[:0]
			s.batches.Put(bp)
		case <-s.abort:
			return
		}
	}
}

// write signs the Ed25519 feet the owner left (core.Config.SignLater),
// writes batch and releases its datagrams; false when the socket failed
// for good (the stack stops, and the datagrams are dropped).
func (s *Stack) write(batch []core.Datagram) bool {
	for i := range batch {
		batch[i].Sign()
	}
	if s.cfg.Tap != nil {
		for _, d := range batch {
			s.cfg.Tap(TapPacket{Out: true, Local: s.addr, Remote: d.To, Time: time.Now(), Data: d.B})
		}
	}
	failed, err := s.io.write(batch)
	s.sendErrs.Add(uint64(failed))
	for i := range batch {
		batch[i].Release()
	}
	if err != nil {
		s.fail(err)
		return false
	}
	return true
}

// run is the owner goroutine: the only one that touches the core.
func (s *Stack) run() {
	defer s.wg.Done()
	defer close(s.outbound) // the writer writes what is in it, then stops
	defer s.drainKeep()
	c := s.core
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	defer c.Shutdown()
	timer.Stop()
	var d rxDatagram    // reused: the core keeps no pointer into it
	var retry time.Time // deliveries or decodes wait for room
	// armed is when timer fires (zero: stopped); it is set again only when
	// that changes, not on every turn: most turns (a datagram, a Send)
	// leave the next deadline where it was. Since Go 1.23 a timer Stop or
	// Reset leaves nothing stale in its channel.
	var armed time.Time
	for {
		if wake := earliest(c.Deadline(), retry); !wake.Equal(armed) {
			if wake.IsZero() {
				timer.Stop()
			} else {
				timer.Reset(max(time.Until(wake), 0))
			}
			armed = wake
		}
		var timerC <-chan time.Time
		if !armed.IsZero() {
			timerC = timer.C
		}
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
		case <-timerC:
			armed = time.Time{}
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

// maxDirect is the most datagrams the owner writes itself (direct) when
// they go to several addresses, and maxDirectRun the most bytes when they
// all go to one: a segmented message of the fast profile, about what one
// UDP_SEGMENT message takes (maxGSOBytes, where Linux has GSO).
const (
	maxDirect    = 8
	maxDirectRun = 64 << 10
)

// direct writes batch on the owner goroutine, and reports whether it did:
// when nothing in it waits to be signed, it is small (a bundle of
// messages, their dones, an ack) or one run to one address (a segmented
// message: a longer flush goes to the writer, whose system calls then run
// beside the owner's work), and the writer has written everything handed
// to it (so the datagrams to a remote leave in the order the core made
// them). Such a batch costs the owner one system call, a few µs (a 16 KiB
// message's 12 segments on loopback, about 17 µs, the receiver's kernel
// work included), where handing it over costs a wake-up of the writer on
// the datagrams' way: often longer than the system call on a virtual
// machine (the writer of a 16 KiB windowed exchange waited 90 µs a wake,
// runnable, for a core), and the most of a round trip of small messages
// on a loaded machine.
func (s *Stack) direct(batch []core.Datagram) bool {
	if s.handed.Load() != 0 || (len(batch) > maxDirect && !oneRun(batch)) {
		return false
	}
	for i := range batch {
		if batch[i].Unsigned() {
			return false
		}
	}
	s.write(batch)
	return true
}

// oneRun reports whether batch goes to one address, maxDirectRun bytes at
// most.
func oneRun(batch []core.Datagram) bool {
	n := 0
	for _, d := range batch {
		if n += len(d.B); n > maxDirectRun || d.To != batch[0].To {
			return false
		}
	}
	return true
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

// handOut takes the core's datagrams and writes them (direct) or hands
// them to the writer; false when Close's linger ran out.
func (s *Stack) handOut() bool {
	bp, ok := s.batches.Get().(*[]core.Datagram)
	if !ok {
		bp = new([]core.Datagram)
	}
	*bp = s.core.TakeOut(*bp)
	if s.direct(*bp) {
		*bp = (*bp)[:0]
		s.batches.Put(bp)
		return true
	}
	s.handed.Add(1)
	select { // while closing too: Close lingers for these
	case s.outbound <- bp:
		return true
	case <-s.abort:
		return false
	}
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

// Join joins and allows the estate at addr ("host:port"), unless a session
// with it is up already, and returns it once its session is up (allowed).
// An estate it knew before (from the keep) is joined again with the uids it
// has; if the estate lost them it answers renew, and a mutable road then
// joins afresh (an immutable one fails with ErrRenewImmutable). A remote
// whose keys wait for an operator keeps Join waiting until ctx ends or
// Config.PendTimeout passes. An error that has a reason (the join was
// rejected, or it waits for an operator, or nothing answered) holds a
// *JoinError that says why and what resolves it (ReasonOf); it wraps the
// sentinel (ErrRejected, ErrTimeout, ErrRefused) or ctx's error.
func (s *Stack) Join(ctx context.Context, addr string) (Remote, error) {
	ap, err := resolve(addr)
	if err != nil {
		return Remote{}, err
	}
	// A join or allow refused in a race with the remote's own, or lost to a
	// lossy network, is tried again a few times while ctx allows.
	tries := 0
	for attempt := 1; ; attempt++ {
		r, err := s.join(ctx, ap)
		var je *JoinError
		if errors.As(err, &je) && je.Reason == ReasonNoAnswer {
			tries += je.Tries
			je.Tries = tries
		}
		why := ReasonOf(err)
		if err == nil || attempt == joinAttempts || ctx.Err() != nil || (why != ReasonNone && why != ReasonNoAnswer) ||
			!(errors.Is(err, ErrRefused) || errors.Is(err, ErrTimeout)) {
			return r, err
		}
	}
}

// joinAttempts is how many times Join tries.
const joinAttempts = 3

func (s *Stack) join(ctx context.Context, ap netip.AddrPort) (Remote, error) {
	s.hosts.warm(ctx, ap.Addr()) // for our allow's initiate, without waiting on the owner
	res := make(chan error, 1)
	// The remote comes back on a channel of its own: c.Join may give its
	// outcome (res) before it returns, while the owner has yet to set it.
	got := make(chan Remote, 1)
	err := s.do(ctx, func(c *core.Core) { r, _ := c.Join(ap, res, time.Now()); got <- remoteOf(r) })
	if err != nil {
		return Remote{}, err
	}
	if err := s.wait(ctx, res); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			err = s.joinWaitError(ap, err)
		}
		return Remote{}, err
	}
	if info := <-got; info.Name != "" {
		return info, nil
	}
	return s.remoteInfo(ctx, func(c *core.Core) (core.Remote, bool) { return c.RemoteAt(ap) })
}

// joinWaitError says what a Join whose ctx ended (err) was waiting for.
func (s *Stack) joinWaitError(ap netip.AddrPort, err error) error {
	res := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.do(ctx, func(c *core.Core) { res <- c.JoinWaitError(ap, err) }) != nil {
		return err
	}
	select {
	case e := <-res:
		return e
	case <-ctx.Done():
		return err
	case <-s.closing:
		return err
	}
}

func (s *Stack) remoteInfo(ctx context.Context, find func(*core.Core) (core.Remote, bool)) (Remote, error) {
	res := make(chan Remote, 1)
	if err := s.do(ctx, func(c *core.Core) {
		r, _ := find(c)
		res <- remoteOf(r)
	}); err != nil {
		return Remote{}, err
	}
	select {
	case r := <-res:
		if r.Name == "" {
			return r, ErrUnknownRemote
		}
		return r, nil
	case <-s.closing:
		return Remote{}, ErrClosed
	}
}

// Receive returns the channel of received messages. It is closed once the
// stack has stopped (Close, Shutdown, a socket failed for good: see Done),
// after the messages it had delivered, so a loop ranging over it ends.
func (s *Stack) Receive() <-chan Message { return s.recv }

// Events returns the channel of remote state changes. Events that find it
// full are dropped and counted (Counters.EventDrops).
func (s *Stack) Events() <-chan Event { return s.events }

// Remotes lists the remote estates.
func (s *Stack) Remotes(ctx context.Context) ([]Remote, error) {
	res := make(chan []Remote, 1)
	if err := s.do(ctx, func(c *core.Core) { res <- remotesOf(c.Remotes()) }); err != nil {
		return nil, err
	}
	select {
	case r := <-res:
		return r, nil
	case <-s.closing:
		return nil, ErrClosed
	}
}

// Counters returns a snapshot of the stack's statistics.
func (s *Stack) Counters(ctx context.Context) (Counters, error) {
	res := make(chan Counters, 1)
	if err := s.do(ctx, func(c *core.Core) {
		r := countersOf(c.Counters())
		r.EventDrops = s.eventDrops
		r.ReceiveQueue += len(s.recv)
		r.EventQueue = len(s.events) + len(c.Events())
		res <- r
	}); err != nil {
		return Counters{}, err
	}
	select {
	case r := <-res:
		r.SendErrors = s.sendErrs.Load()
		r.Verifications += s.verifies.Load()
		if n := s.unreadable.Load(); n > 0 {
			if r.Drops == nil {
				r.Drops = map[string]uint64{}
			}
			r.Drops["unreadable"] += n
		}
		return r, nil
	case <-s.closing:
		return Counters{}, ErrClosed
	}
}

// resolve parses "host:port", resolving a host name.
func resolve(addr string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(addr); err == nil {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("raet: address %q: %w", addr, err)
	}
	ap := ua.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
}

// addrPort converts a net.Addr of a PacketConn.
func addrPort(a net.Addr) (netip.AddrPort, error) {
	if ua, ok := a.(*net.UDPAddr); ok {
		ap := ua.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), nil
	}
	return netip.ParseAddrPort(a.String())
}
