package road

import (
	"bytes"
	"testing"
	"time"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	for _, id := range []msgID{{}, {stream: 1, seq: 1, floor: 1}, {stream: ^uint64(0), seq: 1 << 40, floor: 7}} {
		b := appendEnvelope(nil, id, []byte(`{"a":1}`))
		got, body, err := openEnvelope(b)
		if err != nil || got != id || string(body) != `{"a":1}` {
			t.Fatalf("%+v: got %+v %q %v", id, got, body, err)
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1, 0x80}, {1, 1, 0, 0}, {1, 1, 2, 3}} {
		if _, _, err := openEnvelope(bad); err == nil {
			t.Fatalf("%x accepted", bad)
		}
	}
}

// FuzzOpenEnvelope: any plain coat either fails or splits into an id that
// builds the same bytes again.
func FuzzOpenEnvelope(f *testing.F) {
	f.Add(appendEnvelope(nil, msgID{}, []byte("x")))
	f.Add(appendEnvelope(nil, msgID{stream: 9, seq: 300, floor: 299}, []byte(`{"k":"v"}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, body, err := openEnvelope(b)
		if err != nil {
			return
		}
		if again := appendEnvelope(nil, id, body); id.seq != 0 && !bytes.Equal(again[len(again)-len(body):], body) {
			t.Fatalf("%x: body %x", b, body)
		}
		if id.seq != 0 {
			var f midFilter
			now := time.Unix(0, 0)
			if f.repeated(id, now) {
				t.Fatal("a first id is a repeat")
			}
			f.delivered(id, now)
			if !f.repeated(id, now) {
				t.Fatal("a delivered id is not a repeat")
			}
		}
	})
}

// The filter: repeats within the window and below the floor are caught,
// a new floor forgets what is below it, streams are kept apart and the
// least recently used is forgotten first.
func TestMidFilter(t *testing.T) {
	var f midFilter
	now := time.Unix(100, 0)
	id := func(stream, seq, floor uint64) msgID { return msgID{stream: stream, seq: seq, floor: floor} }
	for seq := uint64(1); seq <= 100; seq += 2 {
		if f.repeated(id(1, seq, 1), now) {
			t.Fatalf("seq %d new, taken for a repeat", seq)
		}
		f.delivered(id(1, seq, 1), now)
	}
	if !f.repeated(id(1, 51, 1), now) || f.repeated(id(1, 52, 1), now) || f.repeated(id(2, 51, 1), now) {
		t.Fatal("repeat, gap or other stream wrong")
	}
	// Floor 60: the sender has done with everything below.
	if !f.repeated(id(1, 52, 60), now) || f.repeated(id(1, 60, 60), now) {
		t.Fatal("floor")
	}
	// A seq far beyond the window moves it (only a sender that breaks its
	// own window does that).
	f.delivered(id(1, 60+3*midWindow, 60), now)
	if !f.repeated(id(1, 61, 60), now) || !f.repeated(id(1, 60+3*midWindow, 60), now) {
		t.Fatal("window moved up")
	}
	for s := range uint64(midStreams + 1) {
		f.delivered(id(10+s, 5, 1), now.Add(time.Duration(s+1)*time.Second))
	}
	if len(f.streams) != midStreams || f.repeated(id(1, 61, 60), now) {
		t.Fatal("the least recently used stream was not the one forgotten")
	}
	if !f.repeated(id(10+midStreams, 5, 1), now) {
		t.Fatal("the newest stream was forgotten")
	}
}

// The source: a remote's floor is its oldest seq not done; a seq too far
// above it goes without an id; another remote's old message holds back
// nothing; a Put under way holds its remote's floor down.
func TestMidSource(t *testing.T) {
	s := newMidSource(7)
	s.hold("x", 3)
	a, _ := s.begin("x", 5, 0)
	b, _ := s.begin("x", 4, 0)
	if a.floor != 3 || b.floor != 3 || a.seq != 5 || a.stream != 7 {
		t.Fatalf("%+v %+v", a, b)
	}
	s.done("x", 3)
	if c, _ := s.begin("x", 6, 0); c.floor != 4 {
		t.Fatalf("floor %d after 3 done", c.floor)
	}
	s.done("x", 5)
	if c, _ := s.begin("x", 7, 0); c.floor != 4 {
		t.Fatalf("floor %d with 4 open", c.floor)
	}
	if far, seq := s.begin("x", 4+midWindow, 0); far.seq != 0 || seq != 4+midWindow || far.floor != 4 {
		t.Fatalf("beyond the window: %+v", far)
	}
	if y, _ := s.begin("y", 5+midWindow, 0); y.seq != 5+midWindow || y.floor != y.seq {
		t.Fatalf("x's old message held y back: %+v", y)
	}
	for _, seq := range []uint64{4, 6, 7, 4 + midWindow} {
		s.done("x", seq)
	}
	s.done("y", 5+midWindow)
	if own, seq := s.begin("x", 0, 0); own.seq != 6+midWindow || seq != own.seq || own.floor != own.seq {
		t.Fatalf("own counter: %+v", own)
	}
	s.done("x", 6+midWindow)
	slow := s.reserve("x")
	fast := s.reserve("x")
	other := s.reserve("y")
	if id, _ := s.begin("x", 10+midWindow, fast); id.floor != 7+midWindow {
		t.Fatalf("floor %d passed a Put under way", id.floor)
	}
	if id, _ := s.begin("y", 11+midWindow, other); id.floor != 11+midWindow {
		t.Fatalf("y's floor %d held down by x's Put", id.floor)
	}
	s.done("x", 10+midWindow)
	if id, _ := s.begin("x", 9+midWindow, slow); id.floor != 9+midWindow {
		t.Fatalf("floor %d once the slow Put is known", id.floor)
	}
	s.cancel(s.reserve("x"))
	s.done("x", 9+midWindow)
	s.done("y", 11+midWindow)
	if len(s.puts) != 0 || len(s.remotes) != 0 {
		t.Fatalf("left: %d reservations, %d remotes", len(s.puts), len(s.remotes))
	}
	if newMidSource(0).stream == 0 {
		t.Fatal("a zero stream")
	}
}
