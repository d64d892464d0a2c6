package core

import (
	"time"
)

// flushWake keys again the transactions retimed and the remotes touched
// since the last call; the owner calls it (through Deadline) after every
// event. A transaction removed meanwhile is no longer marked (removeTxn);
// a remote the core no longer tracks (removed, forgotten, a vacuous join
// given up) leaves the heap. The cost is O(what moved · log), whatever is
// in flight.
func (c *Core) flushWake() {
	for i, t := range c.wake.retimed {
		c.wake.retimed[i] = nil
		if s := t.timerSlot(); s.marked {
			s.marked = false
			c.wake.keyed++
			s.in.clock.set(t, t.deadline())
			c.wake.touch(s.in)
		}
	}
	c.wake.retimed = c.wake.retimed[:0]
	for i, r := range c.wake.touched {
		r.marked = false
		c.wake.touched[i] = nil
		at := time.Time{}
		if c.roster.tracked(r) {
			at = c.remoteDeadline(r)
		}
		if r.place == nil && !at.IsZero() {
			r.place = c.wake.places.take()
		}
		c.wake.heap.set(r, at)
		if at.IsZero() && r.place != nil {
			c.wake.places.give(r.place)
			r.place = nil
		}
	}
	c.wake.touched = c.wake.touched[:0]
	if c.wake.rebuild { // the forgotten left the heap just now (shrink)
		c.wake.compact()
	}
}

// remoteDeadline is the earliest of r's timers: what tickRemote acts on,
// so that none stays due after its tick. Its transactions' is the root of
// r.clock.
func (c *Core) remoteDeadline(r *remote) time.Time {
	d := earliest(r.clock.next(), time.Time(r.savedDue))
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
// is due are visited (c.wake.visits counts them), again while running them made
// more due (a few rounds at most: what is left, the next tick runs).
func (c *Core) tick(now time.Time) {
	c.now = now
	if !c.kept.pendAt.IsZero() && !now.Before(c.kept.pendAt) {
		c.checkPended()
	}
	c.tx.answers.expire(now)
	for range tickRounds {
		c.flushWake()
		due := c.wake.due[:0]
		for c.wake.heap.dueAt(now) {
			due = append(due, c.wake.heap.pop())
		}
		for i, r := range due {
			c.wake.visits++
			c.wake.touch(r)
			c.tickRemote(r)
			due[i] = nil
		}
		c.wake.due = due[:0]
		if len(due) == 0 {
			return
		}
	}
}

const tickRounds = 4

// timeOutSaved ends the messages of r.saved whose timeout is due, and sets
// r.savedDue to the earliest timeout of those left.
func (c *Core) timeOutSaved(r *remote) {
	kept, due := r.saved[:0], time.Time{}
	for _, m := range r.saved {
		c.wake.savedWalked++
		if m.timeout.due(c.now) {
			m.finish(c, ErrTimeout)
			continue
		}
		kept = append(kept, m)
		due = earliest(due, time.Time(m.timeout))
	}
	clear(r.saved[len(kept):])
	r.saved, r.savedDue = kept, expiry(due)
	if len(kept) == 0 {
		r.dropSaved()
	}
}

// tickRemote runs r's timers that are due (see remoteDeadline and tick in
// timers.go).
func (c *Core) tickRemote(r *remote) {
	// Only the due: each leaves the clock, keyed again at the next flush;
	// a tick moves no other's key (retime waits for the flush), so this
	// ends within len(r.clock) turns.
	for r.clock.dueAt(c.now) {
		t := r.clock.pop()
		c.wake.keyed++
		c.wake.retime(t)
		if d := t.deadline(); !d.IsZero() && !c.now.Before(d) {
			t.tick(c)
		}
	}
	// Messages saved for the next allow, or held back by the window,
	// still time out.
	if r.savedDue.due(c.now) {
		c.timeOutSaved(r)
	}
	c.startHeld(r)
	c.idleAEAD(r)
	if !r.added {
		return
	}
	c.managePresence(r)
}
