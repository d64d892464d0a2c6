package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/protocol"
)

// Config configures a Node. The zero value works; a nil *Config is the zero
// value. Each field documents its default.
type Config struct {
	// Heartbeat is how often the node says hello to each peer it knows,
	// asking for an answer: how it learns that a peer restarted (a new run
	// number) or went silent, and measures round trips. 0 means 1s;
	// negative turns heartbeats off (the transport's events alone then
	// tell peers' states).
	Heartbeat time.Duration
	// Silent is how many heartbeats a peer may leave unanswered before it
	// is down ("silent"). 0 means 3.
	Silent int
	// MaxPeers bounds the peers the node keeps state for; 0 means 4096.
	MaxPeers int
	// ControlQueue bounds the control envelopes (hello, subscribe,
	// credit, ...) waiting to be sent to one peer; 0 means 256. One that
	// finds it full is dropped and counted (Stats.ControlDrops).
	ControlQueue int
	// ControlTimeout bounds the sending of one control envelope, so that a
	// peer that does not answer holds up its queue no longer; 0 means 5s.
	// What it drops is asked again (hellos come again, subscriptions not
	// confirmed are asked again when the peer comes up).
	ControlTimeout time.Duration
	// PeerEvents is the capacity of the PeerEvents channel; 0 means 256.
	// Events that find it full are dropped and counted.
	PeerEvents int
	// ReleaseSilent bounds how long a subscriber may send nothing (it
	// answers the node's heartbeats while it lives) before the
	// subscriptions it has at this publisher are released (PeerReleased,
	// "silent"): a subscriber killed without a word holds the publisher no
	// longer. 0 means 5s; negative never (then only the transport's
	// PeerGone releases them). It takes effect at a heartbeat, so it is
	// late by up to one Heartbeat, and it needs heartbeats on.
	ReleaseSilent time.Duration

	// Publisher side (see Publish).
	History        History       // retained messages for replay; nil: in memory, HistoryLast per subject
	HistoryLast    int           // in-memory history: messages kept per subject; 0 means 1000, negative none
	HistoryAge     time.Duration // in-memory history: messages older than this are dropped; 0: no age limit
	MaxSubscribers int           // subscriptions the publisher serves at once; 0 means 4096
	DefaultHWM     int           // a subscription's high-water mark when it names none; 0 means 1000
	MaxHWM         int           // the largest high-water mark a subscription may ask (a larger one gets this); 0 means 10000
	// Policies are the policies a subscription may have here; one that
	// asks another gets the first. The wire cannot tell a subscriber that
	// asked Block from one that asked nothing, so Block is for publishers
	// that list it. nil means DropNewest, DropOldest, Cut: no subscriber
	// holds Publish.
	Policies []Policy
	// BlockTimeout bounds how long a Publish waits for room in a full
	// Block subscription; then that subscription is cut off (PeerReleased,
	// "slow"), and the others go on. 0 means 2s.
	BlockTimeout    time.Duration
	SendWindow      int // messages in flight per subscription (the subscriber restores order); 0 means 16
	MaxSubjectBytes int // longest subject; 0 means 256

	// The publisher's budgets for one peer, whatever it sends: a
	// subscription over one is refused with ErrOverBudget (the subscriber's
	// Err), counted in PublisherStats.OverBudget and logged once per peer.
	// Everything a peer holds is given back when it goes.
	MaxPeerSubscriptions int // subscriptions one peer holds at once; 0 means 256
	MaxFilters           int // filters of one subscription; 0 means 32
	MaxFilterBytes       int // bytes of one subscription's filters together; 0 means 2048
	MaxPeerReplays       int // subscriptions of one peer whose replay is still being sent; 0 means 4
	// MaxReplay bounds the messages one replay sends: the newest, after a
	// gap for the older ones; 0 means 10000.
	MaxReplay int
	// MaxPeerQueued bounds the messages queued for one peer's
	// subscriptions together; a message that finds it full is dropped for
	// the subscription and counted (PublisherStats.PeerQueueDrops), whatever
	// its policy. 0 means 20000.
	MaxPeerQueued int
	// MaxPeerSenders bounds the goroutines sending to one peer at once,
	// all its subscriptions together (each has at most SendWindow); the
	// subscriptions wait their turn. 0 means 32.
	MaxPeerSenders int

	// Requester and responder side (see Request, Serve).
	RequestTimeout time.Duration // a request whose ctx has no deadline waits this long; 0 means 5s
	MaxPending     int           // requests waiting for replies at once; 0 means 65536
	// MaxPeerRequests bounds the requests of one peer a responder holds at
	// once (waiting for a handler or in one); one beyond it is answered
	// at once with an error (ErrRequestBudget), so one peer cannot take
	// the services' backlogs from the others. 0 means 64.
	MaxPeerRequests int
	// MaxPeerAnswers bounds the answers waiting to be sent to one peer (one
	// goroutine per peer sends them, each until its request's deadline);
	// one beyond it is dropped and counted (ResponderStats.AnswerDrops): a
	// peer that does not read its answers holds no more. 0 means 256.
	MaxPeerAnswers int

	// Pusher side (see Push).
	JobTimeout time.Duration // a job not done this long after it was handed out goes to another puller; 0 means 30s
	JobQueue   int           // jobs waiting for a puller; 0 means 1024
	// JobFile is a bbolt file that keeps the jobs pushed and not yet done
	// or parked, so that they are handed out again when the pusher starts
	// after a crash (under the ids Push returned; their bodies come back
	// as JSON gives them). Push returns once its job is on disk (or with
	// the error that kept it off, the job queued in memory all the same).
	// A job in a puller's hands at the crash is done twice, since its done
	// does not count in the next run: jobs are done at least once. ""
	// keeps jobs in memory only: a crash loses the jobs queued.
	JobFile string
	// MaxPullCredit caps the credit a puller may offer: jobs handed to it at
	// once. 0 means 64.
	MaxPullCredit int
	// PullCreditStart is the credit a new puller is given, whatever it
	// offers: it grows by one per job the puller reports done (up to its
	// offer) and halves per job it holds past JobTimeout, so a puller that
	// takes jobs and never finishes them holds few. 0 means 4.
	PullCreditStart int
	// JobAttempts is how many times a job is handed out before it is
	// parked: reported on Results with JobResult.Parked, not handed out
	// again. 0 means 5.
	JobAttempts int

	// Logger receives the node's logs; nil is silent. Nothing is logged
	// per message.
	Logger *slog.Logger
}

