package core

import "time"

// Timers by what is due, at two levels. Each remote's transactions sit in
// its clock, a heap by deadline; whatever moves a transaction's timers
// marks it (retime). Each remote has one key, the earliest of its timers
// (its clock's root, its saved messages' timeouts, its AEAD coat's idle
// check, its presence, reaping and forgetting: remoteDeadline), and the
// remotes with a timer sit in the core's heap by that key. Whatever may
// move a remote's timers marks it (touch). After each event flushWake keys
// again only what was marked, and Tick runs only the remotes whose key is
// due, and of them only the transactions due. So an idle tick costs
// O(due · log remotes), not O(remotes), a message started or answered
// O(log in flight), not O(in flight), and Deadline is exact. Finished
// transaction ids are a bounded window (replay.go) and never walked.

// timerHeap holds what has a timer, by due time: a 4-ary min-heap whose
// entries carry their keys (nothing is read to compare, and four children
// share a cache line). The core's holds the remotes; each remote's holds
// its transactions (remote.clock), so that the earliest of thousands in
// flight is its root, not a walk. Each keeps its key in its heapSlot, and
// its index where the slot's place points: in the slot, or, for the
// core's remotes, in a cell of their dense places (remotePlaces), so that
// moving one remote past the others writes the index of each into a few
// lines of cells, not into as many remotes out of the cache.
type timerHeap[T slotted] []timerEntry[T]

type timerEntry[T slotted] struct {
	at    int64 // due, in Unix nanoseconds
	v     T
	place *int32 // v's heapSlot.place
}

// slotted is what a timerHeap holds: a remote or a transaction, each with
// its heapSlot.
type slotted interface {
	comparable
	timerSlot() *heapSlot
}

// next is the earliest due time; zero when the heap is empty.
func (h timerHeap[T]) next() time.Time {
	if len(h) == 0 {
		return time.Time{}
	}
	return h[0].v.timerSlot().due
}

// set keys v at `at`, or takes it out of the heap when at is zero.
func (h *timerHeap[T]) set(v T, at time.Time) {
	s := v.timerSlot()
	idx := s.index()
	switch {
	case at.IsZero() && idx == 0:
	case at.IsZero():
		h.remove(int(idx - 1))
	case idx == 0:
		if s.place == nil {
			s.place = &s.idx
		}
		s.due = at
		*h = append(*h, timerEntry[T]{at.UnixNano(), v, s.place})
		h.up(len(*h)-1, (*h)[len(*h)-1])
	case !at.Equal(s.due):
		s.due = at
		i := int(idx - 1)
		e := timerEntry[T]{at.UnixNano(), v, s.place}
		if i > 0 && e.at < (*h)[(i-1)/4].at {
			h.up(i, e)
		} else {
			h.down(i, e)
		}
	}
}

// dueAt reports whether the root is due at now.
func (h timerHeap[T]) dueAt(now time.Time) bool { return len(h) > 0 && !now.Before(h.next()) }

// pop takes out the earliest.
func (h *timerHeap[T]) pop() T {
	v := (*h)[0].v
	h.remove(0)
	return v
}

func (h *timerHeap[T]) remove(i int) {
	s := *h
	n := len(s) - 1
	v, last := s[i].v, s[n]
	*s[i].place = 0
	s[n] = timerEntry[T]{}
	*h = s[:n]
	v.timerSlot().due = time.Time{}
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
func (h timerHeap[T]) up(i int, e timerEntry[T]) {
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
func (h timerHeap[T]) down(i int, e timerEntry[T]) {
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

func (h timerHeap[T]) put(i int, e timerEntry[T]) {
	h[i] = e
	*e.place = int32(i + 1)
}

// heapSlot is a timed thing's place in its heap: its key (due), and
// 1 + its index there (0 when it is not in it), kept where place points:
// at idx, which set makes it point to, unless the core gave it a cell of
// its remotePlaces. marked says that it waits to be keyed again
// (wakeClock.touched, wakeClock.retimed). A transaction's also says whose txns (and
// clock) hold it: in, nil when none does.
type heapSlot struct {
	due    time.Time
	in     *remote
	place  *int32
	idx    int32
	marked bool
}

func (s *heapSlot) timerSlot() *heapSlot { return s }

// index is 1 + its index in its heap; 0 when it is not in it.
func (s *heapSlot) index() int32 {
	if s.place == nil {
		return 0
	}
	return *s.place
}
