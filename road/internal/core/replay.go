package core

import "time"

// Replay protection: a session's window of transaction ids (see
// docs/security.md; the budgets that keep floods cheap are in budgets.go).

// The replay window of a session remembers, for every transaction id
// since the session began, whether the remote used it, up to
// replayMaxWords words of 64 ids behind the newest (8,192 ids: 1 KiB of
// bits and 256 bytes of ages).
// It starts at one word and grows only while a remote's traffic needs the
// room (see replayWindow.slide); a window refuses whatever it does not
// remember, so its size never lets a replay in.
const (
	replayMaxWords = 128
	replayIDs      = replayMaxWords * 64
	replayWordMask = 1<<26 - 1 // word numbers (ti/64) wrap with the ids
)

// replayWindow records the transaction ids a remote used in its current
// session (rsid): every transaction it started and we finished, whatever its
// kind. It lives as long as the session, so a captured packet replayed at
// any time in that session finds its id used; a new session (a newer rsid,
// only after an authenticated packet) starts a new window, and the older
// session's packets are refused by their si. The ids are a counter per
// remote (§8.1), so a sliding window of bits behind the newest id is
// enough: ids older than the window are refused (too old), which costs
// nothing to remember.
//
// The window covers the span words up to the newest id's word, in a ring
// of a power of two words (word w, ids 64w..64w+63, at w % len(bits)).
// Sliding up, it drops its oldest words, unless one of them entered the
// window less than the hold ago (the longest an honest remote may still
// send a packet of a transaction: its first, or one sent again because
// our answer was lost): then the ring doubles, up to replayMaxWords, so
// that a late first packet finds its id fresh and a late repeat finds it
// used (answered done, not nacked as too old: its message was delivered).
// Older words are given up: their ids become too old. The ring halves
// again once its older half holds no word that young. A remote that uses
// fewer than 64 ids a hold keeps one word; a busy one at most
// replayMaxWords.
//
// Until it gives up a word, the window holds every id marked in the
// session, so an id below its oldest word was never used: it is fresh, and
// marking it stretches the window down to it (within replayMaxWords of the
// top). The first id a session shows us need not be its lowest: the
// messages held for the allow go out at once, and the readers may reorder
// them across a word's edge; only a window that gave up words (gave)
// refuses what lies below it.
//
// A finished id is either delivered or refused (we answered nack, or the
// remote gave it up): a repeat of a refused message is refused again, never
// answered done, since its sender would take done for delivered. The
// refusals are a second ring beside bits, made on the first refusal.
type replayWindow struct {
	top     uint32   // the newest id marked (when bits is not nil)
	span    uint32   // the words covered, top's and span-1 below it (1..len(bits))
	bits    []uint64 // the ring; nil: nothing marked in this session
	at      []uint16 // at[i]: when bits[i]'s word entered the window (replaySecond)
	refused []uint64 // beside bits: the ids of bits refused; nil: none so far
	gave    bool     // words of this session were given up: below the window is too old
}

// replaySecond is the clock of the window's ages: seconds, mod 2^16.
func replaySecond(now time.Time) uint16 { return uint16(now.Unix()) }

// replayHold is the window's hold in seconds: for how long a word is kept
// (0xffff: as long as room allows).
func replayHold(d time.Duration) uint16 {
	if d <= 0 || d >= 0xffff*time.Second {
		return 0xffff
	}
	return uint16((d + time.Second - 1) / time.Second)
}

// replayState is what a window says of a transaction id.
type replayState uint8

const (
	replayFresh   replayState = iota // never finished in this session
	replayUsed                       // finished in this session: delivered
	replayRefused                    // finished in this session: refused
	replayTooOld                     // behind the window: refused unseen
)

// newer reports whether id a comes after b (ids roll over).
func newer(a, b uint32) bool { d := a - b; return d != 0 && d < 1<<31 }

func (w *replayWindow) state(ti uint32) replayState {
	if w.bits == nil || newer(ti, w.top) {
		return replayFresh
	}
	if below := (w.top>>6 - ti>>6) & replayWordMask; below >= w.span {
		if w.gave || below >= replayMaxWords {
			return replayTooOld
		}
		return replayFresh // below every id marked so far
	}
	i, bit := ti>>6&uint32(len(w.bits)-1), uint64(1)<<(ti%64)
	switch {
	case w.bits[i]&bit == 0:
		return replayFresh
	case w.refused != nil && w.refused[i]&bit != 0:
		return replayRefused
	}
	return replayUsed
}

