package core

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
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
			rm := p.main.roster.byName[o.local.name]
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

// A reference receiver that finished a message and lost its done answers
// the message sent again with a stale nack (Stalent: the packet's ids
// swapped, its ck and fk, no wf): its sender reports the message done,
// never failed, and it is delivered once; one or many segments, either
// end the sender. A refusal (the reference's messengent nack: wf copied
// from the packet that started it, here the only one) still fails.
func TestRefReceiverNacksFinished(t *testing.T) {
	for _, size := range []int{16, 20_000} {
		for _, fromMain := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dB/fromMain=%v", size, fromMain), func(t *testing.T) {
				p := newPair(t, keep.AutoAlways, refProfile.set)
				p.join()
				sender, receiver := p.other, p.main
				if fromMain {
					sender, receiver = p.main, p.other
				}
				dones, nacks := 0, 0
				p.cut = func(w wired) bool {
					tk, pk := kindOf(w.b)
					if w.from != receiver || tk != codec.TransactionKindMessage || pk != codec.PacketKindDone {
						return false
					}
					dones++
					if dones == 1 {
						return true // lost
					}
					// The repeat is answered done by raet-go, nack by the
					// reference.
					h := parseHead(t, w.b)
					h.PacketKind = codec.PacketKindNack
					h.SetWait(false)
					nacks++
					p.launch(flight{due: p.now, to: sender, from: p.addrOf(receiver), b: p.sealed(receiver, h, nil)})
					return true
				}
				before := len(p.delivered[receiver])
				res := p.start(sender, map[string]any{"pad": strings.Repeat("x", size)}, MsgID{})
				p.pump()
				p.advance(5 * time.Second)
				err, ok := outcome(res)
				if !ok || err != nil {
					t.Fatalf("outcome %v (%v) after %d dones lost or nacked, %d nacks", err, ok, dones, nacks)
				}
				if nacks == 0 {
					t.Fatal("the repeat was never nacked: nothing tested")
				}
				if n := len(p.delivered[receiver]) - before; n != 1 {
					t.Fatalf("delivered %d times", n)
				}
				if f := sender.stats.c.MessageFails; f != 0 {
					t.Fatalf("%d message failures counted", f)
				}
				p.cut = nil
				p.advance(5 * time.Second)
				if n := len(p.delivered[receiver]) - before; n != 1 {
					t.Fatalf("delivered %d times in the end", n)
				}
			})
		}
	}

	// A refusal: the receiver's messengent nacks the message it cannot
	// take, wf as on the message's one packet; and a nack without wf of a
	// message not sent again (nothing the receiver could have finished).
	for _, wf := range []bool{true, false} {
		t.Run(fmt.Sprint("refused/wf=", wf), func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, refProfile.set)
			p.join()
			p.cut = func(w wired) bool {
				tk, pk := kindOf(w.b)
				if w.from != p.main || tk != codec.TransactionKindMessage || pk != codec.PacketKindDone {
					return false
				}
				h := parseHead(t, w.b)
				h.PacketKind = codec.PacketKindNack
				h.SetWait(wf)
				p.launch(flight{due: p.now, to: p.other, from: p.mainAddr, b: p.sealed(p.main, h, nil)})
				return true
			}
			if err := p.send(p.other, map[string]any{"refused": true}); !errors.Is(err, ErrRejected) {
				t.Fatalf("a refused message: %v; want ErrRejected", err)
			}
		})
	}
}

// A joiner pended by a main that ends the pended join, as the reference's
// joinent does at its 5 s timeout (a nack), or refuses it, waits on and asks
// again with a new join; it completes (joined, allowed) once the operator
// accepts, 5 s after its first request; a raet-go main pends it until its
// PendTimeout, here 5 s as the reference's.
func TestJoinPendedByRefMain(t *testing.T) {
	for _, how := range []string{"timeout-nack", "refuse"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			p := newPair(t, keep.AutoNever, func(m, o *estate) {
				m.KeepDir = dir
				m.PendTimeout, m.JoinentTimeout = 5*time.Second, 5*time.Second
				m.Profile, o.Profile = ProfileReference, ProfileReference
			})
			res := make(chan error, 1)
			p.other.Join(p.mainAddr, res, p.now)
			p.pump()
			if how == "refuse" {
				p.advance(2 * time.Second)
				var req codec.Head
				for _, w := range p.wire {
					if tk, pk := kindOf(w.b); w.from == p.other && tk == codec.TransactionKindJoin && pk == codec.PacketKindRequest {
						req = parseHead(t, w.b)
					}
				}
				refuse := head(codec.TransactionKindJoin, codec.PacketKindRefuse, req.DestinationID, req.SourceID, 0, req.TransactionID, true)
				p.inject(p.other, forge(t, codec.HeadKindRaet, nil, refuse, nil), p.mainAddr)
				if err, ok := outcome(res); ok {
					t.Fatalf("the pended join ended at a refuse: %v", err)
				}
			}
			p.advance(5*time.Second - p.now.Sub(time.Unix(1_700_000_000, 0)) + 50*time.Millisecond)
			if how == "timeout-nack" && p.count(p.main, codec.TransactionKindJoin, codec.PacketKindNack) == 0 {
				t.Fatal("the main's pended joinent did not time out with a nack")
			}
			if err, ok := outcome(res); ok {
				t.Fatalf("the pended join ended: %v", err)
			}
			k, err := keep.Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.Accept("other"); err != nil {
				t.Fatal(err)
			}
			p.advance(3 * time.Second)
			if err, ok := outcome(res); !ok || err != nil {
				t.Fatalf("join after the accept: %v (%v)", err, ok)
			}
			if !p.mainRemote().allowed || !p.otherRemote().allowed {
				t.Fatal("not allowed after the accept")
			}
			p.stillWorks(t, 0)
		})
	}
}

