package packet

import (
	"bytes"
	"errors"
	"fmt"
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
	ra := NewReassembler[int, int](nil)
	for trial := 0; trial < 50; trial++ {
		// Both ways of storing: in place (up to 64 KiB) and in chunks.
		msg := make([]byte, 1+r.IntN(3*chunkSize))
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
			out, _, err := ra.Add(0, trial, &heads[i], parts[i])
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
	add := func(ra *Reassembler[int, string], h codec.Head, p []byte) error {
		_, _, err := ra.Add(0, "m", &h, p)
		return err
	}
	for _, tc := range []struct {
		name string
		run  func(ra *Reassembler[int, string]) error
		want error
	}{
		{"sn not below sc", func(ra *Reassembler[int, string]) error {
			h := heads[0]
			h.SegmentNumber = 4
			return add(ra, h, parts[0])
		}, ErrSegment},
		{"different sc", func(ra *Reassembler[int, string]) error {
			_ = add(ra, heads[0], parts[0])
			h := heads[1]
			h.SegmentCount = 5
			return add(ra, h, parts[1])
		}, ErrSegment},
		{"different ml", func(ra *Reassembler[int, string]) error {
			_ = add(ra, heads[0], parts[0])
			h := heads[1]
			h.MessageLength++
			return add(ra, h, parts[1])
		}, ErrSegment},
		{"unequal segment sizes", func(ra *Reassembler[int, string]) error {
			_ = add(ra, heads[0], parts[0])
			return add(ra, heads[1], parts[1][:299])
		}, ErrSegment},
		{"last does not end the message", func(ra *Reassembler[int, string]) error {
			_ = add(ra, heads[0], parts[0])
			return add(ra, heads[3], parts[3][:99])
		}, ErrSegment},
		{"single segment shorter than ml", func(ra *Reassembler[int, string]) error {
			var h codec.Head
			h.Reset()
			h.MessageLength = 10
			return add(ra, h, []byte("short"))
		}, ErrSegment},
		{"empty segment", func(ra *Reassembler[int, string]) error { return add(ra, heads[0], nil) }, ErrSegment},
		{"message too large", func(ra *Reassembler[int, string]) error {
			small := NewReassembler[int, string](&ReassemblyConfig{MaxMessageSize: 999})
			return add(small, heads[0], parts[0])
		}, ErrMessageTooLarge},
		{"remote's messages", func(ra *Reassembler[int, string]) error {
			one := NewReassembler[int, string](&ReassemblyConfig{MaxPerRemote: 1})
			if _, _, err := one.Add(0, "a", &heads[0], parts[0]); err != nil {
				return err
			}
			_, _, err := one.Add(0, "b", &heads[0], parts[0])
			return err
		}, ErrRemoteQuota},
		{"remote's memory", func(ra *Reassembler[int, string]) error {
			tight := NewReassembler[int, string](&ReassemblyConfig{MaxBufferedPerRemote: 2000})
			if _, _, err := tight.Add(0, "a", &heads[0], parts[0]); err != nil {
				return err
			}
			_, _, err := tight.Add(0, "b", &heads[0], parts[0])
			return err
		}, ErrRemoteQuota},
		{"another owner's message", func(ra *Reassembler[int, string]) error {
			if _, _, err := ra.Add(0, "a", &heads[0], parts[0]); err != nil {
				return err
			}
			_, _, err := ra.Add(1, "a", &heads[1], parts[1])
			return err
		}, ErrSegment},
		{"too many messages", func(ra *Reassembler[int, string]) error {
			one := NewReassembler[int, string](&ReassemblyConfig{MaxReassemblies: 1})
			if _, _, err := one.Add(0, "a", &heads[0], parts[0]); err != nil {
				return err
			}
			_, _, err := one.Add(1, "b", &heads[0], parts[0])
			return err
		}, ErrTooManyMessages},
		{"memory", func(ra *Reassembler[int, string]) error {
			tight := NewReassembler[int, string](&ReassemblyConfig{MaxBuffered: 2000})
			if _, _, err := tight.Add(0, "a", &heads[0], parts[0]); err != nil {
				return err
			}
			_, _, err := tight.Add(1, "b", &heads[0], parts[0])
			return err
		}, ErrReassemblyMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.run(NewReassembler[int, string](nil))
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
	ra := NewReassembler[int, int](nil)
	for _, i := range []int{0, 2, 3, 7} {
		if _, _, err := ra.Add(0, 1, &heads[i], parts[i]); err != nil {
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

// FuzzReassemble feeds arbitrary segments of four owners to one
// Reassembler: it never panics, never holds more than its limits (per owner
// and in total), keeps its books consistent, refuses a segment for want of
// total room only when its owner is (about to be) the heaviest, and
// anything it delivers has the length the segments claimed.
func FuzzReassemble(f *testing.F) {
	f.Add([]byte{0, 0, 2, 0, 0, 0, 6, 3, 'a', 'b', 'c', 0, 1, 2, 0, 0, 0, 6, 3, 'd', 'e', 'f'})
	f.Add([]byte{1, 0, 1, 0, 0, 0, 1, 1, 'x'})
	f.Add([]byte{2, 0, 9, 0, 7, 0, 0, 200, 3, 0, 9, 0, 7, 0, 0, 200, 6, 0, 9, 0, 7, 0, 0, 200, 7, 0, 9, 0, 7, 0, 0, 200})
	cfg := ReassemblyConfig{MaxReassemblies: 5, MaxPerRemote: 2, MaxBuffered: 8192, MaxBufferedPerRemote: 5000, MaxMessageSize: 4096}
	f.Fuzz(func(t *testing.T, b []byte) {
		ra := NewReassembler[byte, byte](&cfg)
		for len(b) >= 8 {
			key := b[0] % 16
			owner := key % 4
			if b[6]&0x80 != 0 {
				owner = b[6] % 4 // now and then a key from another owner
			}
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
			_, mineBefore := ra.Owner(owner)
			heaviestOther := 0
			for o := range byte(4) {
				if _, m := ra.Owner(o); o != owner {
					heaviestOther = max(heaviestOther, m)
				}
			}
			out, progress, err := ra.Add(owner, key, &h, payload)
			if err == nil && out != nil && len(out) != int(h.MessageLength) {
				t.Fatalf("delivered %d bytes for ml %d", len(out), h.MessageLength)
			}
			if err != nil && progress {
				t.Fatal("progress on a refused segment")
			}
			if errors.Is(err, ErrTooManyMessages) || errors.Is(err, ErrReassemblyMemory) {
				// The most a segment can need: a slot, a segment, a chunk.
				if most := mineBefore + SlotCharge + SegmentCharge + max(n, chunkSize); heaviestOther > most {
					t.Fatalf("owner %d refused for the total (%v) while another holds %d > %d", owner, err, heaviestOther, most)
				}
			}
			pending, memory := 0, 0
			for o := range byte(4) {
				p, m := ra.Owner(o)
				if p > cfg.MaxPerRemote || m > cfg.MaxBufferedPerRemote {
					t.Fatalf("owner %d over its quota: %d messages, %d bytes", o, p, m)
				}
				if (p == 0) != (m == 0) {
					t.Fatalf("owner %d: %d messages, %d bytes", o, p, m)
				}
				pending += p
				memory += m
			}
			if pending != ra.Pending() || memory != ra.Memory() {
				t.Fatalf("books: owners hold %d messages, %d bytes; total says %d, %d", pending, memory, ra.Pending(), ra.Memory())
			}
			if ra.Memory() > cfg.MaxBuffered || ra.Pending() > cfg.MaxReassemblies || ra.Buffered() > ra.Memory() {
				t.Fatalf("limits broken: %d bytes (%d payload), %d messages", ra.Memory(), ra.Buffered(), ra.Pending())
			}
		}
	})
}

// TestReassemblePlaced: a message that fits one chunk is reassembled in
// one buffer of its length, whatever order its segments come in (the last
// first here), and the caller keeps that buffer: messages that follow are
// stored elsewhere.
func TestReassemblePlaced(t *testing.T) {
	r := NewReassembler[int, int](nil)
	var kept [][]byte
	var want [][]byte
	for k, size := range []int{chunkSize, 16 << 10, 16 << 10, 999, 16 << 10} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i*7 + k)
		}
		heads, parts := cut(msg, 1337)
		var got []byte
		for i := len(heads) - 1; i >= 0; i-- {
			out, _, err := r.Add(0, k, &heads[i], parts[i])
			if err != nil {
				t.Fatal(err)
			}
			if i == len(heads)-1 && len(heads) > 1 {
				p := r.msgs[k]
				if !p.placed || len(p.chunks) != 1 || len(p.chunks[0]) != size {
					t.Fatalf("message of %d bytes: placed %v in %d chunks", size, p.placed, len(p.chunks))
				}
				if mem := r.Memory(); mem != SlotCharge+SegmentCharge+size {
					t.Fatalf("charged %d for its first segment, want %d", mem, SlotCharge+SegmentCharge+size)
				}
			}
			got = out
		}
		if cap(got) != size {
			t.Fatalf("message of %d bytes returned in a buffer of %d", size, cap(got))
		}
		kept, want = append(kept, got), append(want, msg)
	}
	for i := range kept {
		if !bytes.Equal(kept[i], want[i]) {
			t.Fatalf("message %d changed after it was returned", i)
		}
	}
	if r.Pending() != 0 || r.Memory() != 0 {
		t.Fatalf("left %d messages, %d bytes", r.Pending(), r.Memory())
	}
}

// TestReassembleReusesMemory: once a flow is going, storing segments and
// finishing messages allocates only the whole coat each message returns.
func TestReassembleReusesMemory(t *testing.T) {
	msg := bytes.Repeat([]byte("0123456789abcdef"), 12_000) // 192000 bytes
	heads, segs := cut(msg, 1300)                           // 148 segments, 3 chunks
	r := NewReassembler[int, int](nil)
	whole := func() {
		for i := range heads {
			got, _, err := r.Add(0, 7, &heads[i], segs[i])
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

// TestReassembleShrink: Shrink gives back the spares that 20 owners'
// messages left for reuse and keeps a message under way, which then
// completes.
func TestReassembleShrink(t *testing.T) {
	msg := bytes.Repeat([]byte("0123456789abcdef"), 6_000) // 96000 bytes: in chunks, not in place
	heads, segs := cut(msg, 1300)
	r := NewReassembler[int, int](nil)
	for i := range heads { // at once
		for owner := range 20 {
			if _, _, err := r.Add(owner, owner, &heads[i], segs[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range heads[:len(heads)-1] { // one under way
		if _, _, err := r.Add(500, 500, &heads[i], segs[i]); err != nil {
			t.Fatal(err)
		}
	}
	spare := 0
	for _, c := range r.chunks {
		spare += len(c)
	}
	if spare == 0 || len(r.free) == 0 {
		t.Fatalf("%d spare chunks and %d partials kept for reuse, want some", spare, len(r.free))
	}
	r.Shrink()
	spare = 0
	for _, c := range r.chunks {
		spare += len(c)
	}
	if spare+len(r.free)+len(r.freeUse)+len(r.odd) != 0 || r.Pending() != 1 {
		t.Fatalf("after Shrink: %d spare chunks, %d partials, %d owners, %d odd kept; %d pending, want 1",
			spare, len(r.free), len(r.freeUse), len(r.odd), r.Pending())
	}
	last := len(heads) - 1
	got, _, err := r.Add(500, 500, &heads[last], segs[last])
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("the message under way after Shrink: %d bytes, %v", len(got), err)
	}
	if r.Pending() != 0 || r.Memory() != 0 {
		t.Fatalf("%d pending, %d B charged once done", r.Pending(), r.Memory())
	}
}

// TestReassembleSegmentBomb: one owner opens as many huge messages as it
// may, each with a first segment only, and keeps sending more and
// repeating them; another owner's messages of 50 KB all complete, and the
// first holds no more than its quota.
func TestReassembleSegmentBomb(t *testing.T) {
	ra := NewReassembler[int, int](nil)
	cfg := ra.Config()
	huge := codec.Head{}
	huge.Reset()
	huge.SegmentCount, huge.MessageLength = 0xffff, uint32(cfg.MaxMessageSize)
	huge.SetSegment(true)
	first := make([]byte, cfg.MaxMessageSize/0xffff)
	refused := 0
	msg := bytes.Repeat([]byte("victim!"), 50_000/7)
	heads, parts := cut(msg, 1000)
	for round := range 20 {
		for k := range 2 * cfg.MaxPerRemote {
			_, _, err := ra.Add(1, 1000+k, &huge, first)
			switch {
			case errors.Is(err, ErrRemoteQuota):
				refused++
			case err != nil:
				t.Fatal(err)
			}
		}
		for i := range heads {
			got, _, err := ra.Add(2, round, &heads[i], parts[i])
			if err != nil {
				t.Fatalf("round %d, segment %d of the victim: %v", round, i, err)
			}
			if i == len(heads)-1 && !bytes.Equal(got, msg) {
				t.Fatalf("round %d: victim's message not whole", round)
			}
		}
	}
	pending, memory := ra.Owner(1)
	if pending != cfg.MaxPerRemote || memory > cfg.MaxBufferedPerRemote || refused != 20*cfg.MaxPerRemote {
		t.Fatalf("attacker: %d messages, %d bytes (quota %d), %d refused", pending, memory, cfg.MaxBufferedPerRemote, refused)
	}
	t.Logf("attacker holds %d messages, %d bytes of memory (%d of payload); quota %d messages, %d bytes",
		pending, memory, ra.Buffered(), cfg.MaxPerRemote, cfg.MaxBufferedPerRemote)
}

// TestReassembleHeaviestPays: when the total is full, a lighter owner's
// segment evicts the heaviest owner's newest message; the heaviest owner's
// own new message is refused.
func TestReassembleHeaviestPays(t *testing.T) {
	msg := bytes.Repeat([]byte("0123456789"), 10_000) // 100 KB: 100 segments in 2 chunks
	heads, parts := cut(msg, 1000)
	ra := NewReassembler[int, int](&ReassemblyConfig{MaxBuffered: 300_000, MaxBufferedPerRemote: 250_000})
	// Owner 1 holds three half messages (about 3 × 70 KB with its chunks).
	for k := range 3 {
		for i := range 50 {
			if _, _, err := ra.Add(1, k, &heads[i], parts[i]); err != nil {
				t.Fatalf("owner 1, message %d, segment %d: %v", k, i, err)
			}
		}
	}
	// Owner 2 sends two whole messages: the total is too small for both
	// with owner 1's, so owner 1's newest messages give way.
	for k := range 2 {
		for i := range heads {
			got, _, err := ra.Add(2, 100+k, &heads[i], parts[i])
			if err != nil {
				t.Fatalf("owner 2, message %d, segment %d: %v", k, i, err)
			}
			if i == len(heads)-1 && !bytes.Equal(got, msg) {
				t.Fatal("owner 2's message not whole")
			}
		}
	}
	if n, _ := ra.Owner(1); n == 3 || ra.Evicted() == 0 || uint64(3-n) != ra.Evicted() {
		t.Fatalf("owner 1 kept %d of 3 messages, %d evicted", n, ra.Evicted())
	}
	// Owner 1's oldest message (0) is kept and can finish.
	for i := 50; i < len(heads); i++ {
		got, _, err := ra.Add(1, 0, &heads[i], parts[i])
		if err != nil {
			t.Fatalf("owner 1's oldest message, segment %d: %v", i, err)
		}
		if i == len(heads)-1 && !bytes.Equal(got, msg) {
			t.Fatal("owner 1's oldest message not whole")
		}
	}
}

// TestReassembleOwnOldestFirst: an owner at its memory quota gets room for
// its older message by losing its newest one; a duplicate makes no
// progress.
func TestReassembleOwnOldestFirst(t *testing.T) {
	msg := bytes.Repeat([]byte("abcdefghij"), 10_000)
	heads, parts := cut(msg, 1000)
	ra := NewReassembler[int, int](&ReassemblyConfig{MaxBufferedPerRemote: 150_000})
	for k := range 2 {
		for i := range 60 {
			if _, _, err := ra.Add(1, k, &heads[i], parts[i]); err != nil && k == 0 {
				t.Fatalf("message %d, segment %d: %v", k, i, err)
			}
		}
	}
	if _, progress, err := ra.Add(1, 0, &heads[3], parts[3]); progress || err != nil {
		t.Fatalf("duplicate: progress %v, err %v", progress, err)
	}
	for i := 60; i < len(heads); i++ {
		got, progress, err := ra.Add(1, 0, &heads[i], parts[i])
		if err != nil || !progress {
			t.Fatalf("segment %d of the oldest: progress %v, %v", i, progress, err)
		}
		if i == len(heads)-1 && !bytes.Equal(got, msg) {
			t.Fatal("oldest message not whole")
		}
	}
	if n, _ := ra.Owner(1); n != 0 || ra.Evicted() != 1 {
		t.Fatalf("%d messages left, %d evicted; want the newer one evicted", n, ra.Evicted())
	}
}

// BenchmarkReassemble: a steady flow of messages cut into 1000-byte
// segments, from 16 owners in turn; ns per segment.
func BenchmarkReassemble(b *testing.B) {
	for _, size := range []int{1500, 16 << 10, 50_000, 1 << 20} {
		msg := bytes.Repeat([]byte("x"), size)
		heads, segs := cut(msg, 1000)
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			r := NewReassembler[int, int](nil)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			k := 0
			for b.Loop() {
				k++
				for i := range heads {
					if _, _, err := r.Add(k%16, k, &heads[i], segs[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(heads)), "ns/segment")
		})
	}
}

// TestReassembleFanIn: 10,000 remotes each have a two-segment message
// under way at once (all first segments, then all second ones), within the
// defaults: none is refused or evicted, and each is charged its small
// chunk, not 64 KiB.
func TestReassembleFanIn(t *testing.T) {
	const remotes = 10_000
	msg := bytes.Repeat([]byte("fan-in "), 250) // 1750 bytes: 2 segments
	heads, parts := cut(msg, 1000)
	ra := NewReassembler[int, int](nil)
	for r := range remotes {
		if _, _, err := ra.Add(r, r, &heads[0], parts[0]); err != nil {
			t.Fatalf("remote %d: %v", r, err)
		}
	}
	peak := ra.Memory()
	for r := range remotes {
		got, _, err := ra.Add(r, r, &heads[1], parts[1])
		if err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("remote %d: %v", r, err)
		}
	}
	if ra.Evicted() != 0 || ra.Pending() != 0 || peak/remotes > 2048+SlotCharge+SegmentCharge {
		t.Fatalf("%d evicted, %d left, %d bytes per remote at the peak", ra.Evicted(), ra.Pending(), peak/remotes)
	}
	t.Logf("%d remotes: %d bytes charged at the peak, %d per remote", remotes, peak, peak/remotes)
}
