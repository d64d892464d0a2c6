package core

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// sendAll has from start n messages in one moment ({"n": i, "data": size
// bytes}) to its peer, and returns their outcomes' channels.
func (p *pair) sendAll(from *Core, n, size int) []chan error {
	p.tb.Helper()
	r := p.otherRemote()
	if from == p.main {
		r = p.mainRemote()
	}
	res := make([]chan error, n)
	for i := range res {
		b, err := from.marshal(map[string]any{"n": i, "data": strings.Repeat("b", size)})
		if err != nil {
			p.tb.Fatal(err)
		}
		res[i] = make(chan error, 1)
		sendPooled(from, r.name, b, MsgID{}, res[i], p.now)
	}
	return res
}

// allDone fails the test unless every outcome is in and nil.
func allDone(tb testing.TB, res []chan error) {
	tb.Helper()
	for i, ch := range res {
		if err, ok := outcome(ch); !ok || err != nil {
			tb.Fatalf("message %d: %v (outcome %v)", i, err, ok)
		}
	}
}

// deliveredOnce fails the test unless c delivered the messages 0..n-1 of
// sendAll each exactly once since index from.
func (p *pair) deliveredOnce(c *Core, from, n int) {
	p.tb.Helper()
	got := map[string]int{}
	for _, m := range p.delivered[c][from:] {
		got[fmt.Sprint(m.Body["n"])]++
	}
	for i := range n {
		if k := got[fmt.Sprint(i)]; k != 1 {
			p.tb.Fatalf("message %d delivered %d times", i, k)
		}
	}
	if len(p.delivered[c])-from != n {
		p.tb.Fatalf("delivered %d messages, want %d", len(p.delivered[c])-from, n)
	}
}

// sent lists the datagrams from sent since wire index start, parsed.
func (p *pair) sent(start int, from *Core) []packet.Packet {
	var out []packet.Packet
	for _, w := range p.wire[start:] {
		var pp packet.Packet
		if w.from == from && packet.Parse(w.b, &pp) == nil {
			out = append(out, pp)
		}
	}
	return out
}

// kindsOf counts packets by packet kind.
func kindsOf(ps []packet.Packet) map[codec.PacketKind]int {
	out := map[codec.PacketKind]int{}
	for _, pp := range ps {
		out[pp.Head.PacketKind]++
	}
	return out
}

// clearCoat is the coat of a packet to `to` in the clear: as it is, or,
// with an AEAD coat, opened with a coat of its own made from to's keys for
// the sender (a tap: to's own coat and replay window are not touched).
func (p *pair) clearCoat(pp *packet.Packet, to *Core) []byte {
	p.tb.Helper()
	if !packet.IsAEAD(pp.Head.CoatKind) {
		return pp.Coat
	}
	r := p.mainRemote()
	if to == p.other {
		r = p.otherRemote()
	}
	tap, err := packet.NewAEADCoat(pp.Head.CoatKind, (*[32]byte)(&r.short.Private), (*[32]byte)(&r.peerShort))
	if err != nil {
		p.tb.Fatal(err)
	}
	plain, err := pp.OpenAEAD(nil, tap)
	if err != nil {
		p.tb.Fatal(err)
	}
	return plain
}

// bundleOf parses a bundle packet to `to` (its table and answers).
func (p *pair) bundleOf(pp *packet.Packet, to *Core) packet.Bundle {
	p.tb.Helper()
	var b packet.Bundle
	if err := packet.ParseBundle(p.clearCoat(pp, to), &b); err != nil {
		p.tb.Fatal(err)
	}
	return b
}

// entriesOf lists the transaction ids of a bundle packet's entries.
func (p *pair) entriesOf(pp *packet.Packet, to *Core) []uint32 {
	var out []uint32
	for _, e := range p.bundleOf(pp, to).Entries {
		out = append(out, e.TI)
	}
	return out
}

// fastProfiles are the fast profile's two coats: bundles work in both.
var fastProfiles = []testProfile{macProfile, aeadProfile}

// eachFastProfile runs test as a subtest for each of fastProfiles.
func eachFastProfile(t *testing.T, test func(*testing.T, testProfile)) {
	for _, tp := range fastProfiles {
		t.Run(tp.name, func(t *testing.T) { test(t, tp) })
	}
}

