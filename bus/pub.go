package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/protocol"
)

// Policy is what a publisher does with a subscription whose queue is at its
// high-water mark.
type Policy = protocol.BusPolicy

// The policies.
const (
	Block      = protocol.BusPolicyBlock      // Publish waits for room
	DropNewest = protocol.BusPolicyDropNewest // the new message is dropped
	DropOldest = protocol.BusPolicyDropOldest // the oldest queued message is dropped
	Cut        = protocol.BusPolicyCut        // the subscription is cut off
)

// Pub is a message to publish.
type Pub struct {
	Subject string
	// Origin tags where the content came from (for example the client
	// whose change it is, so that it can discard its own echo).
	Origin string
	// Body is the content: any value the transport's serializer takes. It
	// is retained for replay and must not be changed afterwards.
	Body any
}

// ErrCut: the publisher cut the subscription off (policy Cut).
var ErrCut = errors.New("raet bus: subscription cut off by the publisher")

// ErrOverBudget: the publisher refused the subscription because the
// subscriber's peer is over one of the publisher's budgets (Config,
// MaxPeerSubscriptions and after); the error names which.
var ErrOverBudget = errors.New("raet bus: over the publisher's budget")

// budgetRefusal starts the refusal text (subok er) of a subscription over a
// budget, for the subscriber to tell it from others.
const budgetRefusal = "over budget: "

// overBudget is a refusal for the budget named, whose limit is limit.
func overBudget(name string, limit int) error {
	return fmt.Errorf("%w: %s (%d)", errBudget, name, limit)
}

// errBudget marks the publisher's refusals over a budget; its text is what
// the subscriber reads on the wire.
var errBudget = errors.New(strings.TrimSuffix(budgetRefusal, ": "))

// publisher is the node's publishing side: its sequence, history and the
// subscriptions of other peers.
type publisher struct {
	n    *Node
	mu   sync.Mutex
	room *sync.Cond // a blocked Publish waits here for room in a Block subscription
	hist History
	seq  uint64
	// durable is the highest sequence number on disk when holdBack: the
	// history writes in group commits after Append, and no subscriber
	// gets a message before it is on disk, so that a message seen is never
	// lost and its number never reused after a crash.
	durable  uint64
	holdBack bool
	subs     map[subKey]*outSub
	ended    []*outSub // the last endedKeep subscriptions that ended
	total    PublisherStats
	peers    map[string]*peerUse // what each subscribing peer holds, against its budgets
}

// peerUse is what one peer's subscriptions hold at the publisher.
type peerUse struct {
	name    string
	subs    int       // subscriptions (not ended)
	queued  int       // messages and notices queued for them together
	senders int       // goroutines sending to it
	waiting []*outSub // its subscriptions waiting for a sender, oldest first
	slow    bool      // a Block subscription of it was cut as slow: it gets no Block any more
	logged  bool      // its first refusal over a budget was logged
}

type subKey struct {
	peer string
	id   uint64
}

// outSub is a subscription of a peer, at the publisher.
type outSub struct {
	key      subKey
	filters  []string
	policy   Policy
	hwm      int
	queue    []envelope.Envelope // waiting to be sent (pub, gap), oldest first
	inflight int                 // being sent
	senders  int                 // goroutines sending its items (at most SendWindow)
	nextIx   uint64
	window   uint64            // items sent past the last acknowledged at most; 0: the subscriber sends no acks
	use      *peerUse          // its peer's
	waiting  bool              // in use.waiting
	replayTo uint64            // the last sequence number of its replay: it replays while its queue starts at or before it
	since    time.Time         // when, being Block and full, it first held a Publish; zero while it has room
	acked    uint64            // the last item the subscriber's application took
	pending  map[string]uint64 // drops not yet reported to the subscriber
	stats    SubscriberStats
	done     chan struct{} // closed when the subscription ends
	ctx      context.Context
	cancel   context.CancelFunc // ends the sends in flight when it ends
	retired  bool               // out of subs: nothing more is queued
	why      string             // why it was retired
	ended    bool               // done is closed
	cutSent  bool               // the cut notice went out: done closes when nothing is in flight
}

