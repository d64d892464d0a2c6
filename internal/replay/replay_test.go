package replay

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFilterOnceInOrder(t *testing.T) {
	var f Filter
	for n := range uint64(3 * Window) {
		if v := f.Accept(n); v != Fresh {
			t.Fatalf("Accept(%d) = %v, want fresh", n, v)
		}
		if v := f.Accept(n); v != Seen {
			t.Fatalf("second Accept(%d) = %v, want seen", n, v)
		}
	}
}

func TestFilterReorderedWithinWindow(t *testing.T) {
	var f Filter
	const top = 10 * Window
	if v := f.Accept(top); v != Fresh {
		t.Fatalf("Accept(top) = %v", v)
	}
	// Every counter of the window, in a shuffled order, is accepted once.
	order := rand.New(rand.NewPCG(1, 2)).Perm(Window - 1)
	for _, i := range order {
		n := uint64(top - 1 - i)
		if v := f.Check(n); v != Fresh {
			t.Fatalf("Check(%d) = %v, want fresh", n, v)
		}
		if v := f.Accept(n); v != Fresh {
			t.Fatalf("Accept(%d) = %v, want fresh", n, v)
		}
	}
	for _, i := range order {
		if v := f.Accept(uint64(top - 1 - i)); v != Seen {
			t.Fatalf("replay of %d = %v, want seen", top-1-i, v)
		}
	}
	if v := f.Accept(top - Window); v != TooOld {
		t.Fatalf("Accept(top-Window) = %v, want too old", v)
	}
	if v := f.Check(0); v != TooOld {
		t.Fatalf("Check(0) = %v, want too old", v)
	}
}

func TestFilterSlideForgets(t *testing.T) {
	var f Filter
	f.Accept(5)
	f.Accept(70)
	// A jump of less than the ring keeps what the window still covers…
	f.Accept(70 + Window - 10)
	if v := f.Check(70); v != Seen {
		t.Fatalf("Check(70) after a short slide = %v, want seen", v)
	}
	if v := f.Check(71); v != Fresh {
		t.Fatalf("Check(71) = %v, want fresh", v)
	}
	// …and the words it slides into are cleared: counter 5's bit never
	// shows through as the bit of 5+8192, which shares it.
	f.Accept(5 + 128*64 + 3)
	if v := f.Check(5 + 128*64); v != Fresh {
		t.Fatalf("Check(5+ring) = %v, want fresh", v)
	}
	// A jump past the ring clears everything.
	f.Accept(1 << 40)
	for _, n := range []uint64{1<<40 - 1, 1<<40 - Window + 1} {
		if v := f.Check(n); v != Fresh {
			t.Fatalf("Check(%d) after a long jump = %v, want fresh", n, v)
		}
	}
}

func TestFilterEdges(t *testing.T) {
	var f Filter
	if v := f.Accept(0); v != Fresh {
		t.Fatalf("Accept(0) on the zero filter = %v", v)
	}
	if v := f.Accept(0); v != Seen {
		t.Fatalf("replay of 0 = %v", v)
	}
	if v := f.Accept(math.MaxUint64); v != Fresh {
		t.Fatalf("Accept(max) = %v", v)
	}
	if v := f.Accept(math.MaxUint64); v != Seen {
		t.Fatalf("replay of max = %v", v)
	}
	if v := f.Accept(math.MaxUint64 - 1); v != Fresh {
		t.Fatalf("Accept(max-1) = %v", v)
	}
	f.Reset()
	if v := f.Accept(0); v != Fresh {
		t.Fatalf("Accept(0) after Reset = %v", v)
	}
}

// TestFilterMatchesModel compares the filter with a map of every counter
// accepted, over random walks.
func TestFilterMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for walk := range 20 {
		var f Filter
		seen := map[uint64]bool{}
		var top uint64
		for range 20000 {
			var n uint64
			switch r := rng.IntN(10); {
			case r < 6:
				n = top + uint64(rng.IntN(40))
			case r < 9:
				n = top - min(top, uint64(rng.IntN(Window+200)))
			default:
				n = top + uint64(rng.IntN(3*Window))
			}
			want := Fresh
			switch {
			case n <= top && top-n >= Window && len(seen) > 0:
				want = TooOld
			case seen[n]:
				want = Seen
			}
			if got := f.Accept(n); got != want {
				t.Fatalf("walk %d: Accept(%d) with top %d = %v, want %v", walk, n, top, got, want)
			}
			if want == Fresh {
				seen[n] = true
				top = max(top, n)
			}
		}
	}
}

// fixed is the filter as a full ring of 128 words: what Filter must agree
// with, whatever its ring's size.
type fixed struct {
	top  uint64
	bits [words]uint64
}

func (f *fixed) check(n uint64) Verdict {
	switch {
	case n > f.top:
		return Fresh
	case f.top-n >= Window:
		return TooOld
	case f.bits[n/64%words]&(1<<(n%64)) != 0:
		return Seen
	}
	return Fresh
}

func (f *fixed) accept(n uint64) Verdict {
	if n > f.top {
		if from, to := f.top/64, n/64; to-from >= words {
			clear(f.bits[:])
		} else {
			for b := from + 1; b <= to; b++ {
				f.bits[b%words] = 0
			}
		}
		f.top = n
	} else if v := f.check(n); v != Fresh {
		return v
	}
	f.bits[n/64%words] |= 1 << (n % 64)
	return Fresh
}

// step is the next counter of a lossy, reordering, replaying, jumping peer.
func step(rng *rand.Rand, n, top uint64) uint64 {
	switch r := rng.IntN(100); {
	case r < 75:
		return n + 1
	case r < 85:
		return n + uint64(rng.IntN(100)) // losses
	case r < 97:
		return n - min(n, uint64(rng.IntN(3000))) // late, or replayed
	case r < 99:
		return n + uint64(rng.IntN(2*Window)) // a jump
	}
	return top + 1
}

// The filter says what a full ring says of every counter, under losses,
// reordering, replays and jumps; in order it keeps one word, and after a
// loss it is back to a few once the hole is out of the window.
func TestFilterAgreesWithFullRing(t *testing.T) {
	for seed := range uint64(30) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var f Filter
		var g fixed
		var n uint64
		for i := range 50_000 {
			if i%1000 < 300 { // runs in order, then replays of them
				n = g.top + 1
				if i%1000 >= 200 {
					n = g.top - min(g.top, uint64(rng.IntN(3000)))
				}
			} else {
				n = step(rng, n, g.top)
			}
			if c, w := f.Check(n), g.check(n); c != w {
				t.Fatalf("seed %d, step %d: Check(%d) = %v, a full ring says %v", seed, i, n, c, w)
			}
			if a, w := f.Accept(n), g.accept(n); a != w {
				t.Fatalf("seed %d, step %d: Accept(%d) = %v, a full ring says %v", seed, i, n, a, w)
			}
			if len(f.bits) > words {
				t.Fatalf("a ring of %d words", len(f.bits))
			}
		}
		for n = g.top + 1; n < g.top+2*Window; n++ { // in order again
			f.Accept(n)
		}
		if len(f.bits) > 2 {
			t.Fatalf("seed %d: in order again, the ring keeps %d words", seed, len(f.bits))
		}
	}
	var f Filter
	for n := range uint64(100_000) {
		f.Accept(n)
	}
	if len(f.bits) != 1 {
		t.Fatalf("in order: %d words", len(f.bits))
	}
}
