package packet_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// bundleEntries makes n entries of size bytes each, ti from first.
func bundleEntries(first uint32, n, size int) []packet.BundleEntry {
	es := make([]packet.BundleEntry, n)
	for i := range es {
		plain := bytes.Repeat([]byte{byte(i + 1)}, size)
		es[i] = packet.BundleEntry{TI: first + uint32(i), BodyKind: codec.BodyKindJSON, Plain: plain}
	}
	es[n-1].Flags = codec.FlagAgain
	return es
}

// bundleAll adds es to b, flushing when full, and returns the datagrams.
func bundleAll(t testing.TB, b *packet.Bundler, es []packet.BundleEntry) [][]byte {
	t.Helper()
	var out [][]byte
	for _, e := range es {
		err := b.Add(e)
		if errors.Is(err, packet.ErrBundleFull) {
			d, ferr := b.Flush(nil)
			if ferr != nil {
				t.Fatal(ferr)
			}
			out = append(out, d)
			err = b.Add(e)
		}
		if err != nil {
			t.Fatalf("add ti %d: %v", e.TI, err)
		}
	}
	if b.Len() > 0 {
		d, err := b.Flush(nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// unbundle parses, verifies and opens every datagram and returns the entries.
func unbundle(t testing.TB, e end, ds [][]byte) []packet.BundleEntry {
	t.Helper()
	var got []packet.BundleEntry
	for _, d := range ds {
		var p packet.Packet
		if err := packet.Parse(d, &p); err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(e.footB); err != nil {
			t.Fatal(err)
		}
		if p.Head.PacketKind != codec.PacketKindBundle || p.Head.TransactionKind != codec.TransactionKindMessage {
			t.Fatalf("head %v %v", p.Head.PacketKind, p.Head.TransactionKind)
		}
		var b packet.Bundle
		if err := packet.ParseBundle(p.Coat, &b); err != nil {
			t.Fatal(err)
		}
		if p.Head.TransactionID != b.Entries[0].TI {
			t.Fatalf("head ti %d, first entry %d", p.Head.TransactionID, b.Entries[0].TI)
		}
		if _, err := b.Open(nil, e.coatB); err != nil {
			t.Fatal(err)
		}
		got = append(got, b.Entries...)
	}
	return got
}

func TestBundleRoundTrip(t *testing.T) {
	p := newPair(t)
	for _, tc := range []struct {
		hk   codec.HeadKind
		ck   codec.CoatKind
		fk   codec.FootKind
		mps  int
		n    int
		size int
	}{
		{codec.HeadKindBinary, codec.CoatKindNaCl, codec.FootKindMAC, 1400, 100, 64},
		{codec.HeadKindBinary, codec.CoatKindNaCl, codec.FootKindMAC, 8192, 300, 100},
		{codec.HeadKindRaet, codec.CoatKindNaCl, codec.FootKindNaCl, 1024, 20, 200},
		{codec.HeadKindJSON, codec.CoatKindNada, codec.FootKindNada, 0, 9, 0},
	} {
		t.Run(fmt.Sprintf("%v-%v-%v-%d", tc.hk, tc.ck, tc.fk, tc.mps), func(t *testing.T) {
			e := p.packerA(t, tc.hk, tc.ck, tc.fk)
			e.pk.MaxPacketSize = tc.mps
			b := &packet.Bundler{Packer: e.pk, Coat: e.coatA}
			h := messageHead(codec.BodyKindJSON)
			h.CoatKind = tc.ck
			b.Reset(&h)
			es := bundleEntries(0xfffffff0, tc.n, tc.size) // ids wrap
			ds := bundleAll(t, b, es)
			limit := tc.mps
			if limit == 0 {
				limit = codec.MaxPacketSize
			}
			for i, d := range ds {
				if len(d) > limit {
					t.Fatalf("datagram %d: %d bytes, limit %d", i, len(d), limit)
				}
			}
			got := unbundle(t, e, ds)
			if len(got) != len(es) {
				t.Fatalf("%d entries back of %d", len(got), len(es))
			}
			for i := range es {
				g, w := got[i], es[i]
				if g.TI != w.TI || g.Flags != w.Flags || g.BodyKind != w.BodyKind || !bytes.Equal(g.Plain, w.Plain) || g.Len != len(w.Plain) {
					t.Fatalf("entry %d: got %+v, want %+v", i, g, w)
				}
			}
			// Every datagram but the last is full: the next entry did not fit.
			if tc.size > 0 && len(ds) > 1 && len(ds[0])+tc.size+8 < limit && len(got) > packet.MaxBundleEntries {
				t.Fatalf("first datagram %d bytes of %d left room", len(ds[0]), limit)
			}
		})
	}
}

func TestBundleLimits(t *testing.T) {
	p := newPair(t)
	e := p.packerA(t, codec.HeadKindBinary, codec.CoatKindNaCl, codec.FootKindMAC)
	e.pk.MaxPacketSize = 1200
	b := &packet.Bundler{Packer: e.pk, Coat: e.coatA}
	h := messageHead(codec.BodyKindJSON)
	b.Reset(&h)

	// A message too large for an empty bundle goes alone.
	big := packet.BundleEntry{TI: 1, Plain: make([]byte, 1200)}
	if err := b.Add(big); !errors.Is(err, packet.ErrNotBundled) {
		t.Fatalf("big entry: %v", err)
	}
	if _, err := b.Flush(nil); !errors.Is(err, packet.ErrBundleEmpty) {
		t.Fatalf("empty flush: %v", err)
	}
	// The largest entry that fits alone makes a datagram of exactly the limit.
	lo, hi := 0, 1200
	for lo < hi {
		m := (lo + hi + 1) / 2
		b.Reset(&h)
		if b.Add(packet.BundleEntry{TI: 1, Plain: make([]byte, m)}) == nil {
			lo = m
		} else {
			hi = m - 1
		}
	}
	b.Reset(&h)
	if err := b.Add(packet.BundleEntry{TI: 1, Plain: make([]byte, lo)}); err != nil {
		t.Fatal(err)
	}
	d, err := b.Flush(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) != 1200 {
		t.Fatalf("largest single entry (%d bytes) gives %d bytes, want 1200", lo, len(d))
	}
	// At most MaxBundleEntries entries, however small.
	b.Reset(&h)
	e.pk.MaxPacketSize = 65000
	for i := range packet.MaxBundleEntries {
		if err := b.Add(packet.BundleEntry{TI: uint32(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(packet.BundleEntry{TI: 999}); !errors.Is(err, packet.ErrBundleFull) {
		t.Fatalf("entry %d: %v", packet.MaxBundleEntries+1, err)
	}
}

func TestBundleAnswersPiggyback(t *testing.T) {
	p := newPair(t)
	e := p.packerA(t, codec.HeadKindBinary, codec.CoatKindNaCl, codec.FootKindMAC)
	b := &packet.Bundler{Packer: e.pk, Coat: e.coatA}
	h := messageHead(codec.BodyKindJSON)
	b.Reset(&h)
	rs := []packet.AnswerRange{{Kind: codec.PacketKindDone, First: 40, Count: 3}, {Kind: codec.PacketKindAck, First: 50, Count: 1}}
	list, err := packet.AppendAnswers(nil, rs)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetAnswers(list); err != nil {
		t.Fatal(err)
	}
	if err := b.Add(packet.BundleEntry{TI: 7, Plain: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	d, err := b.Flush(nil)
	if err != nil {
		t.Fatal(err)
	}
	var pp packet.Packet
	if err := packet.Parse(d, &pp); err != nil {
		t.Fatal(err)
	}
	var bb packet.Bundle
	if err := packet.ParseBundle(pp.Coat, &bb); err != nil {
		t.Fatal(err)
	}
	got, err := packet.ParseAnswers(nil, bb.Answers)
	if err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("answers %v, %v; want %v", got, err, rs)
	}
	// Answers that do not fit the bundle leave it unchanged.
	e.pk.MaxPacketSize = len(d)
	b.Reset(&h)
	if err := b.Add(packet.BundleEntry{TI: 7, Plain: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetAnswers(append(list, 0)); !errors.Is(err, packet.ErrBundleFull) {
		t.Fatalf("oversized answers: %v", err)
	}
}

func TestBundleMalformed(t *testing.T) {
	valid := func() []byte {
		// n=2: (ti 5, fg 0, bk 1, len 2) (ti 6, fg 0x10, bk 1, len 1), no answers, 3 plain bytes.
		return []byte{2, 5, 0, 1, 2, 6, 0x10, 1, 1, 0, 'a', 'b', 'c'}
	}
	var b packet.Bundle
	if err := packet.ParseBundle(valid(), &b); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Open(nil, nil); err != nil {
		t.Fatal(err)
	}
	if string(b.Entries[0].Plain) != "ab" || string(b.Entries[1].Plain) != "c" || b.Entries[1].Flags != codec.FlagAgain {
		t.Fatalf("entries %+v", b.Entries)
	}
	for _, tc := range []struct {
		name string
		coat []byte
		want error
	}{
		{"empty", nil, packet.ErrBundleTable},
		{"no entries", []byte{0, 0}, packet.ErrBundleTable},
		{"too many", []byte{0x80, 0x02}, packet.ErrBundleTable},
		{"padded count", []byte{0x82, 0x00, 5, 0, 1, 2, 6, 0, 1, 1, 0}, packet.ErrBundleTable},
		{"truncated entry", []byte{2, 5, 0, 1, 2, 6}, packet.ErrBundleTable},
		{"ti over 32 bits", []byte{1, 0x80, 0x80, 0x80, 0x80, 0x10, 0, 1, 0, 0}, packet.ErrBundleTable},
		{"length over coat", []byte{1, 5, 0, 1, 0x7f, 0}, packet.ErrBundleTable},
		{"answers over coat", []byte{1, 5, 0, 1, 0, 9}, packet.ErrBundleTable},
		{"no answers length", []byte{1, 5, 0, 1, 0}, packet.ErrBundleTable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := packet.ParseBundle(tc.coat, &b)
			var pe *packet.PacketError
			if !errors.Is(err, tc.want) || !errors.As(err, &pe) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	// A payload shorter or longer than the table's lengths.
	for _, c := range [][]byte{valid()[:12], append(valid(), 'd')} {
		if err := packet.ParseBundle(c, &b); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Open(nil, nil); !errors.Is(err, packet.ErrBundlePayload) {
			t.Fatalf("payload %q: %v", c[10:], err)
		}
	}
}

func TestAnswersRoundTrip(t *testing.T) {
	var rs []packet.AnswerRange
	for _, ti := range []uint32{10, 11, 12, 14, 0xffffffff, 0, 1, 5} {
		rs = packet.AddAnswer(rs, codec.PacketKindDone, ti)
	}
	rs = packet.AddAnswer(rs, codec.PacketKindAck, 6)
	want := []packet.AnswerRange{
		{codec.PacketKindDone, 10, 3}, {codec.PacketKindDone, 14, 1},
		{codec.PacketKindDone, 0xffffffff, 3}, {codec.PacketKindDone, 5, 1}, {codec.PacketKindAck, 6, 1},
	}
	if !reflect.DeepEqual(rs, want) {
		t.Fatalf("AddAnswer: %v", rs)
	}
	b, err := packet.AppendAnswers(nil, rs)
	if err != nil {
		t.Fatal(err)
	}
	// n, then (kind, zigzag delta, count-1): ids that follow cost 3 bytes a range.
	if len(b) > 1+3*len(rs)+4 {
		t.Fatalf("%d bytes for %d close ranges", len(b), len(rs))
	}
	got, err := packet.ParseAnswers(make([]packet.AnswerRange, 0, packet.MaxAnswerRanges), b)
	if err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("ParseAnswers: %v %v", got, err)
	}
	if packet.RaceEnabled() {
		return // allocation counts are meaningless under -race
	}
	if n := testing.AllocsPerRun(100, func() {
		got, _ = packet.ParseAnswers(got[:0], b)
		b, _ = packet.AppendAnswers(b[:0], rs)
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

func TestAnswersLimits(t *testing.T) {
	bad := [][]packet.AnswerRange{
		nil,
		{{Kind: codec.PacketKindNack, First: 1, Count: 1}},
		{{Kind: codec.PacketKindDone, First: 1, Count: 0}},
		{{Kind: codec.PacketKindDone, First: 1, Count: packet.MaxAnswerIDs}, {Kind: codec.PacketKindAck, First: 1, Count: 1}},
		make([]packet.AnswerRange, packet.MaxAnswerRanges+1),
	}
	for i, rs := range bad {
		if _, err := packet.AppendAnswers(nil, rs); !errors.Is(err, packet.ErrAnswers) {
			t.Errorf("case %d: %v", i, err)
		}
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"zero ranges", []byte{0}},
		{"nack", []byte{1, byte(codec.PacketKindNack), 2, 0}},
		{"truncated", []byte{2, byte(codec.PacketKindDone), 2, 0}},
		{"trailing", []byte{1, byte(codec.PacketKindDone), 2, 0, 0}},
		{"count too big", []byte{1, byte(codec.PacketKindDone), 2, 0x80, 0x40}},
		{"ids over the limit", []byte{2, 15, 0, 0xff, 0x3f, 15, 0, 0}},
		{"padded", []byte{1, byte(codec.PacketKindDone), 0x82, 0x00, 0}},
		{"first over 32 bits", []byte{1, 15, 0x80, 0x80, 0x80, 0x80, 0x10, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := packet.ParseAnswers(nil, tc.b); !errors.Is(err, packet.ErrAnswers) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

func TestPackAnswers(t *testing.T) {
	p := newPair(t)
	e := p.packerA(t, codec.HeadKindBinary, codec.CoatKindNaCl, codec.FootKindMAC)
	h := messageHead(codec.BodyKindJSON)
	h.TransactionID = 99
	rs := []packet.AnswerRange{{Kind: codec.PacketKindDone, First: 1, Count: 200}}
	d, err := e.pk.PackAnswers(nil, &h, rs)
	if err != nil {
		t.Fatal(err)
	}
	var pp packet.Packet
	if err := packet.Parse(d, &pp); err != nil {
		t.Fatal(err)
	}
	if err := pp.Verify(e.footB); err != nil {
		t.Fatal(err)
	}
	if pp.Head.PacketKind != codec.PacketKindAnswers || pp.Head.TransactionID != 0 || !pp.Head.Correspondent() {
		t.Fatalf("head %+v", pp.Head)
	}
	got, err := packet.ParseAnswers(nil, pp.Coat)
	if err != nil || !reflect.DeepEqual(got, rs) {
		t.Fatalf("%v %v", got, err)
	}
	// One datagram answers 200 messages: far smaller than 200 dones.
	if len(d) > 100 {
		t.Fatalf("answers packet %d bytes", len(d))
	}
}

func TestBundlerNoAllocs(t *testing.T) {
	if packet.RaceEnabled() {
		t.Skip("allocation counts are meaningless under -race")
	}
	p := newPair(t)
	e := p.packerA(t, codec.HeadKindBinary, codec.CoatKindNaCl, codec.FootKindMAC)
	b := &packet.Bundler{Packer: e.pk, Coat: e.coatA}
	h := messageHead(codec.BodyKindJSON)
	b.Reset(&h)
	es := bundleEntries(1, 12, 64)
	dst := make([]byte, 0, 2048)
	var bb packet.Bundle
	plain := make([]byte, 0, 2048)
	var pp packet.Packet
	run := func() {
		for _, en := range es {
			if err := b.Add(en); err != nil {
				t.Fatal(err)
			}
		}
		d, err := b.Flush(dst[:0])
		if err != nil {
			t.Fatal(err)
		}
		if err := packet.Parse(d, &pp); err != nil {
			t.Fatal(err)
		}
		if err := packet.ParseBundle(pp.Coat, &bb); err != nil {
			t.Fatal(err)
		}
		if _, err := bb.Open(plain[:0], e.coatB); err != nil {
			t.Fatal(err)
		}
	}
	run()
	if n := testing.AllocsPerRun(50, run); n != 0 {
		t.Fatalf("%v allocations a bundle", n)
	}
}

func FuzzParseBundle(f *testing.F) {
	p := newPair(f)
	e := p.packerA(f, codec.HeadKindBinary, codec.CoatKindNada, codec.FootKindNada)
	b := &packet.Bundler{Packer: e.pk}
	h := messageHead(codec.BodyKindJSON)
	b.Reset(&h)
	list, err := packet.AppendAnswers(nil, []packet.AnswerRange{{Kind: codec.PacketKindDone, First: 3, Count: 2}})
	if err != nil {
		f.Fatal(err)
	}
	for i, es := range [][]packet.BundleEntry{bundleEntries(1, 3, 5), bundleEntries(1<<31, 1, 0), bundleEntries(9, 40, 1)} {
		if i == 1 {
			if err := b.SetAnswers(list); err != nil {
				f.Fatal(err)
			}
		}
		for _, d := range bundleAll(f, b, es) {
			var pp packet.Packet
			if err := packet.Parse(d, &pp); err != nil {
				f.Fatal(err)
			}
			f.Add(pp.Coat)
		}
	}
	e.pk.MaxPacketSize = 65507
	f.Fuzz(func(t *testing.T, coat []byte) {
		var bb packet.Bundle
		err := packet.ParseBundle(coat, &bb)
		if err == nil {
			_, err = bb.Open(nil, nil)
		}
		if err != nil {
			var pe *packet.PacketError
			if !errors.As(err, &pe) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// What parses packs back to the same bytes.
		b.Reset(&h)
		for _, en := range bb.Entries {
			if err := b.Add(en); err != nil {
				t.Fatalf("re-add %+v: %v", en, err)
			}
		}
		if len(bb.Answers) > 0 {
			if err := b.SetAnswers(bb.Answers); err != nil {
				t.Fatal(err)
			}
		}
		d, err := b.Flush(nil)
		if err != nil {
			t.Fatal(err)
		}
		var pp packet.Packet
		if err := packet.Parse(d, &pp); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pp.Coat, coat) {
			t.Fatalf("repacked coat %x, was %x", pp.Coat, coat)
		}
	})
}

func FuzzParseAnswers(f *testing.F) {
	for _, rs := range [][]packet.AnswerRange{
		{{Kind: codec.PacketKindDone, First: 1, Count: 1}},
		{{Kind: codec.PacketKindDone, First: 0xfffffff0, Count: 40}, {Kind: codec.PacketKindAck, First: 3, Count: 2}},
		{{Kind: codec.PacketKindAck, First: 1 << 31, Count: packet.MaxAnswerIDs}},
	} {
		b, err := packet.AppendAnswers(nil, rs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := packet.ParseAnswers(nil, b)
		if err != nil {
			var pe *packet.PacketError
			if !errors.As(err, &pe) || !errors.Is(err, packet.ErrAnswers) {
				t.Fatalf("error %v", err)
			}
			return
		}
		ids := 0
		for _, r := range rs {
			ids += int(r.Count)
		}
		if ids > packet.MaxAnswerIDs || len(rs) > packet.MaxAnswerRanges {
			t.Fatalf("%d ids in %d ranges", ids, len(rs))
		}
		back, err := packet.AppendAnswers(nil, rs)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("re-encoded %x (%v), was %x", back, err, b)
		}
	})
}

func TestPackAnswersNoAllocs(t *testing.T) {
	if packet.RaceEnabled() {
		t.Skip("allocation counts are meaningless under -race")
	}
	p := newPair(t)
	e := p.packerA(t, codec.HeadKindBinary, codec.CoatKindNaCl, codec.FootKindMAC)
	h := messageHead(codec.BodyKindJSON)
	rs := []packet.AnswerRange{{Kind: codec.PacketKindDone, First: 1, Count: 20}, {Kind: codec.PacketKindAck, First: 30, Count: 1}}
	dst := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(50, func() {
		if _, err := e.pk.PackAnswers(dst[:0], &h, rs); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}
