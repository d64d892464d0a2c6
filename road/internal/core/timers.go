package core

import "time"

// Timers by what is due. Each remote has one key, the earliest of its
// timers (its transactions', its saved messages' timeouts, its AEAD coat's
// idle check, its presence, reaping and forgetting: remoteDeadline), and
// the remotes with a timer sit in a binary min-heap by that key, each
// holding its index. Whatever
// may move a remote's timers marks it (touch); after each event flushWake
// keys again only the marked remotes, and Tick runs only the remotes whose
// key is due. So an idle tick costs O(due · log remotes), not O(remotes),
// and Deadline is exact. Finished transaction ids are a bounded window
// (replay.go) and never walked.

// timerHeap holds the remotes with a timer, by due time: a 4-ary min-heap
// whose entries carry their keys (no remote is read to compare, and four
// children share a cache line); remote.slot is 1 + its index, 0 when it
// is not in the heap, and remote.due its key.
type timerHeap []timerEntry

type timerEntry struct {
	at int64 // due, in Unix nanoseconds
	r  *remote
}

// next is the earliest due time; zero when the heap is empty.
func (h timerHeap) next() time.Time {
	if len(h) == 0 {
		return time.Time{}
	}
	return h[0].r.due
}

// set keys r at `at`, or takes it out of the heap when at is zero.
func (h *timerHeap) set(r *remote, at time.Time) {
	switch {
	case at.IsZero() && r.slot == 0:
	case at.IsZero():
		h.remove(int(r.slot - 1))
	case r.slot == 0:
		r.due = at
		*h = append(*h, timerEntry{at.UnixNano(), r})
		h.up(len(*h)-1, (*h)[len(*h)-1])
	case !at.Equal(r.due):
		r.due = at
		i := int(r.slot - 1)
		e := timerEntry{at.UnixNano(), r}
		if i > 0 && e.at < (*h)[(i-1)/4].at {
			h.up(i, e)
		} else {
			h.down(i, e)
		}
	}
}

// pop takes out the earliest remote.
func (h *timerHeap) pop() *remote {
	r := (*h)[0].r
	h.remove(0)
	return r
}

func (h *timerHeap) remove(i int) {
	s := *h
	n := len(s) - 1
	r, last := s[i].r, s[n]
	s[n] = timerEntry{}
	*h = s[:n]
	r.slot, r.due = 0, time.Time{}
	if i == n {
		return
	}
	if i > 0 && last.at < s[(i-1)/4].at {
		h.up(i, last)
	} else {
		h.down(i, last)
	}
}

// up places e at the hole i or above it.
func (h timerHeap) up(i int, e timerEntry) {
	for i > 0 {
		p := (i - 1) / 4
		if e.at >= h[p].at {
			break
		}
		h.put(i, h[p])
		i = p
	}
	h.put(i, e)
}

// down places e at the hole i or below it.
func (h timerHeap) down(i int, e timerEntry) {
	for {
		c := 4*i + 1
		if c >= len(h) {
			break
		}
		m := c
		for j := c + 1; j < c+4 && j < len(h); j++ {
			if h[j].at < h[m].at {
				m = j
			}
		}
		if h[m].at >= e.at {
			break
		}
		h.put(i, h[m])
		i = m
	}
	h.put(i, e)
}

func (h timerHeap) put(i int, e timerEntry) {
	h[i] = e
	e.r.slot = int32(i + 1)
}

// touch marks r: its timers may have moved, and flushWake keys it again.
func (c *Core) touch(r *remote) {
	if !r.marked {
		r.marked = true
		c.touched = append(c.touched, r)
	}
}

// flushWake keys again the remotes touched since the last call; the owner
// calls it (through Deadline) after every event. A remote the core no
// longer tracks (removed, forgotten, a vacuous join given up) leaves the
// heap.
func (c *Core) flushWake() {
	for i, r := range c.touched {
		r.marked = false
		c.touched[i] = nil
		at := time.Time{}
		if c.tracked(r) {
			at = c.remoteDeadline(r)
		}
		c.timers.set(r, at)
	}
	c.touched = c.touched[:0]
	if c.shrinkTimers { // the forgotten left the heap just now (shrink)
		c.timers = append(timerHeap(nil), c.timers...)
		c.touched, c.due, c.shrinkTimers = nil, nil, false
	}
}

// tracked says whether r is the core's: added, or a vacuous join in
// progress (c.joinees).
func (c *Core) tracked(r *remote) bool { return r.added || c.joinees[r.ha] == r }

// remoteDeadline is the earliest of r's timers: what tickRemote acts on,
// so that none stays due after its tick.
func (c *Core) remoteDeadline(r *remote) time.Time {
	var d time.Time
	for _, t := range r.txns {
		d = earliest(d, t.deadline())
	}
	for _, m := range r.saved {
		d = earliest(d, time.Time(m.timeout))
	}
	if r.prof != nil && r.prof.aeadCheck != 0 {
		d = earliest(d, time.Unix(0, r.prof.aeadCheck))
	}
	if !r.added {
		return d
	}
	if c.cfg.AlivePeriod >= 0 && !r.reaped {
		d = earliest(d, r.presence)
	}
	if c.reaps() && !r.reaped {
		d = earliest(d, r.reapAt)
	}
	if r.reaped {
		d = earliest(d, r.forgetAt)
	}
	return d
}

// tick runs the timers due at now: only the remotes whose earliest timer
// is due are visited (c.visits counts them), again while running them made
// more due (a few rounds at most: what is left, the next tick runs).
func (c *Core) tick(now time.Time) {
	c.now = now
	if !c.pendAt.IsZero() && !now.Before(c.pendAt) {
		c.checkPended()
	}
	for range tickRounds {
		c.flushWake()
		due := c.due[:0]
		for len(c.timers) > 0 && !now.Before(c.timers[0].r.due) {
			due = append(due, c.timers.pop())
		}
		for i, r := range due {
			c.visits++
			c.touch(r)
			c.tickRemote(r)
			due[i] = nil
		}
		c.due = due[:0]
		if len(due) == 0 {
			return
		}
	}
}

const tickRounds = 4
