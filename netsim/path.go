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
//	Received - Dropped + Duplicated == Forwarded + Undelivered + QueueDrops + ShaperDrops
type LinkStats struct {
	// Received counts datagrams that entered the link.
	Received uint64
	// Forwarded counts copies handed to the destination: written to its
	// socket (Relay) or queued for its reader (Network). A copy is counted
	// just before it is handed over, so a receiver never holds a datagram
	// that the counts do not include yet.
	Forwarded uint64
	// Dropped counts datagrams lost to Impairment.Loss or Impairment.Bursts.
	Dropped uint64
	// BurstDropped counts the datagrams of Dropped lost in the bad state
	// of Impairment.Bursts.
	BurstDropped uint64
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
	// ShaperDrops counts copies dropped at the tail of the queue of
	// Impairment.Rate, which already held Impairment.Queue datagrams.
	ShaperDrops uint64
	// Undelivered counts copies that survived the impairments but could
	// not be handed over: the socket write failed (Relay), or the
	// destination's receive queue was full or closed (Network).
	Undelivered uint64
}

// linkCounters is the live, concurrently updated form of LinkStats.
type linkCounters struct {
	received, forwarded, dropped, duplicated atomic.Uint64
	reordered, delayed, queueDrops           atomic.Uint64
	undelivered, burstDropped, shaperDrops   atomic.Uint64
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

		BurstDropped: c.burstDropped.Load(),
		ShaperDrops:  c.shaperDrops.Load(),
	}
}

// drawsPerDatagram is how many values every datagram takes from the source,
// whatever the settings: loss, duplicate, then reorder and jitter for each
// of the two possible copies. A fixed count keeps each decision a function
// of the seed and the datagram's index alone.
const drawsPerDatagram = 6

// burstDrawsPerDatagram is how many values every datagram takes from the
// second source, which serves Impairment.Bursts: the loss draw in the
// current state and the state change. A source of its own keeps the first
// source's sequence, and the seeds recorded against it, as they were.
const burstDrawsPerDatagram = 2

// burstStream tells a path's second PCG stream from its first.
const burstStream = 0x6275727374 // "burst"

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

	mu       sync.Mutex
	imp      Impairment // with defaults filled in
	src      *rand.PCG
	rng      *rand.Rand
	burstSrc *rand.PCG
	burstRng *rand.Rand
	bad      bool // the Gilbert-Elliott channel is in its bad state

	// The clocked state (Relay and Network; not Fates).
	tat     time.Time   // the bandwidth's theoretical arrival time (GCRA)
	waiting []time.Time // start times of copies waiting for the bandwidth, oldest first
	last    time.Time   // arrival of the latest in-order copy

	stats    linkCounters
	inflight atomic.Int64 // copies in the delay queue
}

// newPath returns a path with settings imp (already validated).
func newPath(imp Impairment, salt, stream uint64) *path {
	p := &path{salt: salt, stream: stream, imp: imp.withDefaults()}
	p.src = rand.NewPCG(imp.Seed^salt, stream)
	p.rng = rand.New(p.src)
	p.burstSrc = rand.NewPCG(imp.Seed^salt, stream^burstStream)
	p.burstRng = rand.New(p.burstSrc)
	return p
}

// set changes the settings. The random sequence carries on unless the
// seed changes, in which case it restarts from the new seed.
func (p *path) set(imp Impairment) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if imp.Seed != p.imp.Seed {
		p.src.Seed(imp.Seed^p.salt, p.stream)
		p.burstSrc.Seed(imp.Seed^p.salt, p.stream^burstStream)
		p.bad = false
	}
	p.imp = imp.withDefaults()
}

// decide draws the fate of the next datagram without a clock (for Fates):
// no bandwidth and no ordering, only the draws.
func (p *path) decide() fate { return p.decideAt(time.Time{}, 0) }

