package core

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/raet-go/raet/packet"
)

// FuzzOpenEnvelope: any plain coat either fails or splits into an id that
// builds the same bytes again.
func FuzzOpenEnvelope(f *testing.F) {
	f.Add(packet.AppendMessageID(nil, MsgID{}, []byte("x")))
	f.Add(packet.AppendMessageID(nil, MsgID{Stream: 9, Seq: 300, Floor: 299}, []byte(`{"k":"v"}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, body, err := packet.SplitMessageID(b)
		if err != nil {
			return
		}
		if again := packet.AppendMessageID(nil, id, body); id.Seq != 0 && !bytes.Equal(again[len(again)-len(body):], body) {
			t.Fatalf("%x: body %x", b, body)
		}
		if id.Seq != 0 {
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
	id := func(stream, seq, floor uint64) MsgID { return MsgID{Stream: stream, Seq: seq, Floor: floor} }
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
	f.delivered(id(1, 60+3*MidWindow, 60), now)
	if !f.repeated(id(1, 61, 60), now) || !f.repeated(id(1, 60+3*MidWindow, 60), now) {
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

// The filter says repeated exactly for the seqs below the highest floor and
// those delivered, whatever the order, and its ring stays within
// midMaxWords words, back to one once the floor catches up.
func TestMidFilterMatchesModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var f midFilter
		now := time.Unix(100, 0)
		base, next := uint64(1), uint64(1)
		delivered := map[uint64]bool{}
		for range 20_000 {
			seq := next
			switch r := rng.IntN(100); {
			case r < 70:
				next++
			case r < 95:
				seq = base + uint64(rng.IntN(int(next-base)+1)) // a repeat, or one left behind
			default:
				seq = next + uint64(rng.IntN(3*MidWindow)) // far ahead: moves the window
			}
			floor := base
			if rng.IntN(4) == 0 {
				floor = min(seq, base+uint64(rng.IntN(8)))
			}
			id := MsgID{Stream: 1, Seq: seq, Floor: floor}
			base = max(base, floor)
			want := seq < base || delivered[seq]
			if got := f.repeated(id, now); got != want {
				t.Fatalf("seed %d: seq %d (base %d): repeated %v, want %v", seed, seq, base, got, want)
			}
			if !want {
				f.delivered(id, now)
				delivered[seq] = true
				if seq >= base+MidWindow {
					base = seq - MidWindow + 1
				}
				next = max(next, seq+1)
			}
			if n := len(f.streams[0].bits); n > midMaxWords {
				t.Fatalf("seed %d: a ring of %d words", seed, n)
			}
		}
		f.repeated(MsgID{Stream: 1, Seq: next, Floor: next}, now)
		if n := len(f.streams[0].bits); n != 1 {
			t.Fatalf("seed %d: the floor caught up, the ring keeps %d words", seed, n)
		}
	}
}
