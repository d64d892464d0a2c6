package road

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
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
// Its goroutines, and the file of each, are in the package doc
// (Goroutines).
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
	st, k, lock, err := openStore(c)
	if err != nil {
		return nil, err
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

// openStore opens and locks the keep of c, or makes a store in memory
// without one (k and lock nil).
func openStore(c *Config) (st core.Store, k *keep.Keep, lock *keep.Lock, err error) {
	if c.KeepDir == "" {
		return core.MemStore(), nil, nil, nil
	}
	if k, err = keep.Open(c.KeepDir, &keep.Config{Auto: c.Auto}); err != nil {
		return nil, nil, nil, fmt.Errorf("raet: open keep: %w", err)
	}
	if lock, err = k.Lock(); err != nil {
		return nil, nil, nil, fmt.Errorf("raet: %w", err)
	}
	return core.DiskStore(k), k, lock, nil
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
