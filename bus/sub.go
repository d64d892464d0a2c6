package bus

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/protocol"
)

// Replay says which retained messages a subscription wants before the live
// ones.
type Replay struct {
	Mode protocol.BusReplay
	N    uint64    // ReplayLast: how many
	Seq  uint64    // ReplaySinceSeq: every message after this sequence number
	Time time.Time // ReplaySinceTime: every message published at or after this
	// Epoch, with ReplaySinceSeq, is the publisher history's epoch that Seq
	// counts in (Subscription.Position); when the publisher's differs, it
	// replays all it has and says so with a gap. 0 skips the check.
	Epoch uint64
}

// The replay modes.
const (
	ReplayNone      = protocol.BusReplayNone
	ReplayLast      = protocol.BusReplayLast
	ReplaySinceSeq  = protocol.BusReplaySinceSeq
	ReplaySinceTime = protocol.BusReplaySinceTime
)

// SubOptions are a subscription's options; nil means the defaults.
type SubOptions struct {
	// Policy is asked at the publisher's high-water mark; the publisher
	// gives its own default (Config.Policies) for one it does not allow,
	// and for Block, the zero value, unless it allows Block.
	Policy Policy
	HWM    int    // the high-water mark; 0: the publisher's default; at most the publisher's Config.MaxHWM
	Replay Replay // default: new messages only
	// Buffer is how many deliveries wait for the application to take them
	// from Messages; 0 means 256, at most 1024. It is the subscription's
	// window: the subscriber acknowledges what the application takes, and
	// the publisher sends no more than Buffer items past the last
	// acknowledged, so a subscription the application does not read stops
	// its own stream: its publisher's queue fills and its policy applies
	// there, while the node's other subscriptions, requests and jobs go on.
	// A publisher that takes no acknowledgements (an older raet-go, or
	// another implementation) is paced by the transport alone: a full
	// buffer then holds up the node's receiving.
	Buffer int
}

// DeliveryKind is what a Delivery carries.
type DeliveryKind uint8

// The delivery kinds.
const (
	// DeliveryMessage: a published message.
	DeliveryMessage DeliveryKind = iota + 1
	// DeliveryDrops: the publisher dropped messages for this subscription
	// (Delivery.Drops), with nothing after them yet to carry the count.
	DeliveryDrops
	// DeliveryGap: messages the subscription should have are not to be had
	// (Delivery.Missed, 0 when not known): the publisher no longer retains
	// them, or restarted with another history.
	DeliveryGap
	// DeliveryCut: the publisher cut the subscription off (policy Cut); Drops says
	// what it dropped. It is the last delivery.
	DeliveryCut
)

// Delivery is one item of a subscription: a message, or a report of what
// the subscriber missed. A message may carry Drops too: the messages the
// publisher dropped for the subscription since it sent the item before.
type Delivery struct {
	Kind      DeliveryKind
	Publisher string
	Subject   string
	Seq       uint64
	Time      time.Time
	Origin    string
	Body      any
	Drops     map[string]uint64
	Missed    uint64
	// Epoch is the publisher history's epoch that Seq counts in (a message,
	// a gap): with Seq, where to resume once this delivery is processed
	// (Replay{Mode: ReplaySinceSeq, Seq: Seq, Epoch: Epoch}).
	Epoch uint64
}

// SubscriptionStats count what a subscription got.
type SubscriptionStats struct {
	Messages   uint64
	Drops      map[string]uint64 // as reported by the publisher, by subject
	Gaps       uint64
	Duplicates uint64 // items received twice (ignored)
	Stale      uint64 // items of an earlier stream of the subscription (ignored)
}

