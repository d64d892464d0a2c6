package netsim

import (
	"container/heap"
	"net/netip"
	"sync"
	"time"
)

// sink is where a path hands a copy over: a socket (Relay) or a receive
// queue (Network). deliver reports whether the copy was accepted. It must
// not keep or modify data beyond the call except by copying it, since the
// copies of a duplicated datagram share it.
type sink interface {
	deliver(data []byte, from netip.AddrPort) bool
}

// parcel is a copy waiting in the delay queue.
type parcel struct {
	at   time.Time
	seq  uint64 // ties on at are served in arrival order
	data []byte
	from netip.AddrPort
	path *path
	dst  sink
}

// parcelHeap orders parcels by due time, then arrival.
type parcelHeap []parcel

func (h parcelHeap) Len() int { return len(h) }
func (h parcelHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h parcelHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *parcelHeap) Push(x any)   { *h = append(*h, x.(parcel)) }
func (h *parcelHeap) Pop() any {
	old := *h
	n := len(old) - 1
	x := old[n]
	old[n] = parcel{} // let the data be collected
	*h = old[:n]
	return x
}

// delayLine sends datagrams through paths to sinks, holding delayed copies
// in one heap served by one goroutine. The goroutine is started when a copy
// is queued and exits when the queue is empty, so an idle delayLine holds no
// goroutine; close stops it and discards what is queued.
type delayLine struct {
	mu      sync.Mutex
	queue   parcelHeap
	seq     uint64
	running bool // the serving goroutine exists
	closed  bool

	wake chan struct{} // cap 1: the earliest due time moved forward
	done chan struct{} // closed by close
	wg   sync.WaitGroup
}

func newDelayLine() *delayLine {
	return &delayLine{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// send runs one datagram through p: it is counted, maybe lost, maybe
// duplicated, and each copy is handed to dst now (zero delay, in the
// caller's goroutine) or queued. send takes ownership of data.
func (d *delayLine) send(p *path, data []byte, from netip.AddrPort, dst sink) {
	now := time.Now()
	f := p.decideAt(now, len(data))
	for _, c := range f.copies[:f.n] {
		if c.delay <= 0 {
			handOver(p, dst, data, from)
			continue
		}
		d.schedule(parcel{at: now.Add(c.delay), data: data, from: from, path: p, dst: dst}, f.limit)
	}
}

// handOver delivers one copy and counts the outcome. The copy is counted
// as forwarded before it is handed over (and moved to undelivered if that
// fails), so that whoever receives it finds it already in the counts.
func handOver(p *path, dst sink, data []byte, from netip.AddrPort) {
	p.stats.forwarded.Add(1)
	if !dst.deliver(data, from) {
		p.stats.forwarded.Add(^uint64(0)) // minus one
		p.stats.undelivered.Add(1)
	}
}

// schedule queues pc, or drops it when its path already has limit copies
// queued or the line is closed.
func (d *delayLine) schedule(pc parcel, limit int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		pc.path.stats.undelivered.Add(1)
		return
	}
	if pc.path.inflight.Load() >= int64(limit) {
		pc.path.stats.queueDrops.Add(1)
		return
	}
	pc.path.inflight.Add(1)
	pc.path.stats.delayed.Add(1)
	d.seq++
	pc.seq = d.seq
	heap.Push(&d.queue, pc)
	if !d.running {
		d.running = true
		d.wg.Add(1)
		go d.serve()
		return
	}
	if d.queue[0].seq == pc.seq {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// serve delivers queued copies when they fall due, until the queue is
// empty or the line is closed.
func (d *delayLine) serve() {
	defer d.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var due []parcel
	for {
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			return
		}
		now := time.Now()
		for len(d.queue) > 0 && !d.queue[0].at.After(now) {
			due = append(due, heap.Pop(&d.queue).(parcel))
		}
		if len(due) == 0 && len(d.queue) == 0 {
			d.running = false
			d.mu.Unlock()
			return
		}
		var wait time.Duration
		if len(d.queue) > 0 {
			wait = d.queue[0].at.Sub(now)
		}
		d.mu.Unlock()

		if len(due) > 0 {
			for _, pc := range due {
				pc.path.inflight.Add(-1)
				handOver(pc.path, pc.dst, pc.data, pc.from)
			}
			clear(due)
			due = due[:0]
			continue // time has passed: look again before sleeping
		}
		timer.Reset(wait)
		select {
		case <-d.done:
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// close stops the serving goroutine, waits for it and discards the queue.
// It is idempotent.
func (d *delayLine) close() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	close(d.done)
	d.mu.Unlock()
	d.wg.Wait()
	d.mu.Lock()
	for _, pc := range d.queue {
		pc.path.inflight.Add(-1)
	}
	d.queue = nil
	d.mu.Unlock()
}
