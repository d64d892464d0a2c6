package road

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/raet-go/raet/road/internal/core"
	"github.com/raet-go/raet/road/internal/shrink"
)

// The source: a remote's floor is its oldest seq not done; a seq too far
// above it goes without an id; another remote's old message holds back
// nothing; a Put under way holds its remote's floor down.
func TestMidSource(t *testing.T) {
	s := newMidSource(7)
	s.hold("x", 3)
	a, _ := s.begin("x", 5, 0)
	b, _ := s.begin("x", 4, 0)
	if a.Floor != 3 || b.Floor != 3 || a.Seq != 5 || a.Stream != 7 {
		t.Fatalf("%+v %+v", a, b)
	}
	s.done("x", 3)
	if c, _ := s.begin("x", 6, 0); c.Floor != 4 {
		t.Fatalf("floor %d after 3 done", c.Floor)
	}
	s.done("x", 5)
	if c, _ := s.begin("x", 7, 0); c.Floor != 4 {
		t.Fatalf("floor %d with 4 open", c.Floor)
	}
	if far, seq := s.begin("x", 4+core.MidWindow, 0); far.Seq != 0 || seq != 4+core.MidWindow || far.Floor != 4 {
		t.Fatalf("beyond the window: %+v", far)
	}
	if y, _ := s.begin("y", 5+core.MidWindow, 0); y.Seq != 5+core.MidWindow || y.Floor != y.Seq {
		t.Fatalf("x's old message held y back: %+v", y)
	}
	for _, seq := range []uint64{4, 6, 7, 4 + core.MidWindow} {
		s.done("x", seq)
	}
	s.done("y", 5+core.MidWindow)
	if own, seq := s.begin("x", 0, 0); own.Seq != 6+core.MidWindow || seq != own.Seq || own.Floor != own.Seq {
		t.Fatalf("own counter: %+v", own)
	}
	s.done("x", 6+core.MidWindow)
	slow := s.reserve("x")
	fast := s.reserve("x")
	other := s.reserve("y")
	if id, _ := s.begin("x", 10+core.MidWindow, fast); id.Floor != 7+core.MidWindow {
		t.Fatalf("floor %d passed a Put under way", id.Floor)
	}
	if id, _ := s.begin("y", 11+core.MidWindow, other); id.Floor != 11+core.MidWindow {
		t.Fatalf("y's floor %d held down by x's Put", id.Floor)
	}
	s.done("x", 10+core.MidWindow)
	if id, _ := s.begin("x", 9+core.MidWindow, slow); id.Floor != 9+core.MidWindow {
		t.Fatalf("floor %d once the slow Put is known", id.Floor)
	}
	s.cancel(s.reserve("x"))
	s.done("x", 9+core.MidWindow)
	s.done("y", 11+core.MidWindow)
	if len(s.puts) != 0 || len(s.remotes) != 0 {
		t.Fatalf("left: %d reservations, %d remotes", len(s.puts), len(s.remotes))
	}
	if newMidSource(0).stream == 0 {
		t.Fatal("a zero stream")
	}
}

// A remote's open seqs, through any mix of seqs opened (in order, out of
// order, again) and done, against a set: the same open, the same lowest.
func TestOpenSeqs(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var o openSeqs
	model := map[uint64]bool{}
	next := uint64(100)
	for i := range 8000 {
		var seq uint64
		switch k := rng.IntN(10); {
		case k < 4: // a Stack's own, in order
			next++
			seq = next
			o.add(seq)
			model[seq] = true
		case k < 5: // an earlier run's, or one opened again
			seq = next - uint64(rng.IntN(150))
			o.add(seq)
			model[seq] = true
		default:
			seq = next - uint64(rng.IntN(150))
			o.remove(seq)
			delete(model, seq)
		}
		low, ok := uint64(0), false
		for s := range model {
			if !ok || s < low {
				low, ok = s, true
			}
		}
		if o.open != len(model) || (ok && o.seqs[o.head].seq != low) {
			t.Fatalf("step %d (seq %d): %d open, lowest %v; want %d, %d", i, seq, o.open, o.seqs[o.head:min(o.head+1, len(o.seqs))], len(model), low)
		}
		// Held: each seq once, in order, none below the lowest open (so no
		// more than the span from it).
		for j := o.head + 1; j < len(o.seqs); j++ {
			if o.seqs[j-1].seq >= o.seqs[j].seq {
				t.Fatalf("step %d: seqs out of order at %d", i, j)
			}
		}
		if ok && uint64(len(o.seqs)-o.head) > next-low+1 {
			t.Fatalf("step %d: %d seqs held, from %d to %d", i, len(o.seqs)-o.head, low, next)
		}
		if !ok && len(o.seqs) != 0 {
			t.Fatalf("step %d: %d seqs held, none open", i, len(o.seqs))
		}
	}
}

// A fan-out of one message to each of many remotes, done in bursts (all
// of a window done, then as many begun), takes the emptied seqs of the
// remotes done for the remotes begun: it makes none per message.
func TestMidSourceBurstsReuse(t *testing.T) {
	const window = shrink.Small // no more: remotes is not rebuilt (shrink.Peak)
	names := make([]string, 4*window)
	for i := range names {
		names[i] = fmt.Sprint("r", i)
	}
	s := newMidSource(7)
	round := 0
	burst := func() {
		seqs := make([]uint64, 0, window)
		for i := range window {
			_, seq := s.begin(names[(round*window+i)%len(names)], 0, 0)
			seqs = append(seqs, seq)
		}
		for i, seq := range seqs {
			s.done(names[(round*window+i)%len(names)], seq)
		}
		round++
	}
	burst() // the first makes them, and the room of remotes
	// One allocation a burst: seqs.
	if a := testing.AllocsPerRun(20, burst); a > 1 {
		t.Fatalf("%.1f allocations a burst of %d messages to as many remotes, want 1", a, window)
	}
}

// A source that a fan-out to ten thousand remotes (and as many queue Puts
// under way at once) filled gives their room back once they are done: its
// maps are rebuilt as they empty (shrink.Peak), and it holds what an
// empty source holds (without: ~1.1 MB more, 109 B a remote).
func TestMidSourceGivesBackRoom(t *testing.T) {
	const n = 10_000
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	// held is the heap s holds: the heap with it less the heap once it
	// is dropped.
	held := func(s **midSource) int64 {
		with := heap()
		*s = nil
		return with - heap()
	}
	empty := newMidSource(7)
	emptyHeld := held(&empty)
	s := newMidSource(7)
	tickets := make([]uint64, n)
	for i := range n {
		tickets[i] = s.reserve(fmt.Sprint("r", i))
	}
	for i := range n {
		s.begin(fmt.Sprint("r", i), 0, tickets[i])
	}
	for i := range n {
		s.done(fmt.Sprint("r", i), uint64(i)+1)
	}
	if len(s.remotes)+len(s.puts) != 0 {
		t.Fatalf("left: %d remotes, %d reservations", len(s.remotes), len(s.puts))
	}
	left := held(&s)
	t.Logf("an empty source holds %d B, one a fan-out to %d left %d B", emptyHeld, n, left)
	// Within what the rest of the process allocates meanwhile (up to
	// ~40 KB seen, either way).
	if left > emptyHeld+4*n {
		t.Errorf("the source holds %d B once a fan-out to %d remotes is done, an empty one %d B; want at most 4 B a remote more", left, n, emptyHeld)
	}
}