// Subscription is a subscription to one publisher.
type Subscription struct {
	n         *Node
	publisher string
	filters   []string
	opt       SubOptions
	c         chan Delivery       // unbuffered: a delivery taken is one the application has
	in        chan item           // the buffer, emptied into c by the subscription's goroutine
	window    int                 // the items the publisher may send past the last acknowledged
	posReq    chan chan [2]uint64 // Position asks the subscription's goroutine
	ready     chan struct{}
	readyOnce sync.Once
	done      chan struct{}

	// guarded by subscriber.mu
	id        uint64 // the current stream's id
	next      uint64 // the next index expected
	held      map[uint64]envelope.Envelope
	epoch     uint64 // the publisher history's epoch
	seq       uint64 // the last sequence number delivered (to the buffer)
	posEpoch  uint64 // Position: the epoch and
	posSeq    uint64 // the sequence number of the last message the application took
	confirmed bool
	lost      bool   // its publisher went down: ask again when it is up
	base      uint64 // the publisher's sequence number when it confirmed, to resume from while seq is 0
	resume    bool   // the current id asks for what came after seq
	paced     bool   // the publisher keeps to the window (its subok had a credit)
	acked     uint64 // the last item of the current stream the application took
	ackSent   uint64 // the last acknowledged
	ackAgain  bool   // an ack went out since the last heartbeat: it is repeated there once, in case it was lost
	closed    bool
	err       error
	stats     SubscriptionStats
}

// maxHeld bounds the items a subscription holds to restore their order.
const maxHeld = 1024

// item is a delivery in a subscription's buffer, with the stream item it
// came from: the subscription's goroutine acknowledges items as the
// application takes their deliveries. An item that delivers nothing (a
// duplicate) is there too, with a zero Kind, to be acknowledged.
type item struct {
	d  Delivery
	id uint64 // the stream's subscription id
	ix uint64 // the item's index; 0: not one the publisher counts
}

type subscriber struct {
	n      *Node
	mu     sync.Mutex
	byID   map[subKey]*Subscription
	nextID uint64
	// unsubbed are the last stray subscriptions told to stop, so that
	// each is told once.
	unsubbed []subKey
}

// forgetLocked reports whether the stray subscription k has not been told
// to stop yet, and notes that it now is.
func (s *subscriber) forgetLocked(k subKey) bool {
	if slices.Contains(s.unsubbed, k) {
		return false
	}
	if len(s.unsubbed) >= endedKeep {
		s.unsubbed = s.unsubbed[1:]
	}
	s.unsubbed = append(s.unsubbed, k)
	return true
}

func (s *subscriber) init(n *Node) {
	s.n = n
	s.byID = map[subKey]*Subscription{}
	s.nextID = uint64(rand.Uint32()) << 8 // short on the wire; a new run starts elsewhere
}

// Subscribe subscribes to the messages of publisher whose subjects match
// one of filters. The publisher filters: nothing else crosses the wire.
// Messages come in order, once each, on Messages; what the subscription
// misses is reported there too (drops, gaps). The subscription comes back by
// itself after the publisher restarts, resuming after the last message it
// delivered.
func (n *Node) Subscribe(publisher string, filters []string, opt *SubOptions) (*Subscription, error) {
	if len(filters) == 0 || len(filters) > envelope.MaxList {
		return nil, fmt.Errorf("%w: %d filters", ErrSubject, len(filters))
	}
	for _, f := range filters {
		if err := checkFilter(f, n.cfg.MaxSubjectBytes); err != nil {
			return nil, err
		}
	}
	if n.closed() {
		return nil, ErrClosed
	}
	var o SubOptions
	if opt != nil {
		o = *opt
	}
	if o.Buffer <= 0 {
		o.Buffer = 256
	}
	o.Buffer = min(o.Buffer, maxHeld)
	// The buffer takes a window of the current stream, its cut notice
	// (sent past the window), and what is left of the stream before a
	// resubscription: the reader never waits for a publisher that keeps to
	// the window.
	sub := &Subscription{n: n, publisher: publisher, filters: slices.Clone(filters), opt: o, window: o.Buffer,
		c: make(chan Delivery), in: make(chan item, 2*o.Buffer+2), posReq: make(chan chan [2]uint64), ready: make(chan struct{}), done: make(chan struct{}),
		held: map[uint64]envelope.Envelope{}}
	sub.stats.Drops = map[string]uint64{}
	if o.Replay.Mode == ReplaySinceSeq {
		sub.seq, sub.epoch = o.Replay.Seq, o.Replay.Epoch
		sub.posSeq, sub.posEpoch = o.Replay.Seq, o.Replay.Epoch
	}
	if !n.goWait(sub.hand) {
		return nil, ErrClosed
	}
	n.know(publisher)
	n.sub.start(sub, false)
	return sub, nil
}