// Fifty small messages started at once go out in a few bundles, are each
// delivered once and answered in one answers datagram; without bundling
// (either end) they are fifty messages and fifty dones.
func TestBundleManyAtOnce(t *testing.T) {
	const n = 50
	for _, tc := range []struct {
		name         string
		main, other  bool // NoBundling
		bundled      bool
		wantFromMain map[codec.PacketKind]int
	}{
		{"bundling", false, false, true, map[codec.PacketKind]int{codec.PacketKindAnswers: 1}},
		{"off-at-sender", false, true, false, map[codec.PacketKind]int{codec.PacketKindDone: n}},
		{"off-at-receiver", true, false, false, map[codec.PacketKind]int{codec.PacketKindDone: n}},
	} {
		for _, tp := range fastProfiles {
			t.Run(tp.name+"/"+tc.name, func(t *testing.T) {
				p := newPair(t, keep.AutoAlways, func(m, o *estate) {
					tp.set(m, o)
					m.NoBundling, o.NoBundling = tc.main, tc.other
				})
				p.join()
				if got := p.otherRemote().prof.bdl; got != tc.bundled {
					t.Fatalf("negotiated bdl %v, want %v", got, tc.bundled)
				}
				start, delivered := len(p.wire), len(p.delivered[p.main])
				res := p.sendAll(p.other, n, 64)
				p.pump()
				allDone(t, res)
				p.deliveredOnce(p.main, delivered, n)
				fromOther := kindsOf(p.sent(start, p.other))
				if tc.bundled {
					if fromOther[codec.PacketKindMessage] != 0 || fromOther[codec.PacketKindBundle] == 0 || fromOther[codec.PacketKindBundle] > n/8 {
						t.Errorf("other sent %v for %d messages, want a few bundles", fromOther, n)
					}
				} else if fromOther[codec.PacketKindMessage] != n || fromOther[codec.PacketKindBundle] != 0 {
					t.Errorf("other sent %v, want %d messages", fromOther, n)
				}
				if fromMain := kindsOf(p.sent(start, p.main)); !mapsEqual(fromMain, tc.wantFromMain) {
					t.Errorf("main sent %v, want %v", fromMain, tc.wantFromMain)
				}
				t.Logf("%s: %d messages in %d datagrams, answered in %d", tc.name, n, len(p.sent(start, p.other)), len(p.sent(start, p.main)))
			})
		}
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// A lost bundle is sent again for its entries only: the messages of the
// bundles that arrived are done and never sent again. It goes again at
// once, no timer run: the dones of the bundles after it show it lost
// (rack.go's packet threshold).
func TestBundleLossResendsOnlyMissing(t *testing.T) {
	eachFastProfile(t, testBundleLoss)
}

func testBundleLoss(t *testing.T, tp testProfile) {
	p := newPair(t, keep.AutoAlways, tp.set)
	p.join()
	const n = 30
	start, delivered := len(p.wire), len(p.delivered[p.main])
	var lost []uint32
	bundles := 0
	p.cut = func(w wired) bool {
		var pp packet.Packet
		if w.from != p.other || packet.Parse(w.b, &pp) != nil || pp.Head.PacketKind != codec.PacketKindBundle {
			return false
		}
		if bundles++; bundles == 2 {
			lost = p.entriesOf(&pp, p.main)
			return true
		}
		return false
	}
	res := p.sendAll(p.other, n, 300)
	p.pump()
	if len(lost) == 0 || bundles < 4 {
		t.Fatalf("%d bundles, lost %v: want one lost of several, and sent again", bundles, lost)
	}
	allDone(t, res)
	p.deliveredOnce(p.main, delivered, n)
	seen := map[uint32]bool{}
	var again []uint32
	for _, pp := range p.sent(start, p.other) {
		if pp.Head.PacketKind != codec.PacketKindBundle {
			t.Fatalf("other sent a %v", pp.Head.PacketKind)
		}
		for _, ti := range p.entriesOf(&pp, p.main) {
			if seen[ti] {
				again = append(again, ti)
			}
			seen[ti] = true
		}
	}
	if !slices.Equal(again, lost) {
		t.Fatalf("sent again %v, want only the lost bundle's %v", again, lost)
	}
	if d := p.main.stats.drops[dropReplayed]; d != 0 {
		t.Errorf("main got %d repeats: something was sent again needlessly", d)
	}
	if got := len(p.sent(start, p.other)); got != bundles {
		t.Errorf("other sent %d datagrams, want its %d bundles", got, bundles)
	}
}

// When the answers are lost, every message is sent again (bundled again)
// and answered again from the replay window: none is delivered twice.
func TestBundleLostAnswers(t *testing.T) {
	eachFastProfile(t, testBundleLostAnswers)
}

func testBundleLostAnswers(t *testing.T, tp testProfile) {
	p := newPair(t, keep.AutoAlways, tp.set)
	p.join()
	const n = 20
	delivered := len(p.delivered[p.main])
	lostAnswers := 0
	p.cut = func(w wired) bool {
		var pp packet.Packet
		if w.from == p.main && packet.Parse(w.b, &pp) == nil && pp.Head.PacketKind == codec.PacketKindAnswers && lostAnswers == 0 {
			lostAnswers++
			return true
		}
		return false
	}
	res := p.sendAll(p.other, n, 64)
	p.pump()
	if lostAnswers != 1 {
		t.Fatal("no answers lost")
	}
	p.advance(2 * time.Second)
	allDone(t, res)
	p.deliveredOnce(p.main, delivered, n)
	if d := p.main.stats.drops[dropReplayed]; d != n {
		t.Errorf("main took %d repeats, want %d", d, n)
	}
}

// forgeBundle packs, with other's session keys, a bundle of entries to
// main, as other's core would.
func (p *pair) forgeBundle(entries ...packet.BundleEntry) []byte {
	p.tb.Helper()
	r := p.otherRemote()
	h := p.other.outHead(codec.TransactionKindMessage, codec.PacketKindBundle, r.nuid, r.fuid, r.sid, 0, false)
	h.BodyKind, h.CoatKind, h.FootKind = codec.BodyKindJSON, r.coatKind(), codec.FootKindNaCl
	pk := p.other.packerFor(r, &h)
	b := packet.Bundler{Packer: &pk, Coat: r.coat, AEAD: r.aead()}
	b.Reset(&h)
	for _, e := range entries {
		if err := b.Add(e); err != nil {
			p.tb.Fatal(err)
		}
	}
	out, err := b.Flush(nil)
	if err != nil {
		p.tb.Fatal(err)
	}
	return out
}

// entry is a bundle entry of other's transaction ti with body {"n": n}.
func (p *pair) entry(ti uint32, n int) packet.BundleEntry {
	p.tb.Helper()
	body, err := p.other.marshal(map[string]any{"n": n})
	if err != nil {
		p.tb.Fatal(err)
	}
	return packet.BundleEntry{TI: ti, BodyKind: codec.BodyKindJSON, Plain: packet.AppendMessageID(nil, MsgID{}, body)}
}

// A bundle is a set of lone messages to the replay window: replayed, it
// delivers nothing again; mixing an entry done before with a fresh one, it
// delivers only the fresh one; and a bundle that does not authenticate
// changes nothing.
func TestBundleReplayedAndMixed(t *testing.T) {
	eachFastProfile(t, testBundleReplayed)
}

func testBundleReplayed(t *testing.T, tp testProfile) {
	p := newPair(t, keep.AutoAlways, tp.set)
	p.join()
	aead := tp == aeadProfile
	if err := p.send(p.other, map[string]any{"n": 100}); err != nil {
		t.Fatal(err)
	}
	r := p.otherRemote()
	done := r.tid
	delivered := len(p.delivered[p.main])
	fresh := r.nextTid()
	mixed := p.forgeBundle(p.entry(done, 100), p.entry(fresh, 101))
	start := len(p.wire)
	p.inject(p.main, mixed, p.otherAddr)
	got := p.delivered[p.main][delivered:]
	if len(got) != 1 || fmt.Sprint(got[0].Body["n"]) != "101" {
		t.Fatalf("mixed bundle delivered %+v, want only the fresh entry", got)
	}
	if d := p.main.stats.drops[dropReplayed]; d != 1 {
		t.Errorf("replayed entries counted %d, want 1", d)
	}
	var answered []packet.AnswerRange
	for _, pp := range p.sent(start, p.main) {
		if pp.Head.PacketKind != codec.PacketKindAnswers {
			t.Fatalf("main answered with a %v", pp.Head.PacketKind)
		}
		rs, err := packet.ParseAnswers(nil, p.clearCoat(&pp, p.other))
		if err != nil {
			t.Fatal(err)
		}
		answered = append(answered, rs...)
	}
	if want := []packet.AnswerRange{{Kind: codec.PacketKindDone, First: done, Count: 2}}; !slices.Equal(answered, want) {
		t.Errorf("main answered %+v, want %+v (both done, in one range)", answered, want)
	}

	for range 3 {
		p.inject(p.main, mixed, p.otherAddr)
	}
	if n := len(p.delivered[p.main]) - delivered; n != 1 {
		t.Fatalf("the replayed bundle delivered %d more", n-1)
	}
	// The same datagram again: the AEAD coat's replay window refuses it
	// before its entries are read; without one, each entry meets the
	// session's window.
	if d, a := p.main.stats.drops[dropReplayed], p.main.stats.drops[dropAEADReplayed]; aead && (d != 1 || a != 3) || !aead && d != 1+3*2 {
		t.Errorf("replayed entries counted %d, replayed AEAD datagrams %d", d, a)
	}

	before := snapshot(p.mainRemote())
	forged := p.forgeBundle(p.entry(r.nextTid(), 102))
	for i := range forged {
		bad := bytes.Clone(forged)
		bad[i] ^= 0x20
		p.inject(p.main, bad, p.otherAddr)
	}
	if n := len(p.delivered[p.main]) - delivered; n != 1 {
		t.Fatalf("altered bundles delivered %d messages", n-1)
	}
	if after := snapshot(p.mainRemote()); after != before {
		t.Fatalf("an altered bundle changed the session:\n before %+v\n after  %+v", before, after)
	}
	p.inject(p.main, forged, p.otherAddr) // the original still goes
	if n := len(p.delivered[p.main]) - delivered; n != 2 {
		t.Fatalf("the authentic bundle after the altered ones: %d delivered, want 2", n)
	}
}

// crossSend has other send n messages at once, main receive them and, in
// the same moment, send m of its own at once (before pumping): main's
// bundle can carry its dones.
func (p *pair) crossSend(n, m int) (fromOther, fromMain []chan error) {
	fromOther = p.sendAll(p.other, n, 64)
	out := p.other.TakeOut(nil)
	for i := range out {
		p.wire = append(p.wire, wired{from: p.other, b: bytes.Clone(out[i].B)})
		p.feed(p.main, bytes.Clone(out[i].B), p.otherAddr)
		out[i].Release()
	}
	return fromOther, p.sendAll(p.main, m, 64)
}

// Dones owed to a remote ride in a bundle going to it in the same moment:
// no answers packet of their own.
func TestBundleAnswersPiggybacked(t *testing.T) {
	eachFastProfile(t, testBundlePiggyback)
}

func testBundlePiggyback(t *testing.T, tp testProfile) {
	p := newPair(t, keep.AutoAlways, tp.set)
	p.join()
	start, mainGot, otherGot := len(p.wire), len(p.delivered[p.main]), len(p.delivered[p.other])
	res, back := p.crossSend(5, 3)
	p.pump()
	allDone(t, res)
	allDone(t, back)
	p.deliveredOnce(p.main, mainGot, 5)
	p.deliveredOnce(p.other, otherGot, 3)
	fromMain := p.sent(start, p.main)
	if k := kindsOf(fromMain); !mapsEqual(k, map[codec.PacketKind]int{codec.PacketKindBundle: 1}) {
		t.Fatalf("main sent %v, want one bundle", k)
	}
	b := p.bundleOf(&fromMain[0], p.other)
	rs, err := packet.ParseAnswers(nil, b.Answers)
	if err != nil || len(rs) != 1 || rs[0].Count != 5 || rs[0].Kind != codec.PacketKindDone {
		t.Fatalf("the bundle's answers %+v (%v), want the 5 dones", rs, err)
	}
	if k := kindsOf(p.sent(start, p.other)); !mapsEqual(k, map[codec.PacketKind]int{codec.PacketKindBundle: 1, codec.PacketKindAnswers: 1}) {
		t.Errorf("other sent %v, want its bundle and the answers to main's", k)
	}
}

// Small messages started with a large one are bundled around it; the
// large one is segmented as ever; all arrive once, and every done goes in
// the answers.
func TestBundleWithSegmented(t *testing.T) {
	eachFastProfile(t, testBundleWithSegmented)
}

func testBundleWithSegmented(t *testing.T, tp testProfile) {
	p := newPair(t, keep.AutoAlways, tp.set)
	p.join()
	start, delivered := len(p.wire), len(p.delivered[p.main])
	res := p.sendAll(p.other, 4, 64)
	big := p.sendAll(p.other, 1, 20_000) // "n": 0 again
	res = append(res, p.sendAll(p.other, 4, 64)...)
	p.pump()
	p.advance(time.Second)
	allDone(t, res)
	allDone(t, big)
	if got := len(p.delivered[p.main]) - delivered; got != 9 {
		t.Fatalf("delivered %d messages, want 9", got)
	}
	entries, segments := 0, 0
	for _, pp := range p.sent(start, p.other) {
		switch pp.Head.PacketKind {
		case codec.PacketKindBundle:
			entries += len(p.entriesOf(&pp, p.main))
		case codec.PacketKindMessage:
			if !pp.Head.Segment() {
				t.Errorf("a lone message packet that is not a segment: %+v", pp.Head)
			}
			segments++
		default:
			t.Errorf("other sent a %v", pp.Head.PacketKind)
		}
	}
	if entries != 8 || segments < 15 {
		t.Errorf("%d bundled entries and %d segments, want 8 and the large message's", entries, segments)
	}
	if k := kindsOf(p.sent(start, p.main)); k[codec.PacketKindDone] != 0 || k[codec.PacketKindAnswers] == 0 {
		t.Errorf("main sent %v, want answers and no done", k)
	}
	// Measured, not copied: the bundles' scratch holds what a bundle
	// carries, never the large message.
	if n := cap(p.other.tx.scratch); n >= 20_000 {
		t.Errorf("the sender's scratch grew to %d bytes for a message it segmented", n)
	}
}

// Sending bundles (retransmissions here) and owed answers, and reading
// answers (stale ones here: each id looked up and counted), allocate
// nothing per packet once warm. Under -race, where sync.Pool drops what it
// is given at random, the pools (buffers, MAC and coat states) may miss, a
// few times a packet: still fewer than one allocation for two messages.
func TestBundleFlushAllocs(t *testing.T) {
	eachFastProfile(t, testBundleFlushAllocs)
}

func testBundleFlushAllocs(t *testing.T, tp testProfile) {
	p := newPair(t, keep.AutoAlways, tp.set)
	p.join()
	p.cut = func(w wired) bool { return true }
	p.sendAll(p.other, 40, 64)
	p.pump()
	r := p.otherRemote()
	var ms []*messenger
	for t := range r.eachTxn {
		if m, ok := t.(*messenger); ok {
			ms = append(ms, m)
		}
	}
	if len(ms) != 40 {
		t.Fatalf("%d messages under way", len(ms))
	}
	var spare []Datagram
	packets := 0
	// take sends c's datagrams to `to` (nil: nowhere), as a stack does.
	checker := NewFootChecker(new(atomic.Uint64))
	var in Inbound
	take := func(c, to *Core) {
		out := c.TakeOut(spare)
		if len(out) == 0 {
			t.Fatal("nothing sent")
		}
		packets = len(out)
		for i := range out {
			if to != nil {
				checker.Parse(&in, out[i].B, p.addrOf(c), to.KeyTable())
				to.Receive(&in, p.now)
			}
			out[i].Release()
		}
		spare = out[:0]
	}
	resend := func() {
		for _, m := range ms {
			m.retry = true
			p.other.queue(m)
		}
		take(p.other, nil)
	}
	mr := p.mainRemote()
	answers := func(to *Core) func() {
		return func() {
			for i := range uint32(40) {
				p.main.answer(mr, mr.rsid, 1000+2*i) // every other id: 40 ranges
			}
			take(p.main, to)
		}
	}
	resend()
	answers(p.other)()
	before := p.other.stats.drops[dropStaleAnswer]
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"bundling 40 messages again", resend},
		{"sending 40 answers", answers(nil)},
		{"sending and reading 40 stale answers", answers(p.other)},
	} {
		n := testing.AllocsPerRun(50, tc.f)
		if n != 0 && !raceEnabled || n >= 20 {
			t.Errorf("%s: %v allocations for %d packets", tc.name, n, packets)
		}
	}
	if got := p.other.stats.drops[dropStaleAnswer] - before; got != 51*40 {
		t.Errorf("stale answers counted %d, want %d", got, 51*40)
	}
}

