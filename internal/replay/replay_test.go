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
