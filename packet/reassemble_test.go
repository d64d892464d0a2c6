package packet

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/raet-go/raet/codec"
)

// cut splits msg into segments of size seg and returns their heads and payloads.
func cut(msg []byte, seg int) ([]codec.Head, [][]byte) {
	sc := (len(msg) + seg - 1) / seg
	var heads []codec.Head
	var parts [][]byte
	for i := 0; i < sc; i++ {
		var h codec.Head
		h.Reset()
		h.SegmentNumber, h.SegmentCount, h.MessageLength = uint16(i), uint16(sc), uint32(len(msg))
		h.SetSegment(true)
		heads = append(heads, h)
		parts = append(parts, msg[i*seg:min((i+1)*seg, len(msg))])
	}
	return heads, parts
}

func TestReassembleShuffledWithDuplicates(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	ra := NewReassembler[int](nil)
	for trial := 0; trial < 50; trial++ {
		msg := make([]byte, 1+r.IntN(50000))
		for i := range msg {
			msg[i] = byte(r.Uint32())
		}
		heads, parts := cut(msg, 1+r.IntN(900))
		order := r.Perm(len(heads))
		// Duplicate a few, in random places.
		for i := 0; i < len(order)/4; i++ {
			order = append(order, order[r.IntN(len(order))])
		}
		r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		// The message is delivered once all its segments are in, however
		// many duplicates came before; later ones belong to the transaction
		// layer, which remembers finished messages.
		var got []byte
		for _, i := range order {
			out, err := ra.Add(trial, &heads[i], parts[i])
			if err != nil {
				t.Fatalf("trial %d seg %d: %v", trial, i, err)
			}
			if out != nil {
				got = out
				break
			}
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("trial %d: reassembled %d bytes, want %d", trial, len(got), len(msg))
		}
	}
	if ra.Pending() != 0 || ra.Buffered() != 0 {
		t.Fatalf("left %d messages, %d bytes", ra.Pending(), ra.Buffered())
	}
}

