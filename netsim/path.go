package netsim

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// LinkStats counts what happened to the datagrams sent one way along a
// link. Each datagram is either lost or becomes one or two copies, and each
// copy ends up forwarded, undelivered, queue-dropped, or still in flight.
// Once nothing is in flight:
//
//	Received - Dropped + Duplicated == Forwarded + Undelivered + QueueDrops
type LinkStats struct {
	// Received counts datagrams that entered the link.
	Received uint64
	// Forwarded counts copies handed to the destination: written to its
	// socket (Relay) or queued for its reader (Network). A copy is counted
	// just before it is handed over, so a receiver never holds a datagram
	// that the counts do not include yet.
	Forwarded uint64
	// Dropped counts datagrams lost to Impairment.Loss.
	Dropped uint64
	// Duplicated counts the extra copies made by Impairment.Duplicate.
	Duplicated uint64
	// Reordered counts copies given Impairment.ReorderDelay.
	Reordered uint64
	// Delayed counts copies that waited in the delay queue (any copy whose
	// delay was not zero, reordered ones included).
	Delayed uint64
	// QueueDrops counts copies dropped because the direction already had
	// Impairment.Limit copies in the delay queue.
	QueueDrops uint64
	// Undelivered counts copies that survived the impairments but could
	// not be handed over: the socket write failed (Relay), or the
	// destination's receive queue was full or closed (Network).
	Undelivered uint64
}

// linkCounters is the live, concurrently updated form of LinkStats.
type linkCounters struct {
	received, forwarded, dropped, duplicated atomic.Uint64
	reordered, delayed, queueDrops           atomic.Uint64
	undelivered                              atomic.Uint64
}

func (c *linkCounters) snapshot() LinkStats {
	return LinkStats{
		Received:    c.received.Load(),
		Forwarded:   c.forwarded.Load(),
		Dropped:     c.dropped.Load(),
		Duplicated:  c.duplicated.Load(),
		Reordered:   c.reordered.Load(),
		Delayed:     c.delayed.Load(),
		QueueDrops:  c.queueDrops.Load(),
		Undelivered: c.undelivered.Load(),
	}
}

// drawsPerDatagram is how many values every datagram takes from the source,
// whatever the settings: loss, duplicate, then reorder and jitter for each
// of the two possible copies. A fixed count keeps each decision a function
// of the seed and the datagram's index alone.
const drawsPerDatagram = 6

// copyPlan is the fate of one copy of a datagram.
type copyPlan struct {
	delay     time.Duration
	reordered bool
}

// fate is the fate of one datagram: n copies (0 when lost, 2 when
// duplicated), and the delay-queue limit in force when it was decided.
type fate struct {
	n      int
	copies [2]copyPlan
	limit  int
}

// path is the impairment engine for one direction of one link: its
// settings, its pseudo-random source and its counters. It is shared by
// Relay (one per direction) and Network (one per ordered address pair).
type path struct {
	salt   uint64 // mixed into the PCG seed (a Network's seed; 0 for a Relay)
	stream uint64 // second PCG seed word: tells the paths apart

	mu  sync.Mutex
	imp Impairment // with defaults filled in
	src *rand.PCG
	rng *rand.Rand

	stats    linkCounters
	inflight atomic.Int64 // copies in the delay queue
}

// newPath returns a path with settings imp (already validated).
func newPath(imp Impairment, salt, stream uint64) *path {
	p := &path{salt: salt, stream: stream, imp: imp.withDefaults()}
	p.src = rand.NewPCG(imp.Seed^salt, stream)
	p.rng = rand.New(p.src)
	return p
}

// set changes the settings. The random sequence carries on unless the
// seed changes, in which case it restarts from the new seed.
func (p *path) set(imp Impairment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if imp.Seed != p.imp.Seed {
		p.src.Seed(imp.Seed^p.salt, p.stream)
	}
	p.imp = imp.withDefaults()
}

// decide draws the fate of the next datagram and counts the datagram and
// its loss, duplication and reordering.
func (p *path) decide() fate {
	p.mu.Lock()
	imp := p.imp
	var u [drawsPerDatagram]float64
	for i := range u {
		u[i] = p.rng.Float64()
	}
	p.mu.Unlock()

	p.stats.received.Add(1)
	f := fate{limit: imp.Limit}
	if u[0] < imp.Loss {
		p.stats.dropped.Add(1)
		return f
	}
	f.n = 1
	if u[1] < imp.Duplicate {
		f.n = 2
		p.stats.duplicated.Add(1)
	}
	for i := range f.n {
		c := &f.copies[i]
		c.delay = imp.Delay
		if imp.Jitter > 0 {
			// u in [0, 1) maps to [-Jitter, +Jitter).
			c.delay += time.Duration((2*u[2+2*i+1] - 1) * float64(imp.Jitter))
			c.delay = max(c.delay, 0)
		}
		if u[2+2*i] < imp.Reorder {
			c.reordered = true
			c.delay += imp.ReorderDelay
			p.stats.reordered.Add(1)
		}
	}
	return f
}

// Fates draws the fate of each datagram sent one way along a link, for a
// simulator that keeps its own clock (the road core's tests run two cores
// on a fake clock): the delays of its copies, none when it is lost, as a
// Relay or a Network would impair it. Impairment.Limit does not apply.
type Fates struct{ p *path }

// NewFates returns the fates of a direction with settings imp.
func NewFates(imp Impairment) (*Fates, error) {
	if err := imp.Validate(); err != nil {
		return nil, err
	}
	return &Fates{newPath(imp, 0, 0)}, nil
}

// Next appends to dst the delays of the copies of the next datagram.
func (f *Fates) Next(dst []time.Duration) []time.Duration {
	fa := f.p.decide()
	for _, c := range fa.copies[:fa.n] {
		dst = append(dst, c.delay)
	}
	return dst
}

// Stats returns what the fates drawn so far did.
func (f *Fates) Stats() LinkStats { return f.p.stats.snapshot() }