// start (re)sends sub's subscription under a new id; resume asks for what
// came after the last message delivered.
func (s *subscriber) start(sub *Subscription, resume bool) {
	s.mu.Lock()
	if sub.closed {
		s.mu.Unlock()
		return
	}
	old := sub.id
	if old != 0 {
		delete(s.byID, subKey{sub.publisher, old})
	}
	s.nextID++
	sub.id, sub.next, sub.confirmed = s.nextID, 1, false
	sub.acked, sub.ackSent, sub.ackAgain, sub.paced = 0, 0, false, false
	sub.resume = resume
	clear(sub.held)
	s.byID[subKey{sub.publisher, sub.id}] = sub
	s.mu.Unlock()
	if old != 0 {
		s.n.mu.Lock()
		p := s.n.peerLocked(sub.publisher)
		s.n.mu.Unlock()
		if p != nil {
			u := newEnvelope(protocol.BusKindUnsub)
			u.ID = old
			s.n.control(p, u)
		}
	}
	s.send(sub)
}

// send sends sub's subscription request for its current id.
func (s *subscriber) send(sub *Subscription) {
	s.mu.Lock()
	if sub.closed {
		s.mu.Unlock()
		return
	}
	resume := sub.resume
	e := newEnvelope(protocol.BusKindSub)
	e.ID, e.Filters, e.Policy, e.HWM = sub.id, sub.filters, sub.opt.Policy, uint32(sub.opt.HWM)
	e.Credit = uint32(sub.window)
	r := sub.opt.Replay
	switch {
	case resume || (r.Mode == ReplaySinceSeq):
		e.Replay, e.ReplayArg, e.Epoch = ReplaySinceSeq, max(sub.seq, sub.base), sub.epoch
	case r.Mode == ReplayLast:
		e.Replay, e.ReplayArg = ReplayLast, r.N
	case r.Mode == ReplaySinceTime:
		e.Replay, e.ReplayArg = ReplaySinceTime, uint64(r.Time.UnixNano())
	}
	s.mu.Unlock()
	s.n.mu.Lock()
	p := s.n.peerLocked(sub.publisher)
	s.n.mu.Unlock()
	if p != nil {
		s.n.control(p, e)
	}
}

// peer resubscribes to a publisher that restarted or that was down (it
// may have released the subscription meanwhile: Config.ReleaseSilent),
// resuming after the last message delivered, and asks again for the
// subscriptions a publisher that came up has not confirmed (it takes a
// repeated request as one).
func (s *subscriber) peer(name string, st PeerState, restarted bool) {
	if st == PeerDown {
		s.mu.Lock()
		for k, sub := range s.byID {
			if k.peer == name {
				sub.lost = true
			}
		}
		s.mu.Unlock()
		return
	}
	if st != PeerUp {
		return
	}
	s.mu.Lock()
	var again, repeat []*Subscription
	for k, sub := range s.byID {
		switch {
		case k.peer != name:
		case restarted:
			sub.lost = false
			again = append(again, sub)
		case !sub.confirmed || sub.lost:
			// A subscription that stands is not changed by a repeat; one the
			// publisher released meanwhile is refused as ended, and then
			// subscribed again (input).
			sub.lost = false
			repeat = append(repeat, sub)
		}
	}
	s.mu.Unlock()
	for _, sub := range again {
		s.start(sub, sub.seq > 0 || sub.opt.Replay.Mode == ReplaySinceSeq)
	}
	for _, sub := range repeat {
		s.send(sub)
	}
}