func (c *Config) populate() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = time.Second
	}
	def(&c.Silent, 3)
	def(&c.MaxPeers, 4096)
	def(&c.ControlQueue, 256)
	if c.ControlTimeout == 0 {
		c.ControlTimeout = 5 * time.Second
	}
	def(&c.PeerEvents, 256)
	if c.ReleaseSilent == 0 {
		c.ReleaseSilent = 5 * time.Second
	}
	def(&c.HistoryLast, 1000)
	def(&c.MaxSubscribers, 4096)
	def(&c.DefaultHWM, 1000)
	def(&c.MaxHWM, 10000)
	if c.Policies == nil {
		c.Policies = []Policy{DropNewest, DropOldest, Cut}
	}
	if c.BlockTimeout == 0 {
		c.BlockTimeout = 2 * time.Second
	}
	def(&c.SendWindow, 16)
	def(&c.MaxSubjectBytes, 256)
	def(&c.MaxPeerSubscriptions, 256)
	def(&c.MaxFilters, 32)
	def(&c.MaxFilterBytes, 2048)
	def(&c.MaxPeerReplays, 4)
	def(&c.MaxReplay, 10000)
	def(&c.MaxPeerQueued, 20000)
	def(&c.MaxPeerSenders, 32)
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	def(&c.MaxPending, 65536)
	if c.JobTimeout == 0 {
		c.JobTimeout = 30 * time.Second
	}
	def(&c.JobQueue, 1024)
	def(&c.MaxPeerRequests, 64)
	def(&c.MaxPeerAnswers, 256)
	def(&c.MaxPullCredit, 64)
	def(&c.PullCreditStart, 4)
	def(&c.JobAttempts, 5)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Node runs the messaging patterns over one Transport: it is a publisher, a
