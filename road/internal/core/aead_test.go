package core

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/replay"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/packet"
)

// sendCaptured has other send body to main and returns its one datagram,
// taken from other's output before main could see it.
func (p *pair) sendCaptured(t *testing.T, body map[string]any) ([]byte, chan error) {
	t.Helper()
	b, err := p.other.marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	p.other.Send(p.otherRemote().name, b, p.other.cfg.BodyKind, MsgID{}, res, p.now, p.now)
	out := p.other.TakeOut(nil)
	if len(out) != 1 {
		t.Fatalf("%d datagrams for one small message", len(out))
	}
	dg := bytes.Clone(out[0].B)
	out[0].Release()
	return dg, res
}

// skipCounters has other's session coat seal n packets that never leave,
// as if they were lost: the next one that arrives moves main's window n on.
func skipCounters(t *testing.T, a *packet.AEADCoat, n int) {
	t.Helper()
	for range n {
		if _, err := a.Seal(nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// deliveredN counts main's deliveries whose "n" is n.
func (p *pair) deliveredN(n int) int {
	k := 0
	for _, m := range p.delivered[p.main] {
		if fmt.Sprint(m.Body["n"]) == fmt.Sprint(n) {
			k++
		}
	}
	return k
}

// A sealed message datagram captured on the wire is delivered once: fed
// again it is dropped as aead_replayed, and once the window has moved past
// it as aead_too_old. One held back beyond the window (reordered) is
// dropped as aead_too_old, and its message still arrives once, in the
// datagram its sender seals anew (found lost once the later message is
// answered, rack.go). On the fake clock.
func TestAEADReplayNeverDelivered(t *testing.T) {
	p := joinedPair(t, aeadProfile)
	a := p.otherRemote().aead()
	if a == nil || p.mainRemote().aead() == nil {
		t.Fatal("no AEAD coat negotiated")
	}
	drops := func(r dropReason) uint64 { return p.main.Counters().Drops[r.String()] }

	msg, res := p.sendCaptured(t, map[string]any{"n": 1})
	var pk packet.Packet
	if err := packet.Parse(msg, &pk); err != nil || !packet.IsAEAD(pk.Head.CoatKind) || len(pk.Foot) != 0 {
		t.Fatalf("captured %v %v, %d foot bytes, %v", pk.Head.CoatKind, pk.Head.FootKind, len(pk.Foot), err)
	}
	p.inject(p.main, msg, p.otherAddr)
	if err, ok := outcome(res); !ok || err != nil || p.deliveredN(1) != 1 {
		t.Fatalf("the message itself: %v %v, delivered %d", err, ok, p.deliveredN(1))
	}
	for i := range 3 {
		p.inject(p.main, msg, p.otherAddr)
		if got := drops(dropAEADReplayed); got != uint64(i+1) {
			t.Fatalf("replay %d: %d dropped as aead_replayed (%v)", i+1, got, p.main.Counters().Drops)
		}
	}

	// The window moves on: the capture is now too old, never seen again.
	skipCounters(t, a, replay.Window+10)
	if err := p.send(p.other, map[string]any{"n": 2}); err != nil {
		t.Fatal(err)
	}
	p.inject(p.main, msg, p.otherAddr)
	if drops(dropAEADTooOld) != 1 {
		t.Fatalf("after the window moved: %v", p.main.Counters().Drops)
	}

	// Reordered beyond the window: held back while later packets arrive.
	late, res3 := p.sendCaptured(t, map[string]any{"n": 3})
	skipCounters(t, a, replay.Window+10)
	if err := p.send(p.other, map[string]any{"n": 4}); err != nil {
		t.Fatal(err)
	}
	before := p.deliveredN(3)
	p.inject(p.main, late, p.otherAddr)
	if drops(dropAEADTooOld) != 2 || p.deliveredN(3) != before {
		t.Fatalf("the late datagram: delivered %d (%d before), drops %v", p.deliveredN(3), before, p.main.Counters().Drops)
	}
	p.advance(2 * time.Second) // other's redo timer seals it again
	if err, ok := outcome(res3); !ok || err != nil {
		t.Fatalf("the late message: %v %v", err, ok)
	}
	for n := 1; n <= 4; n++ {
		if got := p.deliveredN(n); got != 1 {
			t.Errorf("message %d delivered %d times", n, got)
		}
	}
	if got := len(p.delivered[p.main]); got != 4 {
		t.Errorf("%d deliveries, want 4", got)
	}
	p.stillWorks(t, len(p.delivered[p.main]))
}

// aeadWire checks that every datagram of the session (all but joins and
// allows) on the wire since start is sealed with the session's AEAD coat
// and has no foot, and returns each sender's counters, in order, with the
// heads they were sealed under.
func (p *pair) aeadWire(t *testing.T, start int) map[*Core][]sealedPacket {
	t.Helper()
	kind := p.mainRemote().aead().Kind()
	out := map[*Core][]sealedPacket{}
	for _, w := range p.wire[start:] {
		var pk packet.Packet
		if err := packet.Parse(w.b, &pk); err != nil {
			t.Fatal(err)
		}
		h := pk.Head
		if tk := h.TransactionKind; tk == codec.TransactionKindJoin || tk == codec.TransactionKindAllow {
			continue
		}
		if h.CoatKind != kind || h.FootKind != codec.FootKindNada || len(pk.Foot) != 0 || len(pk.Coat) < packet.AEADOverhead {
			t.Fatalf("%s sent %v/%v with ck %v fk %v, %d coat and %d foot bytes", w.from.local.name, h.TransactionKind,
				h.PacketKind, h.CoatKind, h.FootKind, len(pk.Coat), len(pk.Foot))
		}
		h.PacketLength, h.HeadLength = 0, 0 // the same packet when sent again
		h.SetAgain(false)
		out[w.from] = append(out[w.from], sealedPacket{binary.BigEndian.Uint64(pk.Coat), h})
	}
	return out
}

type sealedPacket struct {
	counter uint64
	head    codec.Head
}

// An AEAD session carries small and segmented messages both ways: every
// packet of it, messages, acks, resends and dones, is sealed, with no foot.
func TestAEADSessionMessages(t *testing.T) {
	p := joinedPair(t, aeadProfile)
	start := len(p.wire)
	segmented := 0
	for i, size := range []int{0, 10, 1300, 5000, 70_000} {
		for _, from := range []*Core{p.other, p.main} {
			to := p.main
			if from == p.main {
				to = p.other
			}
			body := strings.Repeat(string(rune('a'+i)), size)
			if err := p.send(from, map[string]any{"size": size, "d": body}); err != nil {
				t.Fatalf("%d bytes from %s: %v", size, from.local.name, err)
			}
			got := p.delivered[to]
			if m := got[len(got)-1]; m.Body["d"] != body {
				t.Fatalf("%d bytes from %s arrived as %d", size, from.local.name, len(fmt.Sprint(m.Body["d"])))
			}
		}
	}
	for _, sent := range p.aeadWire(t, start) {
		for _, s := range sent {
			if s.head.SegmentCount > 1 {
				segmented++
			}
		}
	}
	if segmented == 0 {
		t.Fatal("no segmented message went")
	}
	if n := len(p.delivered[p.main]) + len(p.delivered[p.other]); n != 10 {
		t.Fatalf("%d deliveries, want 10", n)
	}
}

// Over a lossy link every packet sent again is sealed again: no sender
// seals two packets under one counter, however often a packet goes
// (retransmissions, resends), and the messages arrive exactly once.
func TestAEADRetransmitsResealed(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { aeadProfile.set(m, o); o.BurstSize = 8 })
	p.join()
	start := len(p.wire)
	l := p.impair(t, netsim.Impairment{Loss: 0.3, Duplicate: 0.05, Reorder: 0.1, Delay: 200 * time.Microsecond, Seed: 7})
	const n = 60
	results := p.sendMany(p.other, n, 8, 5*time.Minute)
	for i := range n {
		if err, ok := results[i]; !ok || err != nil {
			t.Fatalf("send %d: %v %v", i, err, ok)
		}
	}
	p.advance(2 * time.Second)
	received := map[string]int{}
	for _, m := range p.delivered[p.main] {
		received[fmt.Sprint(m.Body["id"])]++
	}
	for i := range n {
		if received[fmt.Sprint(i)] != 1 {
			t.Errorf("message %d delivered %d times", i, received[fmt.Sprint(i)])
		}
	}
	again := 0
	for from, sent := range p.aeadWire(t, start) {
		counters := map[uint64]bool{}
		heads := map[codec.Head]int{}
		for _, s := range sent {
			if counters[s.counter] {
				t.Fatalf("%s sealed two packets under counter %d", from.local.name, s.counter)
			}
			counters[s.counter] = true
			if heads[s.head]++; heads[s.head] == 2 {
				again++
			}
		}
	}
	if c := p.other.Counters(); c.Retransmits == 0 || again == 0 || l.stats().Dropped == 0 {
		t.Fatalf("nothing was sent again: %d retransmits, %d heads sent twice, link %+v", c.Retransmits, again, l.stats())
	}
	if d := p.main.Counters().Drops; d["aead_open_failed"] != 0 {
		t.Fatalf("a packet of the session did not open: %v", d)
	}
}

// A new allow makes new short-term keys, so new AEAD coats whose counters
// start again at 0 under other keys: a datagram of the session before does
// not open in the new one, and the new session's messages flow.
func TestAEADReallowNewKeys(t *testing.T) {
	p := joinedPair(t, aeadProfile)
	old, oldShort := p.otherRemote().aead(), p.otherRemote().short.Public
	msg, res := p.sendCaptured(t, map[string]any{"n": 1})
	p.inject(p.main, msg, p.otherAddr)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("first session: %v %v", err, ok)
	}
	if err, ok := p.reallow(2 * time.Second); !ok || err != nil {
		t.Fatalf("reallow: %v %v", err, ok)
	}
	r := p.otherRemote()
	if r.aead() == nil || r.aead() == old || r.short.Public == oldShort || p.mainRemote().aead() == nil {
		t.Fatal("the new allow kept the session's coat or keys")
	}
	start := len(p.wire)
	if err := p.send(p.other, map[string]any{"n": 2}); err != nil {
		t.Fatal(err)
	}
	if first := p.aeadWire(t, start)[p.other]; len(first) == 0 || first[0].counter != 0 {
		t.Fatalf("the new session's first packet: %+v", first)
	}
	p.inject(p.main, msg, p.otherAddr)
	if d := p.main.Counters().Drops; d["aead_open_failed"] != 1 {
		t.Fatalf("the old session's datagram: %v", d)
	}
	if p.deliveredN(1) != 1 || p.deliveredN(2) != 1 {
		t.Fatalf("delivered %d and %d", p.deliveredN(1), p.deliveredN(2))
	}
}

// A session whose AEAD coat nears what it may seal is allowed again, for
// new keys, while it stays up: every message sent meanwhile arrives once,
// none fails, and the new coat starts afresh (no second rekey).
func TestAEADRekey(t *testing.T) {
	p := joinedPair(t, aeadProfile)
	old := p.otherRemote().aead()
	// Used (as if sent) beyond the threshold; a new coat has more than 500
	// units (blocks of AES-256-GCM, counters of ChaCha20-Poly1305) before
	// it, more than these 40 messages take.
	p.other.rekeyAt = old.Remaining() - 500
	skipCounters(t, old, 1000)
	start := len(p.wire)
	results := make([]chan error, 40)
	for i := range results {
		b, err := p.other.marshal(map[string]any{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		results[i] = make(chan error, 1)
		p.other.Send(p.otherRemote().name, b, p.other.cfg.BodyKind, MsgID{}, results[i], p.now, p.now)
		if i%4 == 3 {
			p.pump()
			p.advance(time.Millisecond)
		}
	}
	p.advance(2 * time.Second)
	for i, res := range results {
		if err, ok := outcome(res); !ok || err != nil {
			t.Fatalf("send %d: %v %v", i, err, ok)
		}
	}
	r := p.otherRemote()
	if r.aead() == old || r.aead() == nil || !r.allowed || !p.mainRemote().allowed {
		t.Fatal("no new AEAD coat")
	}
	if r.aead().Remaining() < p.other.rekeyAt {
		t.Fatal("the new coat is as used as the old one")
	}
	if n := p.count(p.other, codec.TransactionKindAllow, codec.PacketKindHello) - countBefore(p, start, codec.PacketKindHello); n != 1 {
		t.Fatalf("%d allows, want one", n)
	}
	for i := range 40 {
		if got := p.deliveredN(i); got != 1 {
			t.Errorf("message %d delivered %d times", i, got)
		}
	}
}

// countBefore counts other's allow packets of kind pk on the wire before
// index end.
func countBefore(p *pair, end int, pk codec.PacketKind) int {
	n := 0
	for _, w := range p.wire[:end] {
		var pp packet.Packet
		if w.from == p.other && packet.Parse(w.b, &pp) == nil && pp.Head.TransactionKind == codec.TransactionKindAllow && pp.Head.PacketKind == pk {
			n++
		}
	}
	return n
}

// AEAD kinds stripped from a join body in transit (the join is not signed)
// do not downgrade the session to the NaCl coat: the allow authenticates
// the advertisements and fails.
func TestAEADStrippedFailsTheAllow(t *testing.T) {
	p := joinedPair(t, aeadProfile)
	mr := p.mainRemote()
	stripped := *mr.peerCaps
	stripped.coats = []codec.CoatKind{codec.CoatKindNaCl}
	mr.peerCaps = &stripped // what main would have seen of other's caps
	p.reallow(time.Second)
	if p.main.stats.drops[dropCapsMismatch] == 0 || p.count(p.main, codec.TransactionKindAllow, codec.PacketKindReject) == 0 {
		t.Fatalf("the stripped advertisement was taken: drops %v", p.main.Counters().Drops)
	}
	for _, r := range []*remote{mr, p.otherRemote()} {
		if r.allowed && !packet.IsAEAD(r.coatKind()) {
			t.Fatalf("a session with the %v coat", r.coatKind())
		}
	}
}

// The reader goroutine opens an AEAD coat (FootChecker.Parse, with the
// table the owner published) in the datagram's buffer; the owner takes its
// result and does not open it again (a second open would be refused as a
// replay), so the message is delivered. With a table that predates the
// session the owner opens it itself.
func TestAEADOpenedByReader(t *testing.T) {
	for _, stale := range []bool{false, true} {
		p := joinedPair(t, aeadProfile)
		p.main.PublishKeys()
		table := p.main.KeyTable()
		if stale {
			table = new(KeyTable) // read before the allow
		}
		msg, res := p.sendCaptured(t, map[string]any{"n": 1})
		buf := make([]byte, len(msg), 2*len(msg))
		copy(buf, msg)
		var in Inbound
		NewFootChecker(new(atomic.Uint64)).Parse(&in, buf, p.otherAddr, table)
		if opened := in.aead.coat != nil && in.aead.err == nil; opened == stale {
			t.Fatalf("stale table %v: opened by the reader %v (%v)", stale, opened, in.aead.err)
		}
		if !stale && &in.aead.plain[0] != &buf[:len(buf)+1][len(buf)] {
			t.Fatal("the body was not opened in the room after the datagram")
		}
		p.main.Receive(&in, p.now)
		p.pump()
		if err, ok := outcome(res); !ok || err != nil || p.deliveredN(1) != 1 {
			t.Fatalf("stale table %v: %v %v, delivered %d, drops %v", stale, err, ok, p.deliveredN(1), p.main.Counters().Drops)
		}
	}
}

// An AEAD session's cipher states are held longer when its traffic comes
// back soon after they were dropped: each time within a hold of the drop,
// twice as long, up to aeadHoldMax, at both ends; later than a hold, half
// as long. A forged packet that comes soon after a drop lengthens nothing.
func TestAEADHoldAdapts(t *testing.T) {
	p := joinedPair(t, aeadProfile)
	holds := func() (time.Duration, time.Duration) {
		return p.mainRemote().prof.hold(), p.otherRemote().prof.hold()
	}
	watched := func() bool { return p.mainRemote().prof.aeadCheck != 0 && p.otherRemote().prof.aeadCheck != 0 }
	dropped := func() bool { return p.mainRemote().prof.aeadCheck == 0 && p.otherRemote().prof.aeadCheck == 0 }
	p.stillWorks(t, len(p.delivered[p.main]))
	p.advance(aeadIdle + 50*time.Millisecond)
	if !dropped() {
		t.Fatal("states kept past aeadIdle")
	}
	// A forgery soon after the drop: it starts the timer (the states were
	// built to try it) but lengthens no hold.
	var forged []byte
	for _, w := range p.wire {
		if w.from == p.other {
			forged = bytes.Clone(w.b)
		}
	}
	forged[len(forged)-1] ^= 1
	p.inject(p.main, forged, p.addrOf(p.other))
	if p.mainRemote().prof.aeadCheck == 0 {
		t.Fatal("the forgery did not start main's timer: the test measures nothing")
	}
	p.advance(aeadIdle + 50*time.Millisecond)
	p.advance(2 * aeadIdle)
	p.stillWorks(t, len(p.delivered[p.main]))
	if m, o := holds(); m != aeadIdle || o != aeadIdle {
		t.Fatalf("after a forgery: holds %v at main, %v at other, want %v", m, o, aeadIdle)
	}
	want := aeadIdle
	for round := range 5 {
		p.advance(want - 50*time.Millisecond)
		if !watched() {
			t.Fatalf("round %d: states dropped before the hold %v", round, want)
		}
		p.advance(100 * time.Millisecond)
		if !dropped() {
			t.Fatalf("round %d: states kept past the hold %v", round, want)
		}
		p.advance(want / 2) // back within a hold of the drop
		p.stillWorks(t, len(p.delivered[p.main]))
		want = min(2*want, aeadHoldMax)
		if m, o := holds(); m != want || o != want {
			t.Fatalf("round %d: holds %v at main, %v at other, want %v", round, m, o, want)
		}
	}
	if want != aeadHoldMax {
		t.Fatalf("the hold reached %v, not aeadHoldMax", want)
	}
	// Silent for longer than a hold after the drop: half as long.
	p.advance(want + 100*time.Millisecond)
	if !dropped() {
		t.Fatal("states kept past the longest hold")
	}
	p.advance(2 * want)
	p.stillWorks(t, len(p.delivered[p.main]))
	if m, o := holds(); m != want/2 || o != want/2 {
		t.Fatalf("after a long silence: holds %v at main, %v at other, want %v", m, o, want/2)
	}
}

// An AEAD session that carries nothing for aeadIdle drops its cipher
// states at both ends (its remote's timer, not a walk of all remotes), and
// its next messages build them again and go both ways; one whose presence
// exchanges an alive more often than that keeps them and runs no such
// timer.
func TestAEADIdleDropsCipherStates(t *testing.T) {
	watched := func(r *remote) bool { return r.prof.aeadCheck != 0 }
	p := joinedPair(t, aeadProfile)
	if !watched(p.mainRemote()) || !watched(p.otherRemote()) {
		t.Fatal("the session's coats are not watched after its allow")
	}
	p.stillWorks(t, len(p.delivered[p.main])) // the last packets a few ms ago
	p.advance(aeadIdle - 10*time.Millisecond)
	if !watched(p.mainRemote()) || !watched(p.otherRemote()) {
		t.Fatal("states dropped before an idle period")
	}
	p.advance(10 * time.Millisecond)
	if watched(p.mainRemote()) || watched(p.otherRemote()) {
		t.Fatal("states kept after an idle period")
	}
	if d := p.main.Deadline(); !d.IsZero() {
		t.Fatalf("main still has a timer at %v once its remote's states went", d)
	}
	p.stillWorks(t, len(p.delivered[p.main]))
	if !watched(p.mainRemote()) || !watched(p.otherRemote()) {
		t.Fatal("the coats are not watched again after their states were rebuilt")
	}

	p = newPair(t, keep.AutoAlways, func(m, o *estate) {
		aeadProfile.set(m, o)
		m.AlivePeriod, o.AlivePeriod = aeadIdle/2, aeadIdle/2
	})
	p.join()
	p.advance(aeadIdle)
	v := p.main.wake.visits
	p.advance(3 * aeadIdle)
	if !watched(p.mainRemote()) || !watched(p.otherRemote()) {
		t.Fatalf("a session with an alive every %v dropped its states", aeadIdle/2)
	}
	if p.main.wake.visits != v {
		t.Errorf("main ran %d remotes' timers while its driver's alives came", p.main.wake.visits-v)
	}

	// A period longer than aeadIdle: each alive exchange ends the states
	// at both ends (idleExchange), and no timer runs for them.
	p = newPair(t, keep.AutoAlways, func(m, o *estate) {
		aeadProfile.set(m, o)
		m.AlivePeriod, o.AlivePeriod = 2*aeadIdle, 2*aeadIdle
	})
	p.join()
	p.advance(3 * aeadIdle) // the allow's states went by their timer
	w, v := len(p.wire), p.main.wake.visits
	p.advance(10 * aeadIdle)
	if n := p.countSince(w, p.other, codec.TransactionKindAlive, codec.PacketKindRequest); n < 4 {
		t.Fatalf("%d alive exchanges in %v of a %v period", n, 10*aeadIdle, 2*aeadIdle)
	}
	if watched(p.mainRemote()) || watched(p.otherRemote()) {
		t.Error("states kept between alive exchanges of a period longer than aeadIdle")
	}
	if p.main.wake.visits != v {
		t.Errorf("main ran %d remotes' timers while its driver's alives came", p.main.wake.visits-v)
	}
	p.stillWorks(t, len(p.delivered[p.main]))
}