// input takes an envelope of a subscription's stream.
func (s *subscriber) input(from string, e *envelope.Envelope) {
	s.mu.Lock()
	sub := s.byID[subKey{from, e.ID}]
	if sub == nil {
		stray := e.Kind != protocol.BusKindSubOK && s.forgetLocked(subKey{from, e.ID})
		s.mu.Unlock()
		s.n.bad(from, e, "no such subscription")
		if stray { // the publisher sends for a subscription we ended: stop it
			s.n.mu.Lock()
			p := s.n.peerLocked(from)
			s.n.mu.Unlock()
			if p != nil {
				u := newEnvelope(protocol.BusKindUnsub)
				u.ID = e.ID
				s.n.control(p, u)
			}
		}
		return
	}
	var out []item
	switch e.Kind {
	case protocol.BusKindSubOK:
		switch {
		case e.Error != "" && sub.confirmed && strings.HasSuffix(e.Error, endedSilent):
			// Released while we were out of touch: subscribe again,
			// resuming after what was delivered.
			s.mu.Unlock()
			s.start(sub, true)
			return
		case e.Error != "" && sub.confirmed && (strings.HasSuffix(e.Error, endedCut) || strings.HasSuffix(e.Error, endedSlow)):
			// The refusal of a repeat of a request the publisher cut: its
			// cut, queued before this refusal but sent on another path,
			// ends the subscription with what it dropped.
			s.mu.Unlock()
			return
		case strings.HasPrefix(e.Error, budgetRefusal):
			sub.err = fmt.Errorf("%w: %s refused the subscription: %s", ErrOverBudget, from, e.Error)
			s.endLocked(sub)
		case e.Error != "":
			sub.err = fmt.Errorf("raet bus: %s refused the subscription: %s", from, e.Error)
			s.endLocked(sub)
		default:
			sub.confirmed = true
			sub.paced = e.Credit > 0
			if sub.epoch == 0 {
				sub.epoch = e.Epoch
			}
			if sub.posEpoch == 0 {
				sub.posEpoch = e.Epoch
			}
			if sub.seq == 0 && sub.base == 0 {
				sub.base = e.Seq
			}
		}
		sub.readyOnce.Do(func() { close(sub.ready) })
	default:
		out = sub.orderLocked(e)
		if sub.err == ErrCut {
			s.endLocked(sub)
		}
	}
	s.mu.Unlock()
	for _, it := range out {
		select {
		case sub.in <- it:
			continue
		default:
		}
		// Only a publisher that takes no acknowledgements (or does not
		// keep to the window) fills the buffer: it is paced by the
		// transport, holding up the node's receiving.
		select {
		case sub.in <- it:
		case <-sub.done:
			return
		case <-s.n.ctx.Done():
			return
		}
	}
}

// hand is the subscription's goroutine: it hands the buffered deliveries
// to the application one by one, and so knows which it has taken
// (Position).
func (sub *Subscription) hand() {
	s := &sub.n.sub
	for {
		var it item
	take:
		for {
			select {
			case it = <-sub.in:
				break take
			case r := <-sub.posReq:
				r <- sub.position()
			case <-sub.done:
				return
			case <-s.n.ctx.Done():
				return
			}
		}
		d := it.d
	give:
		for d.Kind != 0 {
			select {
			case sub.c <- d:
				break give
			case r := <-sub.posReq: // d is not taken yet
				r <- sub.position()
			case <-sub.done:
				return
			case <-s.n.ctx.Done():
				return
			}
		}
		s.mu.Lock()
		switch {
		case d.Kind == DeliveryMessage:
			sub.posEpoch, sub.posSeq = d.Epoch, d.Seq
		case d.Kind == DeliveryGap && d.Epoch != 0 && d.Epoch != sub.posEpoch:
			sub.posEpoch, sub.posSeq = d.Epoch, 0 // another history: its numbers start again
		}
		ack := sub.tookLocked(it)
		s.mu.Unlock()
		if ack != nil {
			sub.sendAck(ack, true)
		}
	}
}

// tookLocked notes that the application took it's delivery and returns the
// acknowledgement to send, if one is due: each quarter of the window, so
// that a publisher that filled the window hears of room before the
// subscriber has taken it all.
func (sub *Subscription) tookLocked(it item) *envelope.Envelope {
	if it.id != sub.id || it.ix <= sub.acked || sub.closed {
		return nil
	}
	sub.acked = it.ix
	if !sub.paced || sub.acked-sub.ackSent < uint64(max(sub.window/4, 1)) {
		return nil
	}
	return sub.ackLocked()
}

// ackLocked returns the acknowledgement of what the application took.
func (sub *Subscription) ackLocked() *envelope.Envelope {
	sub.ackSent, sub.ackAgain = sub.acked, true
	e := newEnvelope(protocol.BusKindAck)
	e.ID, e.Index = sub.id, sub.acked
	return &e
}