// SubscriberStats describe one subscription at the publisher.
type SubscriberStats struct {
	Peer      string
	ID        uint64
	Filters   []string
	Policy    Policy
	HWM       int
	Queued    int               // messages held now (waiting and in flight)
	InFlight  int               // of those, being sent
	MaxQueued int               // the most ever held at once
	Sent      uint64            // items the subscriber has
	Window    int               // items sent past the last acknowledged at most; 0: the subscriber does not acknowledge
	Unacked   int               // items sent that its application has not taken yet (when Window is set)
	Drops     map[string]uint64 // messages dropped for it, by subject
	Cut       bool              // cut off (policy Cut)
	Ended     string            // why it ended ("" while it lasts)
}

// PublisherStats count a node's publishing.
type PublisherStats struct {
	Published     uint64
	Subscriptions int    // now
	Drops         uint64 // messages dropped for subscribers, all subscriptions
	Cuts          uint64
	Refused       uint64 // subscriptions refused (bad filters, too many, over a budget)
	OverBudget    uint64 // of those, over a peer's budget (Config.MaxPeerSubscriptions and after)
	// PeerQueueDrops counts the messages dropped because the
	// subscriber's peer had Config.MaxPeerQueued queued (counted in Drops
	// too).
	PeerQueueDrops uint64
	HistoryErrors  uint64 // a durable history failed to keep a message
}

const endedKeep = 64

func (p *publisher) init(n *Node) error {
	p.n = n
	p.room = sync.NewCond(&p.mu)
	p.subs = map[subKey]*outSub{}
	p.peers = map[string]*peerUse{}
	switch {
	case n.cfg.History != nil:
		p.hist = n.cfg.History
	case n.cfg.HistoryLast < 0:
		p.hist = &noHistory{epoch: rand.Uint64() | 1}
	default:
		p.hist = NewMemoryHistory(n.cfg.HistoryLast, n.cfg.HistoryAge)
	}
	p.seq = p.hist.LastSeq()
	p.durable = p.seq
	if h, ok := p.hist.(*MemoryHistory); ok && h.store != nil {
		p.holdBack = true
	}
	context.AfterFunc(n.ctx, func() {
		p.mu.Lock()
		p.room.Broadcast()
		p.mu.Unlock()
	})
	return nil
}

func (p *publisher) close() error { return p.hist.Close() }

// Publish sends m to every subscription whose filters match its subject,
// retains it in the history, and returns its sequence number. A matching
// subscription at its high-water mark gets its policy: with Block,
// Publish waits for room (until ctx ends: then nothing is published);
// with DropNewest or DropOldest a message is dropped for it and counted;
// with Cut the subscription ends. Publish never waits for the network;
// with a NewBoltHistory it waits for its message to be on disk.
func (n *Node) Publish(ctx context.Context, m Pub) (seq uint64, err error) {
	if err := checkSubject(m.Subject, n.cfg.MaxSubjectBytes); err != nil {
		return 0, err
	}
	return n.pub.publish(ctx, m)
}

func (p *publisher) publish(ctx context.Context, m Pub) (uint64, error) {
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.room.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	seq, err := p.publishLocked(ctx, m)
	var written func() (uint64, error)
	if err == nil && p.holdBack {
		written = p.hist.(*MemoryHistory).written()
	}
	p.mu.Unlock()
	if written == nil {
		return seq, err
	}
	// Publish returns once its message is on disk, written with those of
	// the other Publish calls meanwhile in one commit.
	on, werr := written()
	p.mu.Lock()
	defer p.mu.Unlock()
	if werr != nil {
		p.total.HistoryErrors++
		p.n.log.Warn("history failed to keep a message", "seq", seq, "subject", m.Subject, "err", werr)
	}
	if on > p.durable { // a failed write releases its messages too: they were published
		p.durable = on
		for _, s := range p.subs {
			if len(s.queue) > 0 {
				p.wakeLocked(s)
			}
		}
	}
	return seq, nil
}

