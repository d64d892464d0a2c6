package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/road"
)

// The keys of an envelope (see the package documentation).
const (
	keyYard   = "yard"   // on the road: the yard behind the bridge
	keyEstate = "estate" // on the lane: the estate across the road
	keyBody   = "body"   // the message, a mapping, passed on as it is
	keyError  = "error"  // in a notice from the bridge, instead of body
)

// Defaults of BridgeConfig.
const (
	DefaultWorkers     = 4
	DefaultQueue       = 64
	DefaultLaneTimeout = 10 * time.Second
	DefaultRoadTimeout = 30 * time.Second
)

// BridgeConfig configures a Bridge. Road and Lane are required; every other
// field has a working zero value.
type BridgeConfig struct {
	// Road is the estate's road stack, started. The bridge reads all of
	// its Receive channel.
	Road *road.Stack
	// Lane is the bridge's own yard, started. The bridge reads all of its
	// Receive channel.
	Lane *lane.Stack
	// Workers is the number of goroutines forwarding each way. The
	// messages for one yard (or to one estate) always go through the same
	// one, so they keep their order. Zero means DefaultWorkers.
	Workers int
	// Queue bounds the messages waiting for each worker. When a queue is
	// full the bridge stops reading that side, and senders see the stacks'
	// back-pressure. Zero means DefaultQueue.
	Queue int
	// LaneTimeout bounds a delivery to a yard (lane.Send waits for room
	// in a busy yard). Zero means DefaultLaneTimeout.
	LaneTimeout time.Duration
	// RoadTimeout bounds a send to an estate (road.Send waits for the
	// estate's done, retransmitting). Zero means DefaultRoadTimeout.
	RoadTimeout time.Duration
	// Logger gets the bridge's logs; nil discards them. Per-message
	// events are logged at debug level only.
	Logger *slog.Logger
}

// BridgeCounters counts what a bridge did.
type BridgeCounters struct {
	FromRoad uint64 // envelopes received from estates
	ToLane   uint64 // ... delivered to their yards
	FromLane uint64 // envelopes received from yards
	ToRoad   uint64 // ... delivered to their estates (done)
	// Malformed counts messages that are not envelopes (no name, no body
	// mapping, or a notice): dropped, never answered.
	Malformed uint64
	// Failed counts envelopes that could not be delivered; their senders
	// got a notice.
	Failed uint64
	// Notices counts the notices delivered; NoticesLost those that could
	// not be (a full queue, or a failed send: a notice is never answered
	// with a notice).
	Notices     uint64
	NoticesLost uint64
}

// A Bridge forwards envelopes between a road estate and the yards of its
// lane. Create it with NewBridge, run it with Start, stop it with Shutdown
// (which passes on what it has taken) or Close; the stacks stay the
// caller's, to close after the bridge.
type Bridge struct {
	cfg    BridgeConfig
	log    *slog.Logger
	toLane []chan job // by yard
	toRoad []chan job // by estate

	ctx      context.Context // canceled by Close: ends the sends in flight
	cancel   context.CancelFunc
	draining chan struct{} // closed by Shutdown: the readers stop
	closing  chan struct{}
	wg       sync.WaitGroup // every goroutine
	readers  sync.WaitGroup // the two readers
	pending  sync.WaitGroup // jobs queued or being sent
	mu       sync.Mutex
	started  bool
	closed   bool

	fromRoad, toLaneN, fromLane, toRoadN atomic.Uint64
	malformed, failed, notices, lost     atomic.Uint64
}

// job is one envelope to pass on.
type job struct {
	to   string         // the yard (toLane) or the estate (toRoad)
	from string         // the estate (toLane) or the yard (toRoad) it came from
	body map[string]any // nil for a notice
	err  string         // a notice's error
}

