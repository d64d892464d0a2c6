package core

import (
	"bytes"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
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

// The first id of a session need not be its lowest (held messages go out
// at once; two readers reorder them): ids below it, even across a word's
// edge, are fresh until the window gives up a word, and once marked they
// are used. Once it gave one up, what lies below it is too old.
func TestReplayWindowBelowTheFirst(t *testing.T) {
	now, hold := time.Unix(1_700_000_000, 0), replayHold(time.Minute)
	var w replayWindow
	w.mark(130, now, hold, false) // word 2 first
	for ti := uint32(129); ti >= 3; ti-- {
		if st := w.state(ti); st != replayFresh {
			t.Fatalf("id %d below the session's first: state %d, want fresh", ti, st)
		}
		w.mark(ti, now, hold, ti == 7)
	}
	for ti := uint32(3); ti <= 130; ti++ {
		if want := map[bool]replayState{false: replayUsed, true: replayRefused}[ti == 7]; w.state(ti) != want {
			t.Fatalf("id %d after its mark: state %d, want %d", ti, w.state(ti), want)
		}
	}
	if w.state(2) != replayFresh || w.state(1) != replayFresh || len(w.bits) != 4 || w.span != 3 {
		t.Fatalf("ids 1, 2: states %d %d; ring %d, span %d", w.state(1), w.state(2), len(w.bits), w.span)
	}
	first := uint32(130)
	if far := first - replayIDs; w.state(far) != replayTooOld { // ids roll over
		t.Fatalf("an id below the largest window: state %d, want too old", w.state(far))
	}
	// Past the largest ring, the oldest words are given up: ids 1 and 2,
	// never used, are too old now, as are the used ones.
	for ti := uint32(131); ti < 130+replayIDs+64; ti++ {
		w.mark(ti, now, hold, false)
	}
	if w.state(1) != replayTooOld || w.state(3) != replayTooOld || !w.gave {
		t.Fatalf("after words were given up: states %d %d (gave %v)", w.state(1), w.state(3), w.gave)
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

// signedAlives are n alive requests from other to main, each signed (a
// foot of its own), as main's readers receive them.
func signedAlives(t *testing.T, p *pair, first, n int) [][]byte {
	t.Helper()
	r := p.mainRemote()
	out := make([][]byte, n)
	for i := range out {
		h := head(codec.TransactionKindAlive, codec.PacketKindRequest, r.fuid, r.nuid, r.rsid, uint32(first+i), false)
		h.CoatKind, h.FootKind = codec.CoatKindNaCl, codec.FootKindNaCl
		out[i] = forge(t, codec.HeadKindRaet, p.other.signer, h, nil)
	}
	return out
}

// The readers of a stack share their memory of checked feet: a datagram
// one verified is known to the other (a copy sent again reaches whichever
// reads next), and a signature it saw valid fails on other bytes, neither
// verified again; a memory sized for the rate it verifies at holds a burst
// of feet until their copies come (a span later at most), and gives its
// room back once the rate falls.
func TestSeenFeetShared(t *testing.T) {
	p := joinedPair(t, refProfile)
	const remotes = 2000 // room for 8 feet each
	for i := range remotes - 1 {
		addKeyed(p.main, i, 2)
	}
	p.main.PublishKeys()
	table := p.main.KeyTable()
	var n atomic.Uint64
	a := NewFootChecker(&n)
	b := a.Twin()
	p.main.OwnFeet(b) // the memory they share
	now := time.Unix(1_700_000_000, 0)
	a.mem.clock = func() time.Time { return now }
	check := func(f *FootChecker, dg []byte) bool {
		var in Inbound
		f.Parse(&in, bytes.Clone(dg), p.otherAddr, table)
		if in.parseErr != nil {
			t.Fatal(in.parseErr)
		}
		return in.foot.ok
	}

	const burst = 6000 // a busy main's feet in well under a span
	dgs := signedAlives(t, p, 1000, burst)
	for _, dg := range dgs {
		if !check(a, dg) {
			t.Fatal("a signed alive did not verify")
		}
	}
	if got := n.Load(); got != burst {
		t.Fatalf("%d verifications for %d feet", got, burst)
	}
	for _, dg := range dgs { // the copies, to the other reader
		if !check(b, dg) {
			t.Fatal("a copy did not verify")
		}
	}
	// A few: those whose set overflowed (sets of 8 slots in a memory at
	// most half full lose 1-3%).
	again := n.Load() - burst
	if again > burst/20 {
		t.Fatalf("%d of %d copies verified again", again, burst)
	}
	t.Logf("%d of %d copies verified again, in %d slots", again, burst, len(a.mem.sets)*seenWays)
	other := bytes.Clone(dgs[1]) // with the foot of dgs[0]
	copy(other[len(other)-packet.NaClFootSize:], dgs[0][len(dgs[0])-packet.NaClFootSize:])
	before := n.Load()
	if check(b, other) || n.Load() != before {
		t.Fatal("a seen signature on other bytes was verified or taken")
	}
	if slots := len(a.mem.sets) * seenWays; slots > seenFeetFor(remotes) || slots < burst {
		t.Fatalf("%d slots for a burst of %d feet from %d remotes", slots, burst, remotes)
	}
	for i := range 20 { // quiet: a foot a span
		now = now.Add(seenSpan)
		check(a, signedAlives(t, p, 100_000+i, 1)[0])
	}
	if slots := len(a.mem.sets) * seenWays; slots != minSeenFeet {
		t.Fatalf("%d slots after quiet spans, want %d", slots, minSeenFeet)
	}
	// A burst again, then the remotes go: publishing the table without
	// them gives back the room they had, before any datagram comes.
	for _, dg := range signedAlives(t, p, 200_000, 1000) {
		check(a, dg)
	}
	grown := len(a.mem.sets) * seenWays
	for _, rr := range slices.Collect(maps.Values(p.main.roster.remotes)) {
		if rr != p.mainRemote() {
			p.main.removeRemote(rr, ErrRejected)
		}
	}
	p.main.PublishKeys()
	if slots := len(a.mem.sets) * seenWays; slots != seenFeetFor(1) || grown <= slots {
		t.Fatalf("%d slots once one remote is left (%d before), want %d", slots, grown, seenFeetFor(1))
	}
	if !check(b, dgs[0]) {
		t.Fatal("the remote left is not checked")
	}
}
