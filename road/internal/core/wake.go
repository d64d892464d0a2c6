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