// NewBridge checks cfg and returns a bridge; it starts nothing.
func NewBridge(cfg BridgeConfig) (*Bridge, error) {
	if cfg.Road == nil || cfg.Lane == nil {
		return nil, errors.New("bridge: Road and Lane are required")
	}
	if cfg.Workers < 0 || cfg.Queue < 0 || cfg.LaneTimeout < 0 || cfg.RoadTimeout < 0 {
		return nil, errors.New("bridge: Workers, Queue, LaneTimeout and RoadTimeout may not be negative")
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Queue == 0 {
		cfg.Queue = DefaultQueue
	}
	if cfg.LaneTimeout == 0 {
		cfg.LaneTimeout = DefaultLaneTimeout
	}
	if cfg.RoadTimeout == 0 {
		cfg.RoadTimeout = DefaultRoadTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Bridge{cfg: cfg, log: cfg.Logger, draining: make(chan struct{}), closing: make(chan struct{})}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	for range cfg.Workers {
		b.toLane = append(b.toLane, make(chan job, cfg.Queue))
		b.toRoad = append(b.toRoad, make(chan job, cfg.Queue))
	}
	return b, nil
}

// Start starts the bridge's goroutines: a reader for each stack and
// Workers forwarders each way.
func (b *Bridge) Start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return errors.New("bridge: closed")
	case b.started:
		return errors.New("bridge: started already")
	}
	b.started = true
	b.wg.Add(2 + 2*len(b.toLane))
	b.readers.Add(2)
	go b.readRoad()
	go b.readLane()
	for i := range b.toLane {
		go b.forward(b.toLane[i], b.sendLane)
		go b.forward(b.toRoad[i], b.sendRoad)
	}
	b.log.Info("bridge started", "estate", b.cfg.Road.Name(), "addr", b.cfg.Road.Addr(), "yard", b.cfg.Lane.Path())
	return nil
}

// Shutdown stops the bridge gracefully: it stops taking envelopes from
// either stack, waits until every envelope already taken has been passed on
// (or has failed and been answered with a notice), and then closes as
// Close does. If ctx ends first, the sends still in flight are canceled and
// Shutdown returns ctx's error. The counters are final once it returns.
func (b *Bridge) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	started := b.started
	if started {
		select {
		case <-b.draining:
		default:
			close(b.draining)
		}
	}
	b.mu.Unlock()
	if !started {
		return b.Close()
	}
	drained := make(chan struct{})
	go func() {
		// The readers first: from then on only the workers' notices add
		// jobs, each while the job it answers is pending.
		b.readers.Wait()
		b.pending.Wait()
		close(drained)
	}()
	var err error
	select {
	case <-drained:
	case <-ctx.Done():
		err = fmt.Errorf("bridge: shutdown: %w (sends in flight canceled)", ctx.Err())
	}
	b.Close()
	<-drained // Close ends or drops every job
	return err
}

// Close stops the bridge and waits for its goroutines. Sends in flight
// are canceled; envelopes still queued are dropped (logged, with their
// count). Close does not close the stacks. It is idempotent.
func (b *Bridge) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	close(b.closing)
	b.cancel()
	b.wg.Wait()
	dropped := 0
	for _, qs := range [][]chan job{b.toLane, b.toRoad} {
		for _, q := range qs {
			for len(q) > 0 {
				<-q
				b.pending.Done()
				dropped++
			}
		}
	}
	if dropped > 0 {
		b.log.Warn("bridge: closed with envelopes still queued; dropped", "dropped", dropped)
	}
	return nil
}

// Counters returns a snapshot of the bridge's counters.
func (b *Bridge) Counters() BridgeCounters {
	return BridgeCounters{
		FromRoad: b.fromRoad.Load(), ToLane: b.toLaneN.Load(),
		FromLane: b.fromLane.Load(), ToRoad: b.toRoadN.Load(),
		Malformed: b.malformed.Load(), Failed: b.failed.Load(),
		Notices: b.notices.Load(), NoticesLost: b.lost.Load(),
	}
}

// envelope reads {nameKey: name, "body": {...}}; other keys are ignored.
func envelope(m map[string]any, nameKey string) (name string, body map[string]any, ok bool) {
	name, _ = m[nameKey].(string)
	body, _ = m[keyBody].(map[string]any)
	return name, body, name != "" && body != nil
}

// shard picks the worker of a name (FNV-1a), so that one yard's or one
// estate's messages keep their order.
func shard(qs []chan job, name string) chan job {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return qs[h%uint32(len(qs))]
}