// sendAck sends an acknowledgement to the publisher. When the peer's
// control queue is full, the subscription's own goroutine sends it (wait),
// waiting at most ControlTimeout: a publisher that filled the window waits
// for it, and the heartbeat's repeat may be off.
func (sub *Subscription) sendAck(e *envelope.Envelope, wait bool) {
	n := sub.n
	n.mu.Lock()
	p := n.peerLocked(sub.publisher)
	n.mu.Unlock()
	if p == nil || n.control(p, *e) || !wait {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ControlTimeout)
	defer cancel()
	if err := n.t.Send(ctx, sub.publisher, e.Map()); err != nil {
		n.log.Debug("ack not sent", "peer", sub.publisher, "id", e.ID, "err", err)
	}
}

// tick repeats, at a heartbeat, the acknowledgements sent since the last
// one, and sends those not due yet: a control envelope may be dropped, and
// a publisher that filled the window waits for the next one.
func (s *subscriber) tick() {
	s.mu.Lock()
	var acks []*envelope.Envelope
	var subs []*Subscription
	for _, sub := range s.byID {
		if sub.paced && (sub.ackAgain || sub.acked > sub.ackSent) {
			acks = append(acks, sub.ackLocked())
			sub.ackAgain = false
			subs = append(subs, sub)
		}
	}
	s.mu.Unlock()
	for i, e := range acks {
		subs[i].sendAck(e, false) // the node's reader: it must not wait
	}
}

func (sub *Subscription) isClosed() bool {
	select {
	case <-sub.done:
		return true
	default:
		return false
	}
}

// endLocked ends sub after a refusal or a cut.
func (s *subscriber) endLocked(sub *Subscription) {
	if !sub.closed {
		sub.closed = true
		delete(s.byID, subKey{sub.publisher, sub.id})
	}
}

func (sub *Subscription) addDrops(d map[string]uint64) {
	for k, v := range d {
		sub.stats.Drops[k] += v
	}
}

// orderLocked places a stream item by its index and returns what can be
// delivered now, in order.
func (sub *Subscription) orderLocked(e *envelope.Envelope) []item {
	switch {
	case e.Index < sub.next:
		sub.stats.Duplicates++
		return nil
	case e.Index > sub.next:
		if _, dup := sub.held[e.Index]; dup {
			sub.stats.Duplicates++
			return nil
		}
		sub.held[e.Index] = *e
		if len(sub.held) <= maxHeld {
			return nil
		}
		// Never filled: report the hole and go on from the lowest held.
		lowest := e.Index
		for ix := range sub.held {
			lowest = min(lowest, ix)
		}
		sub.stats.Gaps++
		out := []item{{d: Delivery{Kind: DeliveryGap, Publisher: sub.publisher, Missed: 0}, id: sub.id}}
		sub.next = lowest
		return append(out, sub.drainLocked()...)
	}
	if len(sub.held) == 0 { // in order, nothing waiting: no need to hold it
		sub.next++
		return sub.deliverLocked(e, nil)
	}
	sub.held[e.Index] = *e
	return sub.drainLocked()
}

func (sub *Subscription) drainLocked() []item {
	var out []item
	for {
		e, ok := sub.held[sub.next]
		if !ok {
			return out
		}
		delete(sub.held, sub.next)
		sub.next++
		if out = sub.deliverLocked(&e, out); sub.err == ErrCut {
			return out
		}
	}
}

// deliverLocked appends what item e (the next of the stream) delivers to
// out: one delivery, or an item that delivers nothing, to be acknowledged.
func (sub *Subscription) deliverLocked(e *envelope.Envelope, out []item) []item {
	it := item{id: sub.id, ix: e.Index}
	if d, ok := sub.deliveryLocked(e); ok {
		it.d = d
	}
	return append(out, it)
}

// deliveryLocked returns what item e (the next of the stream) delivers, if
// anything.
func (sub *Subscription) deliveryLocked(e *envelope.Envelope) (Delivery, bool) {
	sub.addDrops(e.Drops)
	d := Delivery{Publisher: sub.publisher, Drops: e.Drops}
	switch e.Kind {
	case protocol.BusKindPub:
		if sub.seq != 0 && e.Seq <= sub.seq {
			// Already delivered before a resubscription.
			sub.stats.Duplicates++
			if len(e.Drops) == 0 {
				return d, false
			}
			d.Kind = DeliveryDrops
			return d, true
		}
		sub.seq = e.Seq
		sub.stats.Messages++
		d.Kind, d.Subject, d.Seq, d.Time, d.Origin, d.Body = DeliveryMessage, e.Subject, e.Seq, time.Unix(0, e.Time), e.Origin, e.Body
		d.Epoch = sub.epoch
	case protocol.BusKindDrop:
		d.Kind = DeliveryDrops
	case protocol.BusKindCut:
		sub.err = ErrCut
		d.Kind = DeliveryCut
	case protocol.BusKindGap:
		sub.stats.Gaps++
		if e.Epoch != 0 {
			if e.Epoch != sub.epoch {
				sub.seq = 0 // another history: its numbers start again
			}
			sub.epoch = e.Epoch
		}
		d.Kind, d.Missed, d.Seq, d.Epoch = DeliveryGap, e.Missed, e.Seq, sub.epoch
	default:
		return d, false
	}
	return d, true
}