func TestReassembleRefusals(t *testing.T) {
	msg := bytes.Repeat([]byte("0123456789"), 100) // 1000 bytes
	heads, parts := cut(msg, 300)                  // 300, 300, 300, 100
	add := func(ra *Reassembler[string], h codec.Head, p []byte) error {
		_, err := ra.Add("m", &h, p)
		return err
	}
	for _, tc := range []struct {
		name string
		run  func(ra *Reassembler[string]) error
		want error
	}{
		{"sn not below sc", func(ra *Reassembler[string]) error {
			h := heads[0]
			h.SegmentNumber = 4
			return add(ra, h, parts[0])
		}, ErrSegment},
		{"different sc", func(ra *Reassembler[string]) error {
			_ = add(ra, heads[0], parts[0])
			h := heads[1]
			h.SegmentCount = 5
			return add(ra, h, parts[1])
		}, ErrSegment},
		{"different ml", func(ra *Reassembler[string]) error {
			_ = add(ra, heads[0], parts[0])
			h := heads[1]
			h.MessageLength++
			return add(ra, h, parts[1])
		}, ErrSegment},
		{"unequal segment sizes", func(ra *Reassembler[string]) error {
			_ = add(ra, heads[0], parts[0])
			return add(ra, heads[1], parts[1][:299])
		}, ErrSegment},
		{"last does not end the message", func(ra *Reassembler[string]) error {
			_ = add(ra, heads[0], parts[0])
			return add(ra, heads[3], parts[3][:99])
		}, ErrSegment},
		{"single segment shorter than ml", func(ra *Reassembler[string]) error {
			var h codec.Head
			h.Reset()
			h.MessageLength = 10
			return add(ra, h, []byte("short"))
		}, ErrSegment},
		{"empty segment", func(ra *Reassembler[string]) error { return add(ra, heads[0], nil) }, ErrSegment},
		{"message too large", func(ra *Reassembler[string]) error {
			small := NewReassembler[string](&ReassemblyConfig{MaxMessageSize: 999})
			return add(small, heads[0], parts[0])
		}, ErrMessageTooLarge},
		{"too many messages", func(ra *Reassembler[string]) error {
			one := NewReassembler[string](&ReassemblyConfig{MaxReassemblies: 1})
			if _, err := one.Add("a", &heads[0], parts[0]); err != nil {
				return err
			}
			_, err := one.Add("b", &heads[0], parts[0])
			return err
		}, ErrTooManyMessages},
		{"memory", func(ra *Reassembler[string]) error {
			tight := NewReassembler[string](&ReassemblyConfig{MaxBuffered: 500})
			if _, err := tight.Add("a", &heads[0], parts[0]); err != nil {
				return err
			}
			_, err := tight.Add("b", &heads[0], parts[0])
			return err
		}, ErrReassemblyMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(NewReassembler[string](nil))
			var se *SegmentError
			if !errors.Is(err, tc.want) || !errors.As(err, &se) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReassembleMissingAndDrop(t *testing.T) {
	msg := make([]byte, 1000)
	heads, parts := cut(msg, 100)
	ra := NewReassembler[int](nil)
	for _, i := range []int{0, 2, 3, 7} {
		if _, err := ra.Add(1, &heads[i], parts[i]); err != nil {
			t.Fatal(err)
		}
	}
	missing, high := ra.Missing(nil, 1)
	if high != 7 || len(missing) != 4 || missing[0] != 1 || missing[3] != 6 {
		t.Fatalf("missing %v high %d", missing, high)
	}
	if ra.Buffered() != 400 {
		t.Fatalf("buffered %d", ra.Buffered())
	}
	ra.Drop(1)
	if ra.Pending() != 0 || ra.Buffered() != 0 {
		t.Fatal("drop left state")
	}
}

// FuzzReassemble feeds arbitrary segments to one Reassembler: it never
// panics, never holds more than its limits, and anything it delivers has the
// length the segments claimed.
func FuzzReassemble(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 0, 0, 6, 3, 'a', 'b', 'c', 0, 1, 2, 0, 0, 0, 6, 3, 'd', 'e', 'f'})
	f.Add([]byte{1, 0, 1, 0, 0, 0, 1, 1, 'x'})
	f.Fuzz(func(t *testing.T, b []byte) {
		ra := NewReassembler[byte](&ReassemblyConfig{MaxReassemblies: 4, MaxBuffered: 4096, MaxMessageSize: 2048})
		for len(b) >= 8 {
			key := b[0] % 8
			var h codec.Head
			h.Reset()
			h.SegmentNumber = uint16(b[1])
			h.SegmentCount = uint16(b[2])
			h.MessageLength = uint32(b[3])<<16 | uint32(b[4])<<8 | uint32(b[5])
			n := int(b[7])
			b = b[8:]
			n = min(n, len(b))
			payload := b[:n]
			b = b[n:]
			out, err := ra.Add(key, &h, payload)
			if err == nil && out != nil && len(out) != int(h.MessageLength) {
				t.Fatalf("delivered %d bytes for ml %d", len(out), h.MessageLength)
			}
			if ra.Buffered() > 4096 || ra.Pending() > 4 {
				t.Fatalf("limits broken: %d bytes, %d messages", ra.Buffered(), ra.Pending())
			}
		}
	})
}

// TestReassembleReusesMemory: once a flow is going, storing segments and
// finishing messages allocates only the whole coat each message returns.
func TestReassembleReusesMemory(t *testing.T) {
	msg := bytes.Repeat([]byte("0123456789abcdef"), 12_000) // 192000 bytes
	heads, segs := cut(msg, 1300)                           // 148 segments, 3 chunks
	r := NewReassembler[int](nil)
	whole := func() {
		for i := range heads {
			got, err := r.Add(7, &heads[i], segs[i])
			if err != nil {
				t.Fatal(err)
			}
			if i == len(heads)-1 && !bytes.Equal(got, msg) {
				t.Fatal("reassembled message differs")
			}
		}
	}
	whole() // warm up: chunks and bookkeeping come to exist
	allocs := testing.AllocsPerRun(20, whole)
	if allocs > 1 {
		t.Errorf("%.1f allocations per message of %d segments, want 1 (the coat)", allocs, len(heads))
	}
	if r.Pending() != 0 || r.Buffered() != 0 {
		t.Errorf("after the messages: %d pending, %d bytes buffered", r.Pending(), r.Buffered())
	}
}
