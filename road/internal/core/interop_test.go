package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// The reference's ways that differ from raet-go's where a packet is lost
// (issue 31), played by hand: other is a raet-go estate of the reference
// profile, and what the reference would send where raet-go sends something
// else is cut from the wire and replaced with a packet of the reference's
// shape (§8.6: its Staler and Stalent nacks, its joinent's nack at its 5 s
// timeout).

// parseHead is the head of datagram b.
func parseHead(tb testing.TB, b []byte) codec.Head {
	tb.Helper()
	var pp packet.Packet
	if err := packet.Parse(b, &pp); err != nil {
		tb.Fatal(err)
	}
	return pp.Head
}

// A reference joiner completes its join when it sends its ack; if that ack
// is lost it answers the main's response sent again with a stale nack
// (Staler: se its uid for the main, de the response's se, 0 in a vacuous
// join), and allows when its application asks, naming the uid the
// response gave. The main keeps the remote and takes the signed hello as
// the ack: allowed, messages both ways, at 0.2 s, 1 s and 6 s (past the
// joinent's timeout), with the main's presence running meanwhile.
func TestRefJoinerAckLost(t *testing.T) {
	for _, later := range []time.Duration{200 * time.Millisecond, time.Second, 6 * time.Second} {
		t.Run(fmt.Sprint(later), func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) {
				m.AlivePeriod = time.Second // a main's presence, as in a running stack
				o.Profile = ProfileReference
			})
			o := p.other
			r := o.newRemote(p.mainAddr, 0, 0)
			o.addRemote(r)
			nacks := 0
			p.cut = func(w wired) bool {
				tk, pk := kindOf(w.b)
				if tk != codec.TransactionKindJoin {
					return false
				}
				if w.from == o && pk == codec.PacketKindAck {
					return true // the joiner's final ack: lost
				}
				if w.from == p.main && pk == codec.PacketKindResponse && r.joined {
					h := parseHead(t, w.b)
					nack := head(codec.TransactionKindJoin, codec.PacketKindNack, r.nuid, h.SourceID, 0, h.TransactionID, false)
					nacks++
					p.launch(flight{due: p.now, to: p.main, from: p.otherAddr, b: forge(t, codec.HeadKindRaet, nil, nack, nil)})
					return true
				}
				return false
			}
			o.startJoiner(r, false, false)
			p.pump()
			if !r.joined {
				t.Fatal("the joiner did not take the response")
			}
			p.advance(later)
			if nacks == 0 {
				t.Fatal("the main did not send its response again")
			}
			rm := p.main.byName[o.name]
			if rm == nil || !rm.added {
				t.Fatalf("the main forgot the joiner whose ack was lost (%d stale nacks)", nacks)
			}
			if rm.joined || rm.allowed {
				t.Fatal("the main holds the join complete without its ack or a hello")
			}
			if n := p.count(p.main, codec.TransactionKindJoin, codec.PacketKindRequest); n != 0 {
				t.Errorf("the main sent %d join requests to the joiner about to allow", n)
			}
			o.startAllower(r, false)
			p.pump()
			p.advance(10 * time.Millisecond)
			if !rm.joined || !rm.allowed || !r.allowed {
				t.Fatalf("after the hello: main joined %v allowed %v, joiner allowed %v", rm.joined, rm.allowed, r.allowed)
			}
			if !p.hasEvent(p.main, EventJoined) || !p.hasEvent(p.main, EventAllowed) {
				t.Errorf("main's events %v", p.kinds(p.main, 0))
			}
			p.stillWorks(t, 0)
		})
	}
}