// subscriber, a requester, a responder, a pusher and a puller at once, as
// the application uses it. One goroutine reads the transport and routes
// envelopes; Close stops everything the node started.
type Node struct {
	t        Transport
	cfg      Config
	log      *slog.Logger
	epoch    uint64
	ctx      context.Context // cancelled by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	once     sync.Once
	goMu     sync.RWMutex // guards stopping; goWait holds it shared around wg.Add
	stopping bool

	peerEvents chan PeerEvent
	attached   attacher // the transport hands messages to receive directly

	mu    sync.Mutex
	peers map[string]*peer

	pub  publisher
	sub  subscriber
	req  requester
	rep  responder
	push pusher
	pull puller

	stats nodeStats
}

type nodeStats struct {
	notEnvelope, badEnvelope, unknownKind, controlDrops, peerEventDrops, peerLimit atomic.Uint64
}

// Stats are a node's counters since it started.
type Stats struct {
	NotEnvelope    uint64 // received messages that were not envelopes (ignored)
	BadEnvelope    uint64 // envelopes that did not decode, or made no sense (ignored)
	UnknownKind    uint64 // envelopes of a kind this node does not know (ignored)
	ControlDrops   uint64 // control envelopes not sent: a peer's control queue was full, or the send failed
	PeerEventDrops uint64 // peer events dropped because PeerEvents was not read
	PeerLimit      uint64 // peers not tracked because MaxPeers was reached

	Publisher PublisherStats
	Requester RequesterStats
	Responder ResponderStats
	Pusher    PusherStats
}

// New makes a node over t (cfg nil for defaults) and starts its goroutine.
func New(t Transport, cfg *Config) (*Node, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c.populate()
	if c.Silent < 0 || c.MaxPeers < 0 || c.ControlQueue < 0 || c.DefaultHWM < 0 || c.SendWindow < 0 ||
		c.MaxPending < 0 || c.JobQueue < 0 || c.MaxSubscribers < 0 || c.MaxPeerSubscriptions < 0 || c.MaxFilters < 0 ||
		c.MaxFilterBytes < 0 || c.MaxPeerReplays < 0 || c.MaxReplay < 0 || c.MaxPeerQueued < 0 || c.MaxPeerSenders < 0 {
		return nil, fmt.Errorf("raet bus: negative limit in Config")
	}
	if c.MaxPeerRequests < 0 || c.MaxPeerAnswers < 0 || c.MaxPullCredit < 0 || c.PullCreditStart < 0 || c.JobAttempts < 0 {
		return nil, fmt.Errorf("raet bus: negative budget in Config")
	}
	if len(c.Policies) == 0 || slices.ContainsFunc(c.Policies, func(p Policy) bool { return !p.Valid() }) {
		return nil, fmt.Errorf("raet bus: Config.Policies %v: want some of block, drop_newest, drop_oldest, cut", c.Policies)
	}
	c.Policies = slices.Clone(c.Policies)
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{t: t, cfg: c, log: c.Logger.With("node", t.Name()), epoch: rand.Uint64() | 1, ctx: ctx, cancel: cancel,
		peerEvents: make(chan PeerEvent, c.PeerEvents), peers: map[string]*peer{}}
	if err := n.pub.init(n); err != nil {
		cancel()
		return nil, err
	}
	n.sub.init(n)
	n.req.init(n)
	n.rep.init(n)
	if err := n.push.init(n); err != nil {
		cancel()
		return nil, err
	}
	n.pull.init(n)
	if a, ok := t.(attacher); ok {
		a.attach(n.receive, n.transportEvent)
		n.attached = a
	}
	n.wg.Add(1)
	go n.run()
	return n, nil
}

// Name is the local peer's name.
func (n *Node) Name() string { return n.t.Name() }

// Close ends the node's subscriptions, telling their publishers (waiting
// at most leaveTimeout for them), stops the node's goroutines, fails the
// calls waiting in it with ErrClosed and closes a durable history. It does
// not close the transport.
func (n *Node) Close() error {
	var err error
	n.once.Do(func() {
		n.sub.leave()
		n.goMu.Lock()
		n.stopping = true
		n.goMu.Unlock()
		n.cancel()
		if n.attached != nil {
			n.attached.attach(nil, nil)
		}
		n.wg.Wait()
		err = errors.Join(n.pub.close(), n.push.close())
	})
	return err
}

// PeerEvents is the channel of connection hooks: a peer connected (PeerUp),
// disconnected and may come back (PeerDown), or terminated (PeerGone), with
// the reason. A peer that restarted is PeerUp with reason "restarted".
func (n *Node) PeerEvents() <-chan PeerEvent { return n.peerEvents }

