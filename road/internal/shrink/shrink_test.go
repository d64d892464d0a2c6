package shrink

import (
	"fmt"
	"runtime"
	"testing"
)

func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A map that ten thousand entries filled and left, rebuilt when its Peak
// says, takes the room of an empty map (a map only deleted from keeps
// ~290 KB), after few rebuilds, each of at most a quarter of the entries
// deleted since the last.
func TestMapGivesBackRoom(t *testing.T) {
	const n = 10_000
	for _, rebuild := range []bool{false, true} {
		var p Peak
		m := map[int]int{}
		for i := range n {
			m[i] = i
			p.Note(len(m))
		}
		rebuilds, deleted, copied := 0, 0, 0
		for i := range n {
			delete(m, i)
			deleted++
			if rebuild && p.Due(len(m)) {
				if 3*len(m) > deleted {
					t.Fatalf("rebuilt %d entries after %d deletions", len(m), deleted)
				}
				m = Map(m)
				p.Rebuilt(len(m))
				rebuilds++
				copied += len(m)
				deleted = 0
			}
		}
		with := liveHeap()
		runtime.KeepAlive(m)
		m = nil
		room := with - liveHeap()
		t.Logf("rebuild %v: %d rebuilds, %d entries copied, %d B held empty", rebuild, rebuilds, copied, room)
		switch {
		case rebuild && (room > 1024 || rebuilds > 8):
			t.Errorf("rebuilt %d times, the empty map holds %d B; want at most 1 KiB after at most 8", rebuilds, room)
		case !rebuild && room < 64<<10:
			t.Errorf("a map only deleted from holds %d B: the test measures nothing", room)
		}
	}
}

// A map whose peak fits its least room is never rebuilt; one beyond it
// is, once down to a quarter.
func TestDue(t *testing.T) {
	for _, c := range []struct {
		peak, n int
		due     bool
	}{{Small, 0, false}, {Small + 1, 2, true}, {Small + 1, 3, false}, {100, 25, true}, {100, 26, false}, {0, 0, false}} {
		var p Peak
		p.Note(c.peak)
		p.Note(c.n)
		if got := p.Due(c.n); got != c.due {
			t.Errorf("peak %d, %d entries: due %v, want %v", c.peak, c.n, got, c.due)
		}
	}
}

func Example() {
	var p Peak
	seen := map[string]int{}
	for i := range 1000 {
		seen[fmt.Sprint("remote", i)] = i
		p.Note(len(seen))
	}
	for i := range 1000 {
		delete(seen, fmt.Sprint("remote", i))
		if p.Due(len(seen)) {
			seen = Map(seen) // the room of the deleted goes
			p.Rebuilt(len(seen))
		}
	}
	fmt.Println(len(seen), p.Due(0))
	// Output: 0 false
}

// Spares gives back what was put, last first, keeps no more than Max, and
// nothing once dropped.
func TestSpares(t *testing.T) {
	p := Spares[int]{Max: 2}
	if _, ok := p.Get(); ok {
		t.Fatal("a spare from an empty Spares")
	}
	p.Put(1)
	p.Put(2)
	p.Put(3) // beyond Max
	if p.Len() != 2 {
		t.Fatalf("%d kept, want Max 2", p.Len())
	}
	if v, ok := p.Get(); !ok || v != 2 {
		t.Fatalf("got %d (%v), want 2", v, ok)
	}
	if v, ok := p.Get(); !ok || v != 1 {
		t.Fatalf("got %d (%v), want 1", v, ok)
	}
	p.Put(4)
	p.Drop()
	if _, ok := p.Get(); ok || p.Len() != 0 {
		t.Fatal("a spare after Drop")
	}
	var zero Spares[int]
	if zero.Put(5); zero.Len() != 0 {
		t.Fatal("a zero Spares kept one")
	}
}