// publishLocked publishes m and queues it for its subscribers.
func (p *publisher) publishLocked(ctx context.Context, m Pub) (uint64, error) {
	for {
		if p.n.closed() {
			return 0, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		full := p.blockingLocked(m.Subject)
		if len(full) == 0 {
			break
		}
		// A full subscription's time holding Publish counts from when it
		// first did, over every Publish call meanwhile: one that gives up
		// before BlockTimeout (its ctx) does not give the subscription its
		// whole BlockTimeout again.
		now := time.Now()
		wait := p.n.cfg.BlockTimeout
		var slow []*outSub
		for _, s := range full {
			if s.since.IsZero() {
				s.since = now
			}
			if left := p.n.cfg.BlockTimeout - now.Sub(s.since); left <= 0 {
				slow = append(slow, s)
			} else {
				wait = min(wait, left)
			}
		}
		if len(slow) > 0 {
			for _, s := range slow {
				s.use.slow = true
				p.cutLocked(s, "slow", fmt.Sprintf("the subscription held Publish %s (the publisher's BlockTimeout)", p.n.cfg.BlockTimeout))
			}
			continue
		}
		t := time.AfterFunc(wait, func() {
			p.mu.Lock()
			p.room.Broadcast()
			p.mu.Unlock()
		})
		p.room.Wait()
		t.Stop()
	}
	p.seq++
	now := time.Now().UnixNano()
	r := Retained{Seq: p.seq, Subject: m.Subject, Time: now, Origin: m.Origin, Body: m.Body}
	if err := p.hist.Append(r); err != nil {
		p.total.HistoryErrors++
		p.n.log.Warn("history failed to keep a message", "seq", p.seq, "subject", m.Subject, "err", err)
	}
	p.total.Published++
	for _, s := range p.subs {
		if matchAny(s.filters, m.Subject) {
			p.offerLocked(s, pubEnvelope(s.key.id, r))
		}
	}
	return p.seq, nil
}

func pubEnvelope(id uint64, r Retained) envelope.Envelope {
	e := newEnvelope(protocol.BusKindPub)
	e.ID, e.Subject, e.Seq, e.Time, e.Origin, e.Body = id, r.Subject, r.Seq, r.Time, r.Origin, r.Body
	return e
}

// blockingLocked lists the full Block subscriptions matching subject.
func (p *publisher) blockingLocked(subject string) []*outSub {
	var out []*outSub
	for _, s := range p.subs {
		if s.policy != Block {
			continue
		}
		if s.held() < s.hwm {
			s.since = time.Time{}
		} else if matchAny(s.filters, subject) {
			out = append(out, s)
		}
	}
	return out
}

func (s *outSub) held() int { return len(s.queue) + s.inflight }

// shut reports whether s has its window's worth of items unacknowledged:
// its subscriber's application does not take them, so nothing more is sent
// and its queue fills, for its policy to apply. The cut notice goes past
// the window, so that the subscriber learns why its stream ended.
func (s *outSub) shut() bool {
	return s.window > 0 && s.nextIx-s.acked >= s.window && (len(s.queue) == 0 || s.queue[0].Kind != protocol.BusKindCut)
}

// ack takes an acknowledgement from the subscriber: its application took
// the items up to e.Index, so as many more may be sent. Only the peer of
// the subscription acknowledges it (the key is the peer's).
func (p *publisher) ack(from string, e *envelope.Envelope) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.subs[subKey{from, e.ID}]
	if s == nil || s.window == 0 || e.Index <= s.acked || e.Index > s.nextIx {
		return
	}
	s.acked = e.Index
	p.wakeLocked(s)
}