// Stats returns a snapshot of the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		NotEnvelope: n.stats.notEnvelope.Load(), BadEnvelope: n.stats.badEnvelope.Load(),
		UnknownKind: n.stats.unknownKind.Load(), ControlDrops: n.stats.controlDrops.Load(),
		PeerEventDrops: n.stats.peerEventDrops.Load(), PeerLimit: n.stats.peerLimit.Load(),
		Publisher: n.pub.stats(), Requester: n.req.stats(), Responder: n.rep.stats(),
		Pusher: n.push.stats(),
	}
}

func (n *Node) closed() bool { return n.ctx.Err() != nil }

// runIDs returns the first of a run's ids (of requests, of jobs): a random
// run number in the high 31 bits and a count from 1 in the low 32, so that
// an answer meant for an earlier run of the same peer (a reply, a job's
// done) matches no id of this run. Ids stay below 2^63, an int64 for every
// body serializer.
func runIDs() uint64 { return uint64(rand.Uint32N(1<<31-1)+1) << 32 }

// goWait runs f in a goroutine that Close waits for; after Close has begun
// it runs nothing and returns false.
func (n *Node) goWait(f func()) bool {
	n.goMu.RLock()
	defer n.goMu.RUnlock()
	if n.stopping {
		return false
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
	return true
}

// run is the node's goroutine: it reads the transport and ticks heartbeats.
func (n *Node) run() {
	defer n.wg.Done()
	var tick <-chan time.Time
	if n.cfg.Heartbeat > 0 {
		t := time.NewTicker(n.cfg.Heartbeat)
		defer t.Stop()
		tick = t.C
	}
	recv, events := n.t.Receive(), n.t.Events()
	if n.attached != nil {
		recv, events = nil, nil
	}
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.t.Done():
			return
		case m, ok := <-recv:
			if !ok {
				return
			}
			n.receive(m)
		case ev, ok := <-events:
			if !ok {
				return
			}
			// The messages already received came before the event (a
			// peer's last hello before it left): take them first, or the
			// select's random pick lets one bring back a peer the event
			// ended.
			for k := len(recv); k > 0; k-- {
				m, ok := <-recv
				if !ok {
					return
				}
				n.receive(m)
			}
			n.transportEvent(ev)
		case now := <-tick:
			n.heartbeat(now)
		}
	}
}

func (n *Node) receive(m Message) {
	var e envelope.Envelope
	if err := envelope.Decode(m.Body, &e); err != nil {
		if errors.Is(err, envelope.ErrNotEnvelope) {
			n.stats.notEnvelope.Add(1)
		} else {
			n.stats.badEnvelope.Add(1)
			n.log.Debug("bad envelope", "from", m.From, "err", err)
		}
		return
	}
	n.heard(m.From)
	switch e.Kind {
	case protocol.BusKindHello:
		n.hello(m.From, &e)
	case protocol.BusKindSub, protocol.BusKindUnsub:
		n.pub.control(m.From, &e)
	case protocol.BusKindAck:
		n.pub.ack(m.From, &e)
	case protocol.BusKindSubOK, protocol.BusKindPub, protocol.BusKindDrop, protocol.BusKindCut, protocol.BusKindGap:
		n.sub.input(m.From, &e)
	case protocol.BusKindReq:
		n.rep.input(m.From, &e)
	case protocol.BusKindRep:
		n.req.input(m.From, &e)
	case protocol.BusKindReady, protocol.BusKindDone:
		n.push.input(m.From, &e)
	case protocol.BusKindJob:
		n.pull.input(m.From, &e)
	default:
		n.stats.unknownKind.Add(1)
	}
}

// bad counts an envelope that decoded but made no sense, and logs why.
func (n *Node) bad(from string, e *envelope.Envelope, why string) {
	n.stats.badEnvelope.Add(1)
	n.log.Debug("envelope ignored", "from", from, "kind", e.Kind, "id", e.ID, "reason", why)
}

// envelope returns an envelope of kind k with the version set.
func newEnvelope(k protocol.BusKind) envelope.Envelope {
	return envelope.Envelope{Version: envelope.Version, Kind: k}
}
