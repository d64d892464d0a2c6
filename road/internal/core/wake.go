package core

// wakeClock holds the remotes by their earliest timer, so that a Tick
// visits only the remotes due (timers.go): touched are those whose timers
// may have moved since the last flushWake, retimed the transactions.
type wakeClock struct {
	heap    timerHeap[*remote]
	places  remotePlaces // where the remotes in heap keep their index
	touched []*remote
	retimed []txn
	due     []*remote // Tick's scratch
	// visits counts the remotes Tick ran, keyed the transactions whose
	// deadlines it read, savedWalked the messages of r.saved looked at for
	// their timeout (timeOutSaved).
	visits      uint64
	keyed       uint64
	savedWalked uint64
	rebuild     bool // the next flushWake rebuilds the heap and touched (shrink)
}

// touch marks r: its timers may have moved, and flushWake keys it again.
func (w *wakeClock) touch(r *remote) {
	if !r.marked {
		r.marked = true
		w.touched = append(w.touched, r)
	}
}

// retime marks transaction t: its deadline may have moved, and flushWake
// keys it again in its remote's clock (and the remote in the core's heap).
// Whatever moves a transaction's timers (its redo, its timeout, a
// messenger's queued) calls it; addTxn retimes what it adds, so that one
// not added yet is left alone (and one removed, by removeTxn, too).
func (w *wakeClock) retime(t txn) {
	if s := t.timerSlot(); s.in != nil && !s.marked {
		s.marked = true
		w.retimed = append(w.retimed, t)
	}
}

// compact rebuilds the heap, its places and scratch to their size, once
// the remotes forgotten have left it (shrink).
func (w *wakeClock) compact() {
	w.heap = append(timerHeap[*remote](nil), w.heap...)
	w.places.compact(w.heap)
	w.touched, w.retimed, w.due, w.rebuild = nil, nil, nil, false
}

// remotePlaces hands out the cells where the core's remotes keep their
// index in its timer heap (heapSlot.place), from chunks of placesChunk, so
// that the cells of ten thousand remotes take 40 KB and a heap move
// writes a few lines of them. A remote takes one when it enters the heap
// and gives it back when it leaves (flushWake); when the heap is rebuilt
// (shrink), the cells are dealt again from as few chunks as the heap
// needs.
type remotePlaces struct {
	chunk []int32 // the newest chunk; next is its first cell not dealt
	next  int
	free  []*int32 // cells given back
}

const placesChunk = 256

func (p *remotePlaces) take() *int32 {
	if n := len(p.free); n > 0 {
		cell := p.free[n-1]
		p.free = p.free[:n-1]
		return cell
	}
	if p.next == len(p.chunk) {
		p.chunk, p.next = make([]int32, placesChunk), 0
	}
	p.next++
	return &p.chunk[p.next-1]
}

func (p *remotePlaces) give(cell *int32) { p.free = append(p.free, cell) }

// compact deals the cells of h's remotes, every remote that holds one,
// again from new chunks.
func (p *remotePlaces) compact(h timerHeap[*remote]) {
	*p = remotePlaces{}
	for i := range h {
		cell := p.take()
		*cell = int32(i + 1)
		h[i].place, h[i].v.place = cell, cell
	}
}