// offerLocked queues e for s under its policy.
func (p *publisher) offerLocked(s *outSub, e envelope.Envelope) {
	if s.use.queued >= p.n.cfg.MaxPeerQueued {
		p.total.PeerQueueDrops++
		p.dropLocked(s, e.Subject)
		return
	}
	if s.held() >= s.hwm {
		switch s.policy {
		case DropNewest, Block: // Block: only when the subscription was made full by a replay
			p.dropLocked(s, e.Subject)
			return
		case DropOldest:
			if i := slices.IndexFunc(s.queue, func(q envelope.Envelope) bool { return q.Kind == protocol.BusKindPub }); i >= 0 {
				p.dropLocked(s, s.queue[i].Subject)
				copy(s.queue[1:i+1], s.queue[:i]) // a gap notice before it stays first
				s.queue[0] = envelope.Envelope{}
				s.queue = s.queue[1:]
				s.use.queued--
			} else {
				p.dropLocked(s, e.Subject)
				return
			}
		case Cut:
			p.dropLocked(s, e.Subject)
			p.cutLocked(s, "cut", "the subscription's queue reached its high-water mark")
			return
		}
	}
	s.queue = append(s.queue, e)
	s.use.queued++
	s.stats.MaxQueued = max(s.stats.MaxQueued, s.held())
	p.wakeLocked(s)
}

func (p *publisher) dropLocked(s *outSub, subject string) {
	s.pending[subject]++
	s.stats.Drops[subject]++
	p.total.Drops++
	p.wakeLocked(s)
}

// cutLocked cuts s off (policy Cut, or a Block subscription too slow:
// why) : everything queued is dropped and counted, and a cut notice saying
// text, with all the drops the subscriber has not heard of, goes last in
// its stream, after what is in flight. Later messages do not go to it.
func (p *publisher) cutLocked(s *outSub, why, text string) {
	for _, q := range s.queue {
		if q.Kind == protocol.BusKindPub {
			s.pending[q.Subject]++
			s.stats.Drops[q.Subject]++
			p.total.Drops++
		}
	}
	e := newEnvelope(protocol.BusKindCut)
	e.ID = s.key.id
	e.Error = text
	s.use.queued += 1 - len(s.queue)
	s.queue = []envelope.Envelope{e}
	s.stats.Cut = true
	p.total.Cuts++
	p.retireLocked(s, why)
	p.wakeLocked(s)
}

// retireLocked takes s out of the subscriptions: no message goes to it any
// more. Its senders go on until endLocked.
func (p *publisher) retireLocked(s *outSub, why string) {
	if s.retired {
		return
	}
	s.retired = true
	s.why = why
	delete(p.subs, s.key)
	if why != "replaced" {
		p.n.log.Info("subscription released", "peer", s.key.peer, "id", s.key.id, "reason", why)
		p.n.event(PeerEvent{Peer: s.key.peer, State: PeerReleased, Reason: why, Time: time.Now(), Subscription: s.key.id})
	}
	if len(p.ended) >= endedKeep {
		p.ended = p.ended[1:]
	}
	p.ended = append(p.ended, s)
	p.room.Broadcast()
}

// endLocked ends s: it is retired, its senders stop and what it held is
// given back to its peer's budgets.
func (p *publisher) endLocked(s *outSub, why string) {
	p.retireLocked(s, why)
	if !s.ended {
		s.ended = true
		close(s.done)
		s.cancel()
		s.use.subs--
		s.use.queued -= len(s.queue)
		clear(s.queue)
		s.queue = nil
		p.forgetPeerLocked(s.key.peer)
	}
}

// forgetPeerLocked drops the peer's use when it holds nothing, and it has no
// mark to keep (slow, logged) until it goes.
func (p *publisher) forgetPeerLocked(name string) {
	if u := p.peers[name]; u != nil && u.subs == 0 && u.senders == 0 && !u.slow && !u.logged {
		delete(p.peers, name)
	}
}