// The allower's initiate carries in its fqdn field the name the reference
// allowent expects (its host's: Config.FQDN of its address), whether the
// allower advertises (the fast profile, its digest then in the hello) or
// not; so the reference logs no "Mismatch of local fqdn". Toward a raet-go
// allowent that advertised, the field holds the digest, as an earlier
// release reads it. The fast profile's negotiation still holds both ways.
func TestAllowFQDN(t *testing.T) {
	const host = "main.example.org"
	for _, tc := range []struct {
		name       string
		allower    Profile
		allowent   Profile
		wantDigest bool
	}{
		{"fast-to-reference", ProfileAuto, ProfileReference, false},
		{"reference-to-reference", ProfileReference, ProfileReference, false},
		{"fast-to-fast", ProfileAuto, ProfileAuto, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) {
				m.Profile, o.Profile = tc.allowent, tc.allower
				o.FQDN = func(a netip.Addr) string {
					if a == pairMain.Addr() {
						return host
					}
					return ""
				}
			})
			var got []string
			p.cut = func(w wired) bool {
				if tk, pk := kindOf(w.b); w.from != p.other || tk != codec.TransactionKindAllow || pk != codec.PacketKindInitiate {
					return false
				}
				for t := range p.mainRemote().eachTxn {
					if a, ok := t.(*allowent); ok {
						var pp packet.Packet
						if err := packet.Parse(w.b, &pp); err != nil {
							p.tb.Fatal(err)
						}
						init, _, err := handshake.OpenInitiate(pp.Coat, a.short.Private, p.main.local.box.Private,
							handshake.InitiateWant{IShortPub: a.peerShort, Oreo: a.oreo, ILongPub: p.mainRemote().pub, FQDN: host})
						if err != nil {
							p.tb.Fatal(err)
						}
						got = append(got, init.FQDN)
						if init.FQDNMatch == tc.wantDigest {
							p.tb.Errorf("fqdn %q, match %v", init.FQDN, init.FQDNMatch)
						}
					}
				}
				return false
			}
			p.join()
			if len(got) == 0 {
				t.Fatal("no initiate seen")
			}
			if tc.wantDigest != strings.HasPrefix(got[0], capsPrefix) {
				t.Fatalf("fqdn field %q", got[0])
			}
			if fast := tc.allower == ProfileAuto && tc.allowent == ProfileAuto; fast != (p.mainRemote().prof != nil) {
				t.Fatalf("negotiated profile %v with both %v/%v", p.mainRemote().prof != nil, tc.allower, tc.allowent)
			}
			p.stillWorks(t, 0)
		})
	}
}

// Both advertisements stripped from the join bodies in transit: each end
// takes the other for the reference, but the hello's digest (the
// allower's caps and none) differs from the allowent's (none and its
// caps), so the allow is rejected, as when one was changed.
func TestAllowCapsStrippedBoth(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	mr, or := p.mainRemote(), p.otherRemote()
	mr.peerCaps, or.peerCaps = nil, nil
	drops := p.main.stats.drops[dropCapsMismatch]
	err, ok := p.reallow(time.Second)
	if !ok || !errors.Is(err, ErrRejected) || p.main.stats.drops[dropCapsMismatch] != drops+1 {
		t.Fatalf("allow with both advertisements stripped: %v (%v), caps_mismatch %d", err, ok, p.main.stats.drops[dropCapsMismatch])
	}
}

