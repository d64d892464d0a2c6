package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A oneWay carries messages from a sender to a receiver on loopback, with
// nothing coming back. send is called from one goroutine, recv from
// another; recv returns each message's id and payload as they arrive.
type oneWay interface {
	send(id uint64, payload []byte) error
	recv() (uint64, []byte, error)
	close()
}

// lossy is a oneWay that may lose messages (raw UDP): a gap in the ids is
// counted as lost, not as an error.
type lossy interface{ lossy() }

// ownRecv is a oneWay whose close must wait until recv has returned (a
// ZeroMQ socket is not safe to close from another thread: zmq_ctx_term
// then hangs); its recv returns on its own within a receive timeout.
type ownRecv interface{ ownRecv() }

// unordered is a oneWay that does not keep messages in order (the road
// stack: each message is a transaction of its own); each must still arrive
// once.
type unordered interface{ unordered() }

// tally checks the ids a receiver gets: each id once, in order when
// ordered, its payload intact. An ordered lossy stream counts a gap as
// lost; an ordered reliable one as an error.
type tally struct {
	ordered, lossy bool
	next           uint64              // every id below next is settled: counted or lost
	ahead          map[uint64]struct{} // unordered: ids above next, counted
	counted, lost  int
	bad            int
	badText        string
}

func (t *tally) fail(format string, args ...any) {
	t.bad++
	t.badText = fmt.Sprintf(format, args...)
}

// add takes the message id, intact when its payload is the one sent (n
// bytes long).
func (t *tally) add(id uint64, intact bool, n int) {
	_, seen := t.ahead[id]
	switch {
	case id < t.next || seen:
		t.fail("message %d arrived again", id)
		return
	case id > t.next && t.ordered && !t.lossy:
		t.fail("message %d arrived when %d was next", id, t.next)
		return
	}
	if !intact {
		t.fail("message %d: %d bytes, not the ones sent", id, n)
	} else {
		t.counted++
	}
	switch {
	case id == t.next:
		t.next++
		for {
			if _, ok := t.ahead[t.next]; !ok {
				break
			}
			delete(t.ahead, t.next)
			t.next++
		}
	case t.ordered: // lossy: the ones skipped are lost
		t.lost += int(id - t.next)
		t.next = id + 1
	default:
		if t.ahead == nil {
			t.ahead = map[uint64]struct{}{}
		}
		t.ahead[id] = struct{}{}
	}
}

// settled is how many ids the receiver is done with: the sender's credit.
func (t *tally) settled() uint64 { return t.next + uint64(len(t.ahead)) }

// credit is how the receiver, counting, lets the sender keep up to window
// messages in flight: the sender waits while sent - counted ≥ window, and
// the receiver wakes it only when it waits (no channel operation per
// message).
type credit struct {
	counted atomic.Uint64 // how many the receiver settled
	waiting atomic.Bool
	wake    chan struct{}
}

func (c *credit) advance(next uint64) {
	c.counted.Store(next)
	if c.waiting.Load() {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// await waits until fewer than window messages are in flight after sent,
// or stop; it reports false on stop.
func (c *credit) await(sent uint64, window int, stop <-chan struct{}) bool {
	for sent-c.counted.Load() >= uint64(window) {
		c.waiting.Store(true)
		if sent-c.counted.Load() < uint64(window) {
			c.waiting.Store(false)
			return true
		}
		select {
		case <-c.wake:
		case <-stop:
			c.waiting.Store(false)
			return false
		case <-time.After(100 * time.Millisecond): // a lost wake-up costs no more
		}
		c.waiting.Store(false)
	}
	return true
}

// measureOneWay streams messages of size bytes for dur (at least one), up
// to window in flight, and counts and checks at the receiver every message
// (tally): each arrives once, in order where the peer keeps order, with the
// payload sent. msgs/s
// is what the receiver counted per second, until the last message arrived.
func measureOneWay(p peer, size, window int, dur, timeout time.Duration) result {
	r := result{Peer: p.name, Size: size, Mode: modeOneWay}
	cpu0 := cpuTime()
	t, err := p.oneWay()
	if err != nil {
		r.Errors, r.ErrorText = 1, err.Error()
		return r
	}
	defer t.close()
	_, mayLose := t.(lossy)
	_, unordered := t.(unordered)
	payload := []byte(strings.Repeat("x", size))
	cr := &credit{wake: make(chan struct{}, 1)}
	stop := make(chan struct{})
	sent := make(chan uint64, 1)
	sendErr := make(chan error, 1)
	t0 := time.Now()
	go func() {
		var id uint64
		for time.Since(t0) < dur || id == 0 {
			if !cr.await(id, window, stop) {
				break
			}
			if err := t.send(id, payload); err != nil {
				sendErr <- err
				break
			}
			id++
		}
		sent <- id
	}()
	// The receiver goroutine checks and counts until it has settled all
	// that was sent. When the sender stops after the receiver has counted
	// everything, the receiver stays in recv until close (deferred) ends it.
	var (
		mu     sync.Mutex
		tl     = tally{ordered: !unordered, lossy: mayLose}
		lastAt atomic.Int64  // when the last message arrived (ns since t0)
		total  atomic.Uint64 // how many were sent, once the sender stops
	)
	total.Store(1 << 63)
	done := make(chan error, 1)
	recvEnded := make(chan struct{})
	if _, ok := t.(ownRecv); ok {
		defer func() { <-recvEnded }() // before close (deferred earlier, run later)
	}
	go func() {
		defer close(recvEnded)
		for cr.counted.Load() < total.Load() {
			id, b, err := t.recv()
			if err != nil {
				done <- err
				return
			}
			mu.Lock()
			tl.add(id, bytes.Equal(b, payload), len(b))
			settled := tl.settled()
			mu.Unlock()
			lastAt.Store(int64(time.Since(t0)))
			cr.advance(settled)
		}
		done <- nil
	}()
	deadline := time.NewTimer(dur + timeout)
	defer deadline.Stop()
	for finished := false; !finished; {
		select {
		case n := <-sent:
			total.Store(n)
			finished = cr.counted.Load() >= n
		case err := <-sendErr:
			r.ErrorText = "send: " + err.Error()
			close(stop)
			finished = true
		case err := <-done:
			finished = true
			if err != nil && !(mayLose && total.Load() != 1<<63) { // a lossy peer's tail may be lost
				r.ErrorText = "receive: " + err.Error()
			}
		case <-deadline.C:
			r.ErrorText = "timeout waiting for the receiver"
			close(stop)
			finished = true
		}
	}
	el := time.Duration(lastAt.Load())
	cpu := cpuTime() - cpu0
	// The receiver goroutine may still be in recv; close (deferred) ends it.
	mu.Lock()
	r.Count, r.Lost, r.Errors = tl.counted, tl.lost, tl.bad
	if tot, n := total.Load(), tl.settled(); tot != 1<<63 && tot > n {
		r.Lost += int(tot - n) // never arrived
	}
	if r.ErrorText == "" {
		r.ErrorText = tl.badText
	}
	mu.Unlock()
	if !mayLose {
		r.Errors += r.Lost
	}
	if r.ErrorText != "" && r.Errors == 0 {
		r.Errors = 1
	}
	if el > 0 {
		r.MsgsPerS = float64(r.Count) / el.Seconds()
	}
	r.MBPerS = r.MsgsPerS * float64(size) / 1e6
	if r.Count > 0 {
		r.CPUusPerMsg = float64(cpu.Nanoseconds()) / 1e3 / float64(r.Count)
	}
	return r
}