func (p *publisher) snapshotLocked(s *outSub) SubscriberStats {
	st := s.stats
	st.Filters = slices.Clone(s.filters)
	st.Queued, st.InFlight = s.held(), s.inflight
	if s.window > 0 {
		st.Window, st.Unacked = int(s.window), int(s.nextIx-s.acked)
	}
	st.Ended = s.why
	st.Drops = make(map[string]uint64, len(s.stats.Drops))
	for k, v := range s.stats.Drops {
		st.Drops[k] = v
	}
	return st
}

// Subscribers returns the state of the subscriptions this node serves, then
// of the last ones that ended.
func (n *Node) Subscribers() []SubscriberStats {
	p := &n.pub
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []SubscriberStats
	for _, s := range p.subs {
		out = append(out, p.snapshotLocked(s))
	}
	slices.SortFunc(out, func(a, b SubscriberStats) int {
		return cmp.Or(cmp.Compare(a.Peer, b.Peer), cmp.Compare(a.ID, b.ID))
	})
	for _, s := range p.ended {
		out = append(out, p.snapshotLocked(s))
	}
	return out
}

func (p *publisher) stats() PublisherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.total
	st.Subscriptions = len(p.subs)
	return st
}

// control takes a sub or unsub envelope from peer.
func (p *publisher) control(from string, e *envelope.Envelope) {
	key := subKey{from, e.ID}
	if e.Kind == protocol.BusKindUnsub {
		p.mu.Lock()
		if s := p.subs[key]; s != nil {
			p.endLocked(s, "unsubscribed")
		}
		p.mu.Unlock()
		return
	}
	ok := newEnvelope(protocol.BusKindSubOK)
	ok.ID = e.ID
	if err := p.subscribe(from, e); err != nil {
		ok.Error = err.Error()
		p.mu.Lock()
		p.total.Refused++
		first := false
		if errors.Is(err, errBudget) {
			p.total.OverBudget++
			u := p.useLocked(from)
			first, u.logged = !u.logged, true
		}
		p.mu.Unlock()
		switch {
		case first:
			p.n.log.Warn("peer over its budget: subscription refused (logged once per peer)", "peer", from, "id", e.ID, "err", err)
		case !errors.Is(err, errBudget):
			p.n.log.Info("subscription refused", "peer", from, "id", e.ID, "err", err)
		}
	} else {
		ok.Credit = windowOf(e)
	}
	p.mu.Lock()
	ok.Epoch, ok.Seq = p.hist.Epoch(), p.seq
	p.mu.Unlock()
	p.n.mu.Lock()
	pe := p.n.peerLocked(from)
	p.n.mu.Unlock()
	if pe != nil {
		p.n.control(pe, ok)
	}
}

