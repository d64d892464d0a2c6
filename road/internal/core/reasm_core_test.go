package core

import (
	"bytes"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// segmentsFrom packs, as other would send them, the segments of one
// message of n bytes (count of them), none with wf.
func (p *pair) segmentsFrom(n int) [][]byte {
	p.tb.Helper()
	o, r := p.other, p.otherRemote()
	body := bytes.Repeat([]byte("s"), n)
	h := o.outHead(codec.TransactionKindMessage, codec.PacketKindMessage, r.nuid, r.fuid, r.sid, r.nextTid(), false)
	h.BodyKind, h.CoatKind, h.FootKind = codec.BodyKindRaw, r.coatKind(), codec.FootKindNaCl
	pk := o.packerFor(r, &h)
	a := r.aead()
	var coat []byte
	var segSize, count int
	var err error
	if a != nil {
		coat = packet.AppendMessageID(nil, MsgID{}, body)
		segSize, count, err = pk.SegmentsAEAD(&h, a, len(coat))
	} else if coat, err = sealWithID(r.coat, MsgID{}, body); err == nil {
		segSize, count, err = pk.Segments(&h, len(coat))
	}
	if err != nil {
		p.tb.Fatal(err)
	}
	var out [][]byte
	for i := range count {
		hh := h
		var b []byte
		if a != nil {
			b, err = pk.PackSegmentAEAD(nil, &hh, a, nil, coat, i, segSize, count)
		} else {
			b, err = pk.PackSegment(nil, &hh, coat, i, segSize, count)
		}
		if err != nil {
			p.tb.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// On the fake clock: repeats of a segment buy an unfinished message no
// time, so it is dropped MessageTimeout after its last new segment; new
// segments do buy time, but never past maxReassemblyAge from the first.
func TestReassemblyDeadline(t *testing.T) {
	for _, tp := range []testProfile{macProfile, aeadProfile} {
		t.Run(tp.name, func(t *testing.T) { testReassemblyDeadline(t, tp) })
	}
}

func testReassemblyDeadline(t *testing.T, tp testProfile) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		tp.set(m, o)
		m.MessageTimeout, o.MessageTimeout = time.Minute, time.Minute
	})
	p.join()
	held := func() int { return p.main.reasm.Pending() }

	segs := p.segmentsFrom(5000)
	p.inject(p.main, segs[0], p.otherAddr)
	for range 5 { // repeats every 20 s, for 100 s
		p.advance(20 * time.Second)
		if held() == 0 {
			break
		}
		p.inject(p.main, segs[0], p.otherAddr)
	}
	if held() != 0 {
		t.Fatalf("repeats kept the message alive: %d held after 100 s", held())
	}

	// A new segment every 50 s: alive past MessageTimeout, dropped at the
	// cap. The message must have more segments than the cap lets through.
	long := p.segmentsFrom(30_000)
	if steps := int(maxReassemblyAge/(50*time.Second)) + 2; len(long) < steps {
		t.Fatalf("%d segments, want %d", len(long), steps)
	}
	start := p.now
	p.inject(p.main, long[0], p.otherAddr)
	for i := 1; held() != 0; i++ {
		if i == len(long) || p.now.Sub(start) > maxReassemblyAge {
			t.Fatalf("still held %v after its first segment", p.now.Sub(start))
		}
		p.advance(50 * time.Second)
		p.inject(p.main, long[i], p.otherAddr)
	}
	if age := p.now.Sub(start); age < maxReassemblyAge-time.Minute {
		t.Fatalf("dropped after %v with progress every 50 s", age)
	}
	if got := len(p.delivered[p.main]); got != 0 {
		t.Fatalf("%d delivered", got)
	}
}
