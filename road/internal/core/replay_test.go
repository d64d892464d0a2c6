package core

import (
	"math/rand/v2"
	"testing"
	"time"
)

// A remote that uses its ids in order, fewer than 64 a hold, keeps a
// window of one word or two, however many it uses; a busy one keeps every
// id younger than the hold, used ones too (a message sent again after its
// done was lost is answered done, not refused as too old), up to the
// largest window. One that leaves a hole grows the window while the hole
// is younger than the hold, so the late id is still fresh, and shrinks it
// once the hole is older: the id is then too old, never fresh.
func TestReplayWindowGrowsAndShrinks(t *testing.T) {
	now, hold := time.Unix(1_700_000_000, 0), replayHold(time.Minute)
	var w replayWindow
	ti := uint32(1)
	for ; ti <= 1000; ti++ { // one every 2 s
		w.mark(ti, now, hold, false)
		now = now.Add(2 * time.Second)
	}
	if len(w.bits) > 2 || w.state(1000) != replayUsed || w.state(990) != replayUsed {
		t.Fatalf("in order: %d words, states %d %d", len(w.bits), w.state(1000), w.state(990))
	}
	for ; ti <= 100_000; ti++ { // one a millisecond
		w.mark(ti, now, hold, false)
		now = now.Add(time.Millisecond)
	}
	if len(w.bits) != replayMaxWords || w.state(100_000-replayIDs+64) != replayUsed || w.state(100_000-replayIDs-64) != replayTooOld {
		t.Fatalf("busy: %d words, states %d %d", len(w.bits), w.state(100_000-replayIDs+64), w.state(100_000-replayIDs-64))
	}

	const hole = 100_001
	ti = hole + 1
	for ; ti < hole+5000; ti++ { // 5 s of ids after the hole
		w.mark(ti, now, hold, false)
		now = now.Add(time.Millisecond)
	}
	if w.state(hole) != replayFresh || len(w.bits) < 5000/64 {
		t.Fatalf("a young hole: state %d, %d words", w.state(hole), len(w.bits))
	}
	grown := len(w.bits)
	now = now.Add(time.Minute + time.Second)
	for end := ti + 256; ti < end; ti++ { // the hole is older than the hold, one id a second
		w.mark(ti, now, hold, false)
		now = now.Add(time.Second)
	}
	if len(w.bits) > 2 {
		t.Fatalf("after the hold the window keeps %d words (had grown to %d)", len(w.bits), grown)
	}
	if w.state(hole) != replayTooOld || w.state(ti-1) != replayUsed || w.state(ti-200) != replayTooOld || w.state(ti) != replayFresh {
		t.Fatalf("shrunk: states %d %d %d %d", w.state(hole), w.state(ti-1), w.state(ti-200), w.state(ti))
	}

	// A hole kept for ever still falls out of the largest window.
	hole2 := ti
	for ti++; ti < hole2+2*replayIDs; ti++ {
		w.mark(ti, now, replayHold(-1), false)
	}
	if w.state(hole2) != replayTooOld || len(w.bits) != replayMaxWords { // kept for ever: the largest ring
		t.Fatalf("beyond the largest window: state %d, %d words", w.state(hole2), len(w.bits))
	}
}

// Whatever the order and timing of the ids a remote uses, the window never
// calls a used id fresh (a replay is always refused), never calls an unused
// id used, never takes a refused id for a delivered one or the reverse,
// keeps every id within the largest window (fresh or used) while
// it is younger than the hold, and never holds more than its largest ring.
func TestReplayWindowNeverForgetsAUse(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		now, hold := time.Unix(1_700_000_000, 0), replayHold(time.Duration(1+rng.IntN(30))*time.Second)
		var w replayWindow
		used, refused := map[uint32]bool{}, map[uint32]bool{}
		entered := map[uint32]time.Time{}           // when a word (ti/64) entered the window
		ti := ^uint32(0) - uint32(rng.IntN(20_000)) // roll over on the way
		top := ti
		for range 30_000 {
			switch r := rng.IntN(100); {
			case r < 80:
				ti++
				if ti == 0 {
					ti = 1
				}
			case r < 90:
				ti += uint32(rng.IntN(300)) // ids skipped: holes
			case r < 99:
				ti -= uint32(rng.IntN(200)) // a late one
			default:
				ti += uint32(rng.IntN(1 << 20)) // a jump
			}
			now = now.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
			before := w.state(ti)
			switch {
			case used[ti] && before == replayFresh:
				t.Fatalf("seed %d: used id %d is fresh", seed, ti)
			case !used[ti] && (before == replayUsed || before == replayRefused):
				t.Fatalf("seed %d: unused id %d is used", seed, ti)
			case before == replayUsed && refused[ti]:
				t.Fatalf("seed %d: refused id %d is taken for delivered", seed, ti)
			case before == replayRefused && !refused[ti]:
				t.Fatalf("seed %d: delivered id %d is taken for refused", seed, ti)
			case before == replayTooOld && newer(ti, top-replayIDs+64) && !entered[ti>>6].IsZero() &&
				now.Sub(entered[ti>>6]) < time.Duration(hold-1)*time.Second:
				t.Fatalf("seed %d: id %d (used %v), %v young, within the largest window, refused (top %d, span %d, ring %d)",
					seed, ti, used[ti], now.Sub(entered[ti>>6]), w.top, w.span, len(w.bits))
			}
			if before == replayFresh {
				no := rng.IntN(8) == 0
				w.mark(ti, now, hold, no)
				used[ti], refused[ti] = true, no
				if len(used) == 1 {
					entered[ti>>6], top = now, ti
				}
				if newer(ti, top) {
					for wn := ti >> 6; wn != top>>6 && ti>>6-wn < replayMaxWords; wn = (wn - 1) & replayWordMask {
						entered[wn] = now
					}
					top = ti
				}
			}
			if len(w.bits) > replayMaxWords || len(w.bits)&(len(w.bits)-1) != 0 {
				t.Fatalf("seed %d: a ring of %d words", seed, len(w.bits))
			}
		}
	}
}
