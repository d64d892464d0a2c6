package core

import (
	"bytes"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// With SignLater, a message's datagrams leave the core with zero feet
// (join, allow and alive packets, which the core keeps, come signed); a
// receiver drops one sent so, and takes it once Datagram.Sign signed it.
// A segment the messenger sends again after its redo timer comes out byte
// for byte as it went the first time (Ed25519 is deterministic), as it does
// when the core signs.
func TestSignLater(t *testing.T) {
	for _, later := range []bool{false, true} {
		p := newPair(t, keep.AutoAlways, func(m, o *estate) {
			m.Profile, o.Profile = ProfileReference, ProfileReference
			m.SignLater, o.SignLater = later, later
		})
		p.join()
		for _, w := range p.wire {
			var pk packet.Packet
			if err := packet.Parse(w.b, &pk); err != nil {
				t.Fatal(err)
			}
			if pk.Head.FootKind == codec.FootKindNaCl && bytes.Equal(pk.Foot, make([]byte, packet.NaClFootSize)) {
				t.Fatalf("later %v: a %v/%v packet went unsigned", later, pk.Head.TransactionKind, pk.Head.PacketKind)
			}
		}

		b, err := p.other.marshal(map[string]any{"data": "x"})
		if err != nil {
			t.Fatal(err)
		}
		res := make(chan error, 1)
		p.other.Send("main", b, p.other.cfg.BodyKind, MsgID{}, res, p.now, p.now)
		out := p.other.TakeOut(nil)
		if len(out) != 1 {
			t.Fatalf("later %v: %d datagrams, want the message", later, len(out))
		}
		d := &out[0]
		foot := d.B[len(d.B)-packet.NaClFootSize:]
		if zero := bytes.Equal(foot, make([]byte, packet.NaClFootSize)); zero != later {
			t.Fatalf("later %v: the foot is zeros: %v", later, zero)
		}
		first := bytes.Clone(d.B)
		p.feed(p.main, first, p.otherAddr) // unsigned when later: dropped
		p.collect(p.main)
		if got := len(p.delivered[p.main]); got != map[bool]int{false: 1, true: 0}[later] {
			t.Fatalf("later %v: %d delivered before Sign", later, got)
		}
		if later {
			if n := p.main.Counters().Drops[dropVerifyFailed.String()]; n != 1 {
				t.Fatalf("the unsigned datagram was not dropped as %v: %v", dropVerifyFailed, p.main.Counters().Drops)
			}
			d.Sign()
			if bytes.Equal(foot, make([]byte, packet.NaClFootSize)) || !bytes.Equal(d.B[:len(d.B)-len(foot)], first[:len(first)-len(foot)]) {
				t.Fatal("Sign did not sign the foot in place, or changed the packet")
			}
			first = bytes.Clone(d.B)
			p.feed(p.main, first, p.otherAddr)
			p.collect(p.main)
			if len(p.delivered[p.main]) != 1 {
				t.Fatal("the signed datagram was not delivered")
			}
		}
		d.Release()

		// main's done is lost: other's redo timer sends the message again,
		// unchanged.
		p.main.TakeOut(nil)
		p.wire = nil
		p.cut = func(w wired) bool { return w.from == p.main }
		p.advance(2 * time.Second)
		again := 0
		for _, w := range p.wire {
			if w.from != p.other {
				continue
			}
			again++
			if !bytes.Equal(w.b, first) {
				t.Fatalf("later %v: the message went again changed", later)
			}
		}
		if again == 0 {
			t.Fatalf("later %v: the message never went again", later)
		}
	}
}

// Leaving a foot to sign and signing it allocate nothing.
func TestSignLaterAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race (sync.Pool drops items at random)")
	}
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		m.Profile, o.Profile = ProfileReference, ProfileReference
		m.SignLater, o.SignLater = true, true
	})
	p.join()
	c := p.other
	r := c.roster.byName["main"]
	h := c.outHead(codec.TransactionKindMessage, codec.PacketKindAck, r.nuid, r.fuid, r.sid, 1, true)
	h.BodyKind, h.CoatKind, h.FootKind = c.cfg.BodyKind, codec.CoatKindNaCl, codec.FootKindNaCl
	out := make([]Datagram, 0, 4)
	allocs := testing.AllocsPerRun(100, func() {
		if !c.send(r, &h, nil, r.ha) {
			t.Fatal("not sent")
		}
		out = c.TakeOut(out)
		out[0].Sign()
		out[0].Release()
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per packet left to sign and signed, want 0", allocs)
	}
}