// mark records ti as finished at now, delivered or refused, keeping words
// for hold seconds (replayHold); an id behind the window is already
// refused.
func (w *replayWindow) mark(ti uint32, now time.Time, hold uint16, refused bool) {
	switch {
	case w.bits == nil:
		w.bits, w.at = make([]uint64, 1), []uint16{replaySecond(now)}
		w.top, w.span = ti, 1
	case newer(ti, w.top):
		w.slide(ti, replaySecond(now), hold)
	case (w.top>>6-ti>>6)&replayWordMask >= w.span:
		if w.state(ti) == replayTooOld {
			return
		}
		w.stretch((w.top>>6-ti>>6)&replayWordMask+1, replaySecond(now))
	}
	i, bit := ti>>6&uint32(len(w.bits)-1), uint64(1)<<(ti%64)
	w.bits[i] |= bit
	switch {
	case refused && w.refused == nil:
		w.refused = make([]uint64, len(w.bits))
		fallthrough
	case refused:
		w.refused[i] |= bit
	}
}

// slide moves the window's top up to ti, at second sec.
func (w *replayWindow) slide(ti uint32, sec, hold uint16) {
	adv := (ti>>6 - w.top>>6) & replayWordMask
	w.top = ti
	if adv == 0 {
		return
	}
	// Grow to cover the new words (those between the old top and the new
	// one are holes: ids the remote skipped, so far) and every old word
	// from the oldest young one up.
	need := adv
	for k := range w.span {
		if w.young(ti>>6-adv-(w.span-1)+k, 1, sec, hold) {
			need += w.span - k
			break
		}
	}
	if n := len(w.bits); n < int(need) && n < replayMaxWords {
		for n < int(need) && n < replayMaxWords {
			n *= 2
		}
		w.resize(n, ti>>6-adv, w.span)
	}
	n := uint32(len(w.bits))
	for k := range min(adv, n) {
		i := (ti>>6 - k) & (n - 1)
		w.bits[i], w.at[i] = 0, sec
		if w.refused != nil {
			w.refused[i] = 0
		}
	}
	w.gave = w.gave || w.span+adv > n
	w.span = min(w.span+adv, n)
	// Halve while the older half holds no young word.
	for n > 1 {
		keep := min(w.span, n/2)
		if w.young(ti>>6-(w.span-1), w.span-keep, sec, hold) {
			break
		}
		w.gave = w.gave || keep < w.span
		w.span, n = keep, n/2
		w.resize(int(n), ti>>6, keep)
	}
}

// stretch takes the window down to span words below and with its top's
// (span ≤ replayMaxWords), the new words empty and entered at second sec.
func (w *replayWindow) stretch(span uint32, sec uint16) {
	if n := len(w.bits); n < int(span) {
		for n < int(span) {
			n *= 2
		}
		w.resize(n, w.top>>6, w.span)
	}
	mask := uint32(len(w.bits) - 1)
	for k := w.span; k < span; k++ {
		i := (w.top>>6 - k) & mask
		w.bits[i], w.at[i] = 0, sec
		if w.refused != nil {
			w.refused[i] = 0
		}
	}
	w.span = span
}

// young reports whether one of the n words from word number low up
// entered the window less than hold seconds before sec.
func (w *replayWindow) young(low, n uint32, sec, hold uint16) bool {
	mask := uint32(len(w.bits) - 1)
	for k := range n {
		i := (low + k) & mask
		if hold == 0xffff || sec-w.at[i] < hold {
			return true
		}
	}
	return false
}

// resize lays the span words up to word number top out in a new ring of n
// words (span ≤ n, a power of two).
func (w *replayWindow) resize(n int, top, span uint32) {
	bits, at := make([]uint64, n), make([]uint16, n)
	var refused []uint64
	if w.refused != nil {
		refused = make([]uint64, n)
	}
	old, m := uint32(len(w.bits)-1), uint32(n-1)
	for k := range span {
		wn := top - k
		bits[wn&m], at[wn&m] = w.bits[wn&old], w.at[wn&old]
		if refused != nil {
			refused[wn&m] = w.refused[wn&old]
		}
	}
	w.bits, w.at, w.refused = bits, at, refused
}

// reset forgets the session's ids (a new session starts a new window).
func (w *replayWindow) reset() { *w = replayWindow{} }