// Messages and dones queued for a bundle go alone when, before the flush,
// the session stops bundling (as a new allow without bdl would make it).
func TestBundleSessionStopsBundling(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	start, delivered := len(p.wire), len(p.delivered[p.main])
	res, back := p.crossSend(3, 2)
	for _, r := range []*remote{p.mainRemote(), p.otherRemote()} {
		prof := *r.prof
		prof.bdl = false
		r.prof = &prof
	}
	p.pump()
	allDone(t, res)
	allDone(t, back)
	p.deliveredOnce(p.main, delivered, 3)
	if k := kindsOf(p.sent(start, p.main)); !mapsEqual(k, map[codec.PacketKind]int{codec.PacketKindMessage: 2, codec.PacketKindDone: 3}) {
		t.Errorf("main sent %v, want its 2 messages and 3 dones alone", k)
	}
}

// A message queued for the bundles of this moment has no timer due until
// the flush sends it: when its timer has queued it again and the clock
// reaches the next retry before a TakeOut flushed it (a caller that ticks
// and takes out in turn finds it so), nothing is due, where its timer
// stayed due after each Tick and the owner would spin; the flush then
// sends it, and its timer runs again.
func TestBundleQueuedTimerNotDue(t *testing.T) {
	eachFastProfile(t, func(t *testing.T, tp testProfile) {
		p := newPair(t, keep.AutoAlways, tp.set)
		p.join()
		p.cut = func(w wired) bool { return w.from == p.main } // the answers are lost
		b, _ := p.other.marshal(map[string]any{"n": 1})
		res := make(chan error, 1)
		c := p.other
		c.Send("main", b, codec.BodyKindJSON, MsgID{}, res, p.now, p.now)
		p.pump()
		var m *messenger
		for tx := range p.otherRemote().eachTxn {
			m, _ = tx.(*messenger)
		}
		if m == nil || !m.bundled {
			t.Fatal("no bundled messenger")
		}
		p.now = c.Deadline()
		c.Tick(p.now) // its timer: into the bundles again
		if !m.queued {
			t.Fatal("the timer did not queue it again")
		}
		p.now = m.redo.at // the next retry, before any flush
		c.Tick(p.now)
		if d := c.Deadline(); !d.IsZero() && !d.After(p.now) {
			t.Fatalf("a timer stays due (%v) while the message waits for the flush: %s", d, dueTimers(c))
		}
		retransmits := c.Counters().Retransmits
		p.pump() // the flush
		if got := c.Counters().Retransmits - retransmits; got != 1 {
			t.Fatalf("the flush sent %d again, want the one bundle", got)
		}
		if d := c.Deadline(); d.IsZero() || !d.After(p.now) || !d.Equal(m.redo.at) {
			t.Fatalf("after the flush: deadline %v at %v, want the message's timer %v", d, p.now, m.redo.at)
		}
		p.cut = nil
		p.advance(5 * time.Second)
		if err, ok := outcome(res); !ok || err != nil {
			t.Fatalf("send: %v (%v)", err, ok)
		}
	})
}