// A reference receiver acks the highest segment it has on its redo timer
// (§8.5) whenever nothing below is missing; acks that cross make the
// sender go back and send the tail again, the second time after the
// receiver finished (its done lost), which it nacks as stale: done too.
func TestRefReceiverNacksTailSentAgain(t *testing.T) {
	p := newPair(t, keep.AutoAlways, refProfile.set)
	p.join()
	cutTail, dones, nacks := true, 0, 0
	p.cut = func(w wired) bool {
		tk, pk := kindOf(w.b)
		if tk != codec.TransactionKindMessage {
			return false
		}
		h := parseHead(t, w.b)
		switch {
		case w.from == p.main && pk == codec.PacketKindMessage && cutTail && h.SegmentNumber >= h.SegmentCount-2:
			if h.SegmentNumber == h.SegmentCount-1 {
				// The tail of the first burst is lost; the receiver's redo
				// acks what it has, twice (its acks cross the tail).
				cutTail = false
				ack := head(codec.TransactionKindMessage, codec.PacketKindAck, h.DestinationID, h.SourceID, h.SessionID, h.TransactionID, true)
				ack.SegmentNumber = h.SegmentCount - 3
				ack.CoatKind, ack.FootKind = h.CoatKind, h.FootKind
				b := p.sealed(p.other, ack, nil)
				for i := range 2 {
					p.launch(flight{due: p.now.Add(time.Duration(i+1) * time.Millisecond), to: p.main, from: p.otherAddr, b: b})
				}
			}
			return true
		case w.from == p.other && pk == codec.PacketKindDone:
			dones++
			if dones == 1 {
				return true // lost
			}
			h.PacketKind = codec.PacketKindNack
			h.SetWait(false)
			nacks++
			p.launch(flight{due: p.now, to: p.main, from: p.otherAddr, b: p.sealed(p.other, h, nil)})
			return true
		}
		return false
	}
	res := p.start(p.main, map[string]any{"pad": strings.Repeat("y", 20_000)}, MsgID{})
	p.pump()
	p.advance(5 * time.Second)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("outcome %v (%v): %d dones, %d nacks", err, ok, dones, nacks)
	}
	if nacks == 0 {
		t.Fatal("nothing was nacked: nothing tested")
	}
	if n := len(p.delivered[p.other]); n != 1 {
		t.Fatalf("delivered %d times", n)
	}
}

// A main mends the session of a remote that has none with an allow of its
// own (presence), but not across the remote's own: a joiner starved of
// CPU, slow to allow after its join (2.5 s here, each packet 300 ms late
// and 5% lost), gets the time of its allow, and the main starts none; an
// allow of the main that fails makes the next wait twice as long, so a
// remote that never completes one sees a few, not one every period.
func TestMainMendsWithoutCrossing(t *testing.T) {
	t.Run("slow joiner", func(t *testing.T) {
		p := newPair(t, keep.AutoAlways, func(m, o *estate) {
			m.AlivePeriod = time.Second
			o.Profile = ProfileReference
		})
		p.impair(t, netsim.Impairment{Loss: 0.05, Delay: 300 * time.Millisecond, Jitter: 50 * time.Millisecond, Seed: 31})
		o := p.other
		r := o.newRemote(p.mainAddr, 0, 0)
		o.addRemote(r)
		o.startJoiner(r, false, false)
		p.advance(2500 * time.Millisecond)
		if !r.joined {
			t.Fatal("not joined")
		}
		for range 3 { // as its application asks, until allowed
			if r.allowed {
				break
			}
			if len(r.inProcess(codec.TransactionKindAllow)) == 0 {
				o.startAllower(r, false)
			}
			p.advance(5 * time.Second)
		}
		if rm := p.mainRemote(); rm == nil || !rm.allowed || !r.allowed {
			t.Fatal("not allowed on both sides")
		}
		if n := p.count(p.main, codec.TransactionKindAllow, codec.PacketKindHello); n != 0 {
			t.Errorf("the main sent %d hellos to a joiner about to allow", n)
		}
	})
	t.Run("failing allows", func(t *testing.T) {
		p := newPair(t, keep.AutoAlways, func(m, o *estate) {
			m.AlivePeriod = time.Second
			o.Profile = ProfileReference
		})
		p.cut = func(w wired) bool {
			tk, _ := kindOf(w.b)
			return w.from == p.other && tk == codec.TransactionKindAllow
		}
		o := p.other
		r := o.newRemote(p.mainAddr, 0, 0)
		o.addRemote(r)
		o.startJoiner(r, false, false)
		p.advance(90 * time.Second)
		tis := map[uint32]bool{}
		for _, w := range p.wire {
			if tk, pk := kindOf(w.b); w.from == p.main && tk == codec.TransactionKindAllow && pk == codec.PacketKindHello {
				tis[parseHead(t, w.b).TransactionID] = true
			}
		}
		// At 1 s periods with AllowTimeout 4 s, one every ~5 s would be 16.
		if n := len(tis); n == 0 || n > 7 {
			t.Errorf("the main started %d allows in 90 s with a remote that never answers one", n)
		}
	})
}