// readRoad takes envelopes from estates and queues them for their yards.
func (b *Bridge) readRoad() {
	defer b.wg.Done()
	defer b.readers.Done()
	for {
		var m road.Message
		var ok bool
		select {
		case m, ok = <-b.cfg.Road.Receive():
			if !ok {
				return // the road stack was closed
			}
		case <-b.draining:
			return
		case <-b.closing:
			return
		}
		yard, body, ok := envelope(m.Body, keyYard)
		if !ok {
			b.malformed.Add(1)
			b.log.Debug("bridge: not an envelope, dropped", "from_estate", m.From, "want", `{"yard":NAME,"body":{...}}`)
			continue
		}
		b.fromRoad.Add(1)
		if !b.enqueue(shard(b.toLane, yard), job{to: yard, from: m.From, body: body}) {
			return
		}
	}
}

// readLane takes envelopes from yards and queues them for their estates.
func (b *Bridge) readLane() {
	defer b.wg.Done()
	defer b.readers.Done()
	for {
		var m lane.Message
		var ok bool
		select {
		case m, ok = <-b.cfg.Lane.Receive():
			if !ok {
				return // the lane stack was closed
			}
		case <-b.draining:
			return
		case <-b.closing:
			return
		}
		estate, body, ok := envelope(m.Body, keyEstate)
		if !ok {
			b.malformed.Add(1)
			b.log.Debug("bridge: not an envelope, dropped", "from_yard", m.From, "want", `{"estate":NAME,"body":{...}}`)
			continue
		}
		b.fromLane.Add(1)
		if !b.enqueue(shard(b.toRoad, estate), job{to: estate, from: m.From, body: body}) {
			return
		}
	}
}

// enqueue waits for room in q; it returns false when the bridge closes.
func (b *Bridge) enqueue(q chan job, j job) bool {
	b.pending.Add(1)
	select {
	case q <- j:
		return true
	case <-b.closing:
		b.pending.Done()
		return false
	}
}

// forward is a worker: it passes on the envelopes of q, one at a time.
func (b *Bridge) forward(q chan job, send func(job)) {
	defer b.wg.Done()
	for {
		select {
		case j := <-q:
			send(j)
			b.pending.Done()
		case <-b.closing:
			return
		}
	}
}

// sendLane delivers an envelope (or a notice) from an estate to a yard:
// {"estate": from, "body": {...}}.
func (b *Bridge) sendLane(j job) {
	msg := map[string]any{keyEstate: j.from, keyBody: j.body}
	if j.body == nil {
		msg = map[string]any{keyEstate: j.from, keyError: j.err}
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.LaneTimeout)
	err := b.cfg.Lane.Send(ctx, j.to, msg)
	cancel()
	b.done(j, err, &b.toLaneN, func() {
		b.notify(b.toRoad, job{to: j.from, from: j.to, err: err.Error()})
	})
}

// sendRoad delivers an envelope (or a notice) from a yard to an estate:
// {"yard": from, "body": {...}}.
func (b *Bridge) sendRoad(j job) {
	msg := map[string]any{keyYard: j.from, keyBody: j.body}
	if j.body == nil {
		msg = map[string]any{keyYard: j.from, keyError: j.err}
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.RoadTimeout)
	err := b.cfg.Road.Send(ctx, j.to, msg)
	cancel()
	b.done(j, err, &b.toRoadN, func() {
		b.notify(b.toLane, job{to: j.from, from: j.to, err: err.Error()})
	})
}

// done counts the outcome of a send; a failed envelope (not a notice) is
// answered with a notice.
func (b *Bridge) done(j job, err error, sent *atomic.Uint64, notify func()) {
	switch {
	case err == nil && j.body == nil:
		b.notices.Add(1)
	case err == nil:
		sent.Add(1)
	case j.body == nil:
		b.lost.Add(1)
		b.log.Debug("bridge: a notice was not delivered", "to", j.to, "err", err)
	case b.ctx.Err() != nil:
		// Closing: nobody is left to tell.
	default:
		b.failed.Add(1)
		b.log.Debug("bridge: not delivered", "to", j.to, "from", j.from, "err", err)
		notify()
	}
}

// notify queues a notice without waiting: a full queue loses it, so that
// the two directions never wait for each other.
func (b *Bridge) notify(qs []chan job, n job) {
	b.pending.Add(1) // within the failed job's, so never from zero
	select {
	case shard(qs, n.to) <- n:
	default:
		b.pending.Done()
		b.lost.Add(1)
	}
}
