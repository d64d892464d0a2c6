package road

import (
	"testing"

	"github.com/raet-go/raet/road/internal/core"
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