// decideAt draws the fate of the next datagram, of size bytes, sent at now,
// and counts the datagram and its loss, duplication and reordering. The
// delays of its copies are from now. A zero now leaves out what needs a
// clock: the bandwidth and the link's order.
func (p *path) decideAt(now time.Time, size int) fate {
	p.mu.Lock()
	defer p.mu.Unlock()
	imp := p.imp
	var u [drawsPerDatagram]float64
	for i := range u {
		u[i] = p.rng.Float64()
	}
	var g [burstDrawsPerDatagram]float64
	for i := range g {
		g[i] = p.burstRng.Float64()
	}

	p.stats.received.Add(1)
	f := fate{limit: imp.Limit}
	burstLoss := imp.Bursts.GoodLoss
	if p.bad {
		burstLoss = imp.Bursts.BadLoss
	}
	wasBad := p.bad
	if p.bad {
		p.bad = g[1] >= imp.Bursts.BadToGood
	} else {
		p.bad = g[1] < imp.Bursts.GoodToBad
	}
	if u[0] < imp.Loss {
		p.stats.dropped.Add(1)
		return f
	}
	if g[0] < burstLoss {
		p.stats.dropped.Add(1)
		if wasBad {
			p.stats.burstDropped.Add(1)
		}
		return f
	}
	copies := 1
	if u[1] < imp.Duplicate {
		copies = 2
		p.stats.duplicated.Add(1)
	}
	clocked := !now.IsZero()
	for i := range copies {
		start := now
		if clocked && imp.Rate > 0 {
			var ok bool
			if start, ok = p.shape(now, size, imp); !ok {
				p.stats.shaperDrops.Add(1)
				continue
			}
		}
		jitter := time.Duration(0)
		if imp.Jitter > 0 {
			// u in [0, 1) maps to [-Jitter, +Jitter).
			jitter = time.Duration((2*u[2+2*i+1] - 1) * float64(imp.Jitter))
		}
		delay := max(imp.Delay+jitter, 0) + start.Sub(now)
		reordered := u[2+2*i] < imp.Reorder
		if clocked && !imp.JitterReorders {
			at := now.Add(delay)
			if at.Before(p.last) {
				at = p.last
			}
			if !reordered {
				p.last = at
			}
			delay = at.Sub(now)
		}
		if reordered {
			delay += imp.ReorderDelay
			p.stats.reordered.Add(1)
		}
		f.copies[f.n] = copyPlan{delay: delay, reordered: reordered}
		f.n++
	}
	return f
}

// shape passes a copy of size bytes, arriving at now, through the token
// bucket of imp.Rate: it returns when the copy has left it (its last bit
// sent), or false when the queue before it is full.
func (p *path) shape(now time.Time, size int, imp Impairment) (time.Time, bool) {
	gone := 0
	for gone < len(p.waiting) && !p.waiting[gone].After(now) {
		gone++
	}
	p.waiting = p.waiting[gone:]
	if len(p.waiting) >= imp.Queue {
		return time.Time{}, false
	}
	perByte := float64(time.Second) * 8 / imp.Rate
	send := time.Duration(float64(size) * perByte)
	tolerance := time.Duration(float64(imp.Burst) * perByte)
	if p.tat.Before(now) {
		p.tat = now
	}
	start := p.tat.Add(-tolerance)
	if start.Before(now) {
		start = now
	}
	p.tat = p.tat.Add(send)
	if start.After(now) {
		p.waiting = append(p.waiting, start)
	}
	return start.Add(send), true
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

// NextAt appends to dst the delays, from now, of the copies of the next
// datagram, of size bytes, sent at now: as Next, and with what needs a
// clock as well, Impairment.Rate (and its Queue) and the link's order.
// now must not go backwards. An emulator that moves real packets (such as
// cmd/raet-netem) holds each copy for its delay.
func (f *Fates) NextAt(dst []time.Duration, now time.Time, size int) []time.Duration {
	fa := f.p.decideAt(now, size)
	for _, c := range fa.copies[:fa.n] {
		dst = append(dst, c.delay)
	}
	return dst
}

// Set changes the settings from the next datagram on; the random sequence
// carries on unless the seed changes.
func (f *Fates) Set(imp Impairment) error {
	if err := imp.Validate(); err != nil {
		return err
	}
	f.p.set(imp)
	return nil
}

// Stats returns what the fates drawn so far did.
func (f *Fates) Stats() LinkStats { return f.p.stats.snapshot() }