// Messages that a burst of dones ends leave their remotes no transaction
// table and the core the empty tables as its spares, which the next
// messages take: a window of 16 to one remote makes its table once, and a
// main's fan-out of one message to each of 12 remotes, answered in one
// pump, makes none after its first round.
func TestSpareTxnTables(t *testing.T) {
	eachFastProfile(t, func(t *testing.T, tp testProfile) {
		const remotes = 12
		p := newFleet(t, remotes, tp.set)
		tables := func(c *Core) map[unsafe.Pointer]bool {
			out := map[unsafe.Pointer]bool{}
			for _, r := range c.roster.remotes {
				if r.ours != nil {
					out[reflect.ValueOf(r.ours).UnsafePointer()] = true
				}
			}
			return out
		}
		spares := func(c *Core) map[unsafe.Pointer]bool {
			out := map[unsafe.Pointer]bool{}
			for m := range c.spares.txns.All {
				if len(m) != 0 {
					t.Fatalf("a spare table holds %d transactions", len(m))
				}
				out[reflect.ValueOf(m).UnsafePointer()] = true
			}
			return out
		}
		rounds := []struct {
			name string
			from *Core
			send func() []chan error
			want int // tables under way
		}{
			{"16 to one remote", p.other, func() []chan error { return p.sendAll(p.other, 16, 64) }, 1},
			{"one to each of 12", p.main, func() []chan error {
				var res []chan error
				for r := range p.main.roster.byName {
					ch := make(chan error, 1)
					b, _ := p.main.marshal(map[string]any{"to": r})
					sendPooled(p.main, r, b, MsgID{}, ch, p.now)
					res = append(res, ch)
				}
				return res
			}, remotes},
		}
		for _, rd := range rounds {
			var before map[unsafe.Pointer]bool
			for round := range 3 {
				res := rd.send()
				got := tables(rd.from)
				if len(got) != rd.want {
					t.Fatalf("%s, round %d: %d tables under way, want %d", rd.name, round, len(got), rd.want)
				}
				for tb := range got {
					if round > 0 && !before[tb] {
						t.Fatalf("%s, round %d: a new table, not a spare", rd.name, round)
					}
				}
				p.pump()
				allDone(t, res)
				if n := len(tables(rd.from)); n != 0 {
					t.Fatalf("%s, round %d: every message done, and %d remotes hold a table", rd.name, round, n)
				}
				before = spares(rd.from)
				for tb := range got {
					if !before[tb] {
						t.Fatalf("%s, round %d: a table of the round not kept as a spare", rd.name, round)
					}
				}
			}
		}
	})
}