func (p *publisher) subscribe(from string, e *envelope.Envelope) error {
	if len(e.Filters) == 0 {
		return fmt.Errorf("%w: no filter", ErrSubject)
	}
	if len(e.Filters) > p.n.cfg.MaxFilters {
		return overBudget("filters of a subscription", p.n.cfg.MaxFilters)
	}
	size := 0
	for _, f := range e.Filters {
		size += len(f)
	}
	if size > p.n.cfg.MaxFilterBytes {
		return overBudget("bytes of a subscription's filters", p.n.cfg.MaxFilterBytes)
	}
	for _, f := range e.Filters {
		if err := checkFilter(f, p.n.cfg.MaxSubjectBytes); err != nil {
			return err
		}
	}
	if !e.Policy.Valid() {
		return fmt.Errorf("raet bus: unknown policy %d", e.Policy)
	}
	// The publisher's limits, not the subscriber's wishes, bound what it
	// holds for a subscriber.
	policy := e.Policy
	if !slices.Contains(p.n.cfg.Policies, policy) {
		policy = p.n.cfg.Policies[0]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.useLocked(from)
	defer p.forgetPeerLocked(from)
	if policy == Block && u.slow {
		// A peer whose Block subscription was cut as slow holds Publish no
		// more: it gets the publisher's first other policy.
		policy = DropNewest
		if i := slices.IndexFunc(p.n.cfg.Policies, func(q Policy) bool { return q != Block }); i >= 0 {
			policy = p.n.cfg.Policies[i]
		}
	}
	hwm := int(e.HWM)
	if hwm == 0 {
		hwm = p.n.cfg.DefaultHWM
	}
	hwm = min(hwm, p.n.cfg.MaxHWM)
	key := subKey{from, e.ID}
	if old := p.subs[key]; old != nil {
		if slices.Equal(old.filters, e.Filters) && old.policy == policy && old.hwm == hwm {
			return nil // a repeated request: the subscription stands
		}
		p.endLocked(old, "replaced")
		u = p.useLocked(from) // ending old may have forgotten the peer's use
	} else {
		for _, s := range p.ended { // a late repeat of a request that ended: ids are not reused
			if s.key == key {
				return fmt.Errorf("raet bus: subscription %d ended (%s)", e.ID, s.why)
			}
		}
	}
	if len(p.subs) >= p.n.cfg.MaxSubscribers {
		return fmt.Errorf("raet bus: the publisher serves %d subscriptions already", len(p.subs))
	}
	if u.subs >= p.n.cfg.MaxPeerSubscriptions {
		return overBudget("subscriptions of a peer", p.n.cfg.MaxPeerSubscriptions)
	}
	if e.Replay != protocol.BusReplayNone {
		replays := 0
		for k, o := range p.subs {
			if k.peer == from && o.replaying() {
				replays++
			}
		}
		if replays >= p.n.cfg.MaxPeerReplays {
			return overBudget("replays of a peer at once", p.n.cfg.MaxPeerReplays)
		}
	}
	s := &outSub{key: key, filters: e.Filters, policy: policy, hwm: hwm, pending: map[string]uint64{},
		done: make(chan struct{}), window: uint64(windowOf(e)), use: u}
	s.ctx, s.cancel = context.WithCancel(p.n.ctx)
	s.stats = SubscriberStats{Peer: from, ID: e.ID, Policy: policy, HWM: hwm, Drops: map[string]uint64{}}
	q := Query{Filters: e.Filters, Replay: e.Replay, Arg: e.ReplayArg, Max: p.n.cfg.MaxReplay}
	foreign := q.Replay == protocol.BusReplaySinceSeq && e.Epoch != 0 && e.Epoch != p.hist.Epoch()
	if foreign { // S counts another history's messages: everything retained
		q.Arg = 0
	}
	msgs, lost, err := p.hist.Select(q)
	if err != nil {
		p.n.log.Warn("history failed to replay", "peer", from, "err", err)
		lost = true
	}
	if len(msgs) > p.n.cfg.MaxReplay { // a History that does not keep to Query.Max
		msgs, lost = msgs[len(msgs)-p.n.cfg.MaxReplay:], true
	}
	if room := p.n.cfg.MaxPeerQueued - u.queued; len(msgs) > room {
		return overBudget("messages queued for a peer", p.n.cfg.MaxPeerQueued)
	}
	if lost || foreign {
		g := newEnvelope(protocol.BusKindGap)
		g.ID, g.Epoch, g.Seq = e.ID, p.hist.Epoch(), e.ReplayArg
		if len(msgs) > 0 && !foreign {
			g.Seq = msgs[0].Seq - 1
		}
		s.queue = append(s.queue, g)
	}
	for _, m := range msgs { // the replay may exceed the HWM: it is bounded by MaxReplay
		s.queue = append(s.queue, pubEnvelope(e.ID, m))
	}
	if len(s.queue) > 0 {
		s.replayTo = max(e.ReplayArg, 1)
		if len(msgs) > 0 {
			s.replayTo = msgs[len(msgs)-1].Seq
		}
	}
	u.queued += len(s.queue)
	u.subs++
	s.stats.MaxQueued = s.held()
	p.subs[key] = s
	p.wakeLocked(s)
	return nil
}

// windowOf is the window a subscription keeps to: the subscriber's, at most
// what a subscriber holds to restore the order.
func windowOf(e *envelope.Envelope) uint32 { return min(e.Credit, maxHeld) }

// peer drops the subscriptions of a peer that is gone or restarted.
func (p *publisher) peer(name string, st PeerState, restarted bool) {
	if st != PeerGone && !restarted {
		return
	}
	why := "peer gone"
	if restarted {
		why = "peer restarted"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endPeersLocked(map[string]bool{name: true}, why)
	if u := p.peers[name]; u != nil {
		u.slow, u.logged = false, false // a new run, or gone: it starts afresh
		p.forgetPeerLocked(name)
	}
}

// useLocked returns what peer name holds, made when new.
func (p *publisher) useLocked(name string) *peerUse {
	u := p.peers[name]
	if u == nil {
		u = &peerUse{name: name}
		p.peers[name] = u
	}
	return u
}

// replaying reports whether s is still sending its replay: it counts
// against its peer's MaxPeerReplays until then.
func (s *outSub) replaying() bool {
	if s.replayTo == 0 || len(s.queue) == 0 {
		return false
	}
	h := s.queue[0]
	return (h.Kind == protocol.BusKindPub || h.Kind == protocol.BusKindGap) && h.Seq <= s.replayTo
}

// endedSilent ends the refusal of a repeated request for a subscription
// released as silent: the subscriber, alive after all, subscribes again.
const endedSilent = "ended (silent)"

// endedCut and endedSlow end the refusal of a repeated request for a
// subscription cut off (cutLocked's whys), whose cut is on its way.
const (
	endedCut  = "ended (cut)"
	endedSlow = "ended (slow)"
)

// release ends the subscriptions of the peers named, for why.
func (p *publisher) release(names map[string]bool, why string) {
	if len(names) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endPeersLocked(names, why)
}

// endPeersLocked ends the subscriptions of the peers named, those cut off
// and still sending their last items too.
func (p *publisher) endPeersLocked(names map[string]bool, why string) {
	for k, s := range p.subs {
		if names[k.peer] {
			p.endLocked(s, why)
		}
	}
	for _, s := range p.ended {
		if names[s.key.peer] {
			p.endLocked(s, why)
		}
	}
}

// wakeLocked starts senders for s's queue, up to SendWindow at once and
// MaxPeerSenders for its peer; each sends items until none is left. The
// subscriber restores their order by index. A sender that is not needed is
// not started: an idle subscription has no goroutine. When its peer has all
// its senders, s waits for one of them.
func (p *publisher) wakeLocked(s *outSub) {
	for s.senders < p.wantLocked(s) && !s.ended {
		if s.use.senders >= p.n.cfg.MaxPeerSenders {
			p.waitLocked(s)
			return
		}
		if !p.n.goWait(func() { p.sender(s) }) {
			return
		}
		s.senders++
		s.use.senders++
	}
}

// waitLocked puts s in its peer's line for a sender.
func (p *publisher) waitLocked(s *outSub) {
	if !s.waiting {
		s.waiting = true
		s.use.waiting = append(s.use.waiting, s)
	}
}

// wantLocked is how many senders s has work for.
func (p *publisher) wantLocked(s *outSub) int {
	want := len(s.queue)
	if len(s.queue) == 0 && len(s.pending) > 0 {
		want++ // a drop notice
	}
	switch {
	case s.shut():
		want = 0
	case s.window > 0 && s.nextIx-s.acked < s.window:
		want = min(want, int(s.window-(s.nextIx-s.acked)))
	}
	want += s.inflight // a sender has one item in flight at most
	return min(want, p.n.cfg.SendWindow)
}

// sender sends s's items until there are none, taking turns with its peer's
// subscriptions waiting for a sender, then serves those.
func (p *publisher) sender(s *outSub) {
	for s != nil {
		e, ok := p.take(s)
		if !ok {
			p.mu.Lock()
			s = p.nextLocked(s.use, nil)
			p.mu.Unlock()
			continue
		}
		s = p.send(s, e)
	}
}

// nextLocked returns the subscription a sender of peer u serves now: s,
// the one it served (nil when that has no more work for it), unless another
// waits its turn; nil when there is none, and the sender ends.
func (p *publisher) nextLocked(u *peerUse, s *outSub) *outSub {
	if s != nil && len(u.waiting) == 0 {
		return s
	}
	for len(u.waiting) > 0 {
		w := u.waiting[0]
		u.waiting[0] = nil
		u.waiting = u.waiting[1:]
		w.waiting = false
		if w.ended || w.senders >= p.wantLocked(w) {
			continue
		}
		if s != nil { // s takes its turn in the line
			s.senders--
			if s.senders < p.wantLocked(s) {
				p.waitLocked(s)
			}
		}
		w.senders++
		if w.senders < p.wantLocked(w) {
			p.waitLocked(w)
		}
		return w
	}
	if s != nil {
		return s
	}
	u.senders--
	if len(u.waiting) == 0 {
		u.waiting = nil
	}
	if p.peers[u.name] == u { // the peer may be gone: forget it when it holds nothing more
		p.forgetPeerLocked(u.name)
	}
	return nil
}

// take returns the next item for s, numbered and carrying the drops not
// reported yet, or a drop notice when only those are left.
func (p *publisher) take(s *outSub) (envelope.Envelope, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e envelope.Envelope
	switch {
	case s.ended:
		s.senders--
		return e, false
	case s.shut():
		s.senders-- // woken again by an ack
		return e, false
	case p.holdBack && len(s.queue) > 0 && s.queue[0].Kind == protocol.BusKindPub && s.queue[0].Seq > p.durable:
		s.senders-- // woken again when it is on disk
		return e, false
	case len(s.queue) > 0:
		e = s.queue[0]
		s.queue[0] = envelope.Envelope{} // let the body go
		s.queue = s.queue[1:]            // append reallocates, and drops the head, in time
	case len(s.pending) > 0:
		e = newEnvelope(protocol.BusKindDrop)
		e.ID = s.key.id
	default:
		s.senders--
		return e, false
	}
	if len(s.pending) > 0 {
		e.Drops = s.pending
		s.pending = map[string]uint64{}
	}
	s.nextIx++
	e.Index = s.nextIx
	s.inflight++
	return e, true
}

// send sends one item, again until it is taken, the subscription ends or
// the node closes, and returns the subscription its sender serves next.
func (p *publisher) send(s *outSub, e envelope.Envelope) *outSub {
	body := e.Map()
	delay := 50 * time.Millisecond
	sent := false
	for {
		err := p.n.t.Send(s.ctx, s.key.peer, body)
		if err == nil {
			sent = true
			break
		}
		if errors.Is(err, ErrUnknownPeer) {
			p.mu.Lock()
			p.endLocked(s, "peer unknown")
			p.mu.Unlock()
		}
		select {
		case <-s.done:
		case <-p.n.ctx.Done():
		case <-time.After(delay):
			delay = min(2*delay, 2*time.Second)
			continue
		}
		break
	}
	p.mu.Lock()
	s.inflight--
	if sent {
		s.stats.Sent++
	}
	// The cut notice is the last item, but items sent before it may still
	// be retrying: the subscription ends when the last of them is done, so
	// none is abandoned (the subscriber restores the order by index and
	// would hold the cut behind the hole for ever).
	s.cutSent = s.cutSent || e.Kind == protocol.BusKindCut
	if s.cutSent && s.inflight == 0 {
		p.endLocked(s, s.why)
	}
	p.room.Broadcast()
	next := p.nextLocked(s.use, s)
	p.mu.Unlock()
	return next
}