// Messages is the channel of the subscription's deliveries, in order.
func (sub *Subscription) Messages() <-chan Delivery { return sub.c }

// Ready is closed when the publisher has confirmed (or refused: see Err)
// the subscription.
func (sub *Subscription) Ready() <-chan struct{} { return sub.ready }

// Err is why the subscription ended (refused, cut), or nil.
func (sub *Subscription) Err() error {
	s := &sub.n.sub
	s.mu.Lock()
	defer s.mu.Unlock()
	return sub.err
}

// Position is where the application is: the publisher history's epoch and
// the sequence number of the last message it took from Messages (not of
// those still buffered). Keep it to resume after a restart of the
// subscriber with Replay{Mode: ReplaySinceSeq, Seq: seq, Epoch: epoch}. An
// application that may die between taking a message and processing it
// keeps the Epoch and Seq of the last delivery it processed instead.
func (sub *Subscription) Position() (epoch, seq uint64) {
	// The subscription's goroutine answers between handing deliveries,
	// so that one the application has just taken is counted.
	r := make(chan [2]uint64, 1)
	select {
	case sub.posReq <- r:
		p := <-r
		return p[0], p[1]
	case <-sub.done:
	case <-sub.n.ctx.Done():
	}
	p := sub.position()
	return p[0], p[1]
}

func (sub *Subscription) position() [2]uint64 {
	s := &sub.n.sub
	s.mu.Lock()
	defer s.mu.Unlock()
	return [2]uint64{sub.posEpoch, sub.posSeq}
}

// Stats returns the subscription's counters.
func (sub *Subscription) Stats() SubscriptionStats {
	s := &sub.n.sub
	s.mu.Lock()
	defer s.mu.Unlock()
	st := sub.stats
	st.Drops = make(map[string]uint64, len(sub.stats.Drops))
	for k, v := range sub.stats.Drops {
		st.Drops[k] = v
	}
	return st
}

// leaveTimeout bounds how long Node.Close waits for its publishers to take
// its unsubscriptions: a publisher that is down will release them itself
// (Config.ReleaseSilent).
const leaveTimeout = time.Second

// leave ends every subscription of a closing node and tells each publisher,
// sending at once rather than through the control queues, which stop with
// the node.
func (s *subscriber) leave() {
	s.mu.Lock()
	var ended []subKey
	for k, sub := range s.byID {
		s.endLocked(sub)
		ended = append(ended, k)
	}
	s.mu.Unlock()
	if len(ended) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.n.ctx, leaveTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, k := range ended {
		wg.Go(func() {
			u := newEnvelope(protocol.BusKindUnsub)
			u.ID = k.id
			if err := s.n.t.Send(ctx, k.peer, u.Map()); err != nil {
				s.n.log.Debug("unsubscription not sent", "peer", k.peer, "id", k.id, "err", err)
			}
		})
	}
	wg.Wait()
}

// Close ends the subscription and tells the publisher.
func (sub *Subscription) Close() error {
	s := &sub.n.sub
	s.mu.Lock()
	if sub.isClosed() {
		s.mu.Unlock()
		return nil
	}
	wasOpen := !sub.closed
	s.endLocked(sub)
	close(sub.done)
	id := sub.id
	s.mu.Unlock()
	if wasOpen {
		s.n.mu.Lock()
		p := s.n.peerLocked(sub.publisher)
		s.n.mu.Unlock()
		if p != nil {
			u := newEnvelope(protocol.BusKindUnsub)
			u.ID = id
			s.n.control(p, u)
		}
	}
	return nil
}