// A bundled message costs the sender's core one allocation (its
// messenger) and the receiver's nearly none (the bundle's new entries
// share one for their Message.Raw): the sender measures no head to know
// it fits, and an entry delivered at once has no messengent, Message or
// txns entry of its own (raw bodies, 20 a bundle, their answers carried
// back a bundle later, so that a bundle is under way throughout, as in a
// stream; amortized).
func TestBundledMessageAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates") // make allocs runs it
	}
	eachFastProfile(t, func(t *testing.T, tp testProfile) {
		p := joinedPair(t, tp)
		r := p.otherRemote()
		checker := NewFootChecker(new(atomic.Uint64))
		var in Inbound
		var spare []Datagram
		carry := func(from, to *Core) {
			out := from.TakeOut(spare)
			for i := range out {
				checker.Parse(&in, out[i].B, p.addrOf(from), to.KeyTable())
				to.Receive(&in, p.now)
				out[i].Release()
			}
			spare = out[:0]
		}
		body := []byte("sixty-four bytes of payload, as bench/peers sends one-way......")
		const k = 20
		send := func() {
			for range k {
				p.other.Send(r.name, body, codec.BodyKindRaw, MsgID{}, nil, p.now, p.now)
			}
		}
		// The answers of each bundle go back once the next is sent: the
		// window and the table of transactions stay.
		cycle := func() {
			send()
			carry(p.main, p.other) // the answers of the bundle before
			carry(p.other, p.main)
			p.main.Delivered(len(p.main.Deliveries()))
		}
		send()
		carry(p.other, p.main)
		p.main.Delivered(len(p.main.Deliveries()))
		cycle()
		in0 := p.main.stats.c.MessagesIn
		n := testing.AllocsPerRun(100, cycle)
		if got := p.main.stats.c.MessagesIn - in0; got != 101*k {
			t.Fatalf("%d delivered, want %d", got, 101*k)
		}
		if r.numTxns() != k {
			t.Fatalf("%d transactions under way, want a bundle's %d", r.numTxns(), k)
		}
		if got := p.other.Counters().Retransmits; got != 0 {
			t.Fatalf("%d retransmits", got)
		}
		t.Logf("%.1f allocations for %d messages", n, k)
		if n > k+2 {
			t.Errorf("%.1f allocations for %d messages, want at most %d", n, k, k+2)
		}
	})
}

// The messages of one bundle share the memory of their Raw bodies, each
// capped to its own: appending to one reaches no other.
func TestBundledRawOwn(t *testing.T) {
	eachFastProfile(t, func(t *testing.T, tp testProfile) {
		p := joinedPair(t, tp)
		r := p.otherRemote()
		for _, b := range []string{"first", "second", "third"} {
			p.other.Send(r.name, []byte(b), codec.BodyKindRaw, MsgID{}, nil, p.now, p.now)
		}
		start := len(p.wire)
		p.pump()
		if got := kindsOf(p.sent(start, p.other))[codec.PacketKindBundle]; got != 1 {
			t.Fatalf("%d bundles sent, want 1", got)
		}
		got := p.delivered[p.main]
		if len(got) != 3 {
			t.Fatalf("%d delivered, want 3", len(got))
		}
		_ = append(got[0].Raw, "XXXXXXXXXX"...)
		got[1].Raw[0] = 'S'
		if string(got[0].Raw) != "first" || string(got[1].Raw) != "Second" || string(got[2].Raw) != "third" {
			t.Fatalf("bodies %q %q %q", got[0].Raw, got[1].Raw, got[2].Raw)
		}
	})
}
