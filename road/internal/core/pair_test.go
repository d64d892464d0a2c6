package core

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// pair is two cores, a main estate and another, that talk through memory
// on a fake clock: the rig of the transaction, attack and fuzz tests and
// the benchmarks of the core. Nothing runs but what the test calls. Each
// received datagram goes the way a running stack takes it: parsed and its
// foot checked with the key table the core published, then Receive.
type pair struct {
	tb          testing.TB
	now         time.Time
	main, other *Core
	mainAddr    netip.AddrPort
	otherAddr   netip.AddrPort
	// wire records every datagram that went between them, in order.
	wire []wired
	// delivered and events are what each core delivered and reported.
	delivered map[*Core][]Message
	events    map[*Core][]Event
	// cut drops, when set, what it returns true for (a lossy or on-path
	// network).
	cut func(w wired) bool
	// link, when set, impairs the network (loss, duplication, reordering,
	// delay) on the fake clock.
	link *link
	air  []flight // datagrams under way, by due time
	feet map[*Core]*FootChecker
	// extra are more estates beside other, at extraAddr (a fleet, see
	// newFleet).
	extra     []*Core
	extraAddr []netip.AddrPort
}

type wired struct {
	from *Core
	b    []byte
}

// flight is a datagram under way to its core.
type flight struct {
	due  time.Time
	to   *Core
	from netip.AddrPort
	b    []byte
}

var (
	pairMain  = netip.MustParseAddrPort("127.0.0.1:7530")
	pairOther = netip.MustParseAddrPort("127.0.0.2:7531")
)

// estate is the configuration of one core of a pair: the core's, and its
// store's (a keep in KeepDir, else memory, with policy Auto; the core is
// told both).
type estate struct {
	Config
	Auto    keep.AutoMode
	KeepDir string
}

// newPair makes the two cores: main is Main with policy mainAuto, other
// accepts any keys; cfg adjusts both configurations.
func newPair(tb testing.TB, mainAuto keep.AutoMode, cfg func(main, other *estate)) *pair {
	tb.Helper()
	mc := estate{Config: Config{Name: "main", Main: true, AlivePeriod: -1}, Auto: mainAuto}
	oc := estate{Config: Config{Name: "other", AlivePeriod: -1}, Auto: keep.AutoAlways}
	if cfg != nil {
		cfg(&mc, &oc)
	}
	p := newRig(tb)
	p.main = p.newCore(&mc, nil)
	p.other = p.newCore(&oc, nil)
	p.main.Start(p.mainAddr, p.now)
	p.other.Start(p.otherAddr, p.now)
	return p
}

func newRig(tb testing.TB) *pair {
	return &pair{tb: tb, now: time.Unix(1_700_000_000, 0), mainAddr: pairMain, otherAddr: pairOther,
		delivered: map[*Core][]Message{}, events: map[*Core][]Event{},
		feet: map[*Core]*FootChecker{}}
}

// newCore makes a core of e, with store st (nil: e's).
func (p *pair) newCore(e *estate, st Store) *Core {
	p.tb.Helper()
	if st == nil {
		if e.KeepDir != "" {
			k, err := keep.Open(e.KeepDir, &keep.Config{Auto: e.Auto})
			if err != nil {
				p.tb.Fatal(err)
			}
			st = DiskStore(k)
		} else {
			st = MemStore()
		}
	}
	cfg := e.Config
	cfg.Auto, cfg.KeepDir = e.Auto, e.KeepDir
	c, err := New(&cfg, st, p.now)
	if err != nil {
		p.tb.Fatal(err)
	}
	return c
}

func (p *pair) addrOf(c *Core) netip.AddrPort {
	if c == p.main {
		return p.mainAddr
	}
	for i, e := range p.extra {
		if e == c {
			return p.extraAddr[i]
		}
	}
	return p.otherAddr
}

// cores are the rig's estates.
func (p *pair) cores() []*Core { return append([]*Core{p.main, p.other}, p.extra...) }

// coreAt is the estate at address a, or nil.
func (p *pair) coreAt(a netip.AddrPort) *Core {
	switch a {
	case p.mainAddr:
		return p.main
	case p.otherAddr:
		return p.other
	}
	for i, e := range p.extraAddr {
		if e == a {
			return p.extra[i]
		}
	}
	return nil
}

// feed has c receive datagram b from `from` now, as a running stack does.
func (p *pair) feed(c *Core, b []byte, from netip.AddrPort) {
	c.PublishKeys()
	f := p.feet[c]
	if f == nil {
		f = NewFootChecker(new(atomic.Uint64))
		p.feet[c] = f
	}
	var in Inbound
	f.Parse(&in, b, from, c.KeyTable())
	c.Receive(&in, p.now)
}

// pump carries the datagrams both ways, and delivers those due, until none
// is left to carry now (bounded).
func (p *pair) pump() {
	for range 100_000 {
		moved := false
		for _, c := range p.cores() {
			// Taken first, as a stack does: the room that frees delivers
			// what waited for it, whose dones go out below.
			p.collect(c)
			out := c.TakeOut(nil)
			for i := range out {
				d := &out[i]
				d.Sign() // as the stack's writer does (Config.SignLater)
				w := wired{from: c, b: bytes.Clone(d.B)}
				to := d.To
				d.Release()
				p.wire = append(p.wire, w)
				if p.cut != nil && p.cut(w) {
					continue
				}
				dst := p.coreAt(to)
				if dst == nil {
					continue // to an attacker's address: gone
				}
				// A copy of its own: a reader may open an AEAD coat in place,
				// and the wire keeps what was sent.
				p.launch(flight{due: p.now, to: dst, from: p.addrOf(c), b: bytes.Clone(w.b)})
			}
		}
		for len(p.air) > 0 && !p.air[0].due.After(p.now) {
			f := p.air[0]
			p.air = p.air[1:]
			p.feed(f.to, f.b, f.from)
			moved = true
		}
		if !moved {
			return
		}
	}
	p.tb.Fatal("pair: the datagrams never stopped")
}

// launch puts a datagram under way, through the link's impairments.
func (p *pair) launch(f flight) {
	if p.link != nil {
		for _, g := range p.link.pass(f) {
			p.enqueue(g)
		}
		return
	}
	p.enqueue(f)
}

func (p *pair) enqueue(f flight) {
	i := len(p.air)
	for i > 0 && p.air[i-1].due.After(f.due) {
		i--
	}
	p.air = slices.Insert(p.air, i, f)
}

func (p *pair) collect(c *Core) {
	p.delivered[c] = append(p.delivered[c], c.Deliveries()...)
	c.Delivered(len(c.Deliveries()))
	p.events[c] = append(p.events[c], c.Events()...)
	c.ClearEvents()
}

// advance moves the clock on by d in steps, running the timers due and
// delivering the datagrams under way as they arrive.
func (p *pair) advance(d time.Duration) {
	end := p.now.Add(d)
	for range 1_000_000 {
		p.step(end)
		if !p.now.Before(end) {
			return
		}
	}
	p.tb.Fatal("pair: the timers never settled")
}

// step moves the clock on to the next timer due or datagram arriving, but
// not beyond end, and runs what is due then.
func (p *pair) step(end time.Time) {
	next := end
	cores := p.cores()
	for _, c := range cores {
		checkClocks(p.tb, c)
		if w := c.Deadline(); !w.IsZero() && w.Before(next) {
			next = w
		}
	}
	if len(p.air) > 0 && p.air[0].due.Before(next) {
		next = p.air[0].due
	}
	if next.Before(p.now) {
		next = p.now
	}
	p.now = next
	for _, c := range cores {
		if w := c.Deadline(); !w.IsZero() && !w.After(p.now) {
			c.Tick(p.now)
			if w := c.Deadline(); !w.IsZero() && !w.After(p.now) {
				p.tb.Fatalf("%s: a timer stays due after its tick (%v): the stack would spin; due: %s", c.local.name, w, dueTimers(c))
			}
		}
	}
	p.pump()
}

// join has other join and allow main, and fails the test unless both
// sides end allowed.
func (p *pair) join() {
	p.tb.Helper()
	res := make(chan error, 4)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(10 * time.Millisecond)
	select {
	case err := <-res:
		if err != nil {
			p.tb.Fatalf("join: %v", err)
		}
	default:
		p.tb.Fatal("join: no outcome")
	}
	if m := p.mainRemote(); m == nil || !m.allowed || !p.otherRemote().allowed {
		p.tb.Fatal("join: not allowed on both sides")
	}
}

// mainRemote is main's remote for other; otherRemote other's for main.
func (p *pair) mainRemote() *remote  { return p.main.roster.byName[p.other.local.name] }
func (p *pair) otherRemote() *remote { return p.other.roster.byName[p.main.local.name] }

// start has from start sending body (with id) to its peer, and returns
// the channel of its outcome.
func (p *pair) start(from *Core, body map[string]any, id MsgID) chan error {
	p.tb.Helper()
	r := p.otherRemote()
	if from == p.main {
		r = p.mainRemote()
	}
	b, err := from.marshal(body)
	if err != nil {
		p.tb.Fatal(err)
	}
	res := make(chan error, 1)
	sendPooled(from, r.name, b, id, res, p.now)
	return res
}

// sendPooled has from send the serialized body b (of its body kind) to
// the remote named to, in a pooled buffer, as road's Send hands a body
// over. Every test that sends this way checks that the core gives the
// buffer back only once nothing reads the body: bodypool_test.go spoils
// each buffer given back.
func sendPooled(from *Core, to string, b []byte, id MsgID, res chan error, now time.Time) {
	buf := BodyBuffer(len(b))
	if buf != nil {
		*buf = append(*buf, b...)
		b = *buf
	}
	from.SendFor(to, b, buf, from.cfg.BodyKind, id, errChan(res), now, now)
}

// send has from send body to its peer and returns the outcome, after
// pumping.
func (p *pair) send(from *Core, body map[string]any) error {
	p.tb.Helper()
	res := p.start(from, body, MsgID{})
	p.pump()
	p.advance(time.Millisecond)
	select {
	case err := <-res:
		return err
	default:
		return errNoOutcome
	}
}

var errNoOutcome = errorString("no outcome yet")

type errorString string

func (e errorString) Error() string { return string(e) }

// inject feeds one hand-made datagram to c as if from `from`.
func (p *pair) inject(c *Core, b []byte, from netip.AddrPort) {
	p.feed(c, bytes.Clone(b), from)
	p.pump()
}

// sessionOf is what an unauthenticated packet must never change of a
// remote.
type sessionOf struct {
	sid, rsid, fuid        uint32
	allowed, joined, added bool
	short, peerShort       [32]byte
	verify, pub            [32]byte
	coat                   packet.Coat
	prof                   *profile
	window                 string // the replay window's top, span and bits
	ha                     netip.AddrPort
	name, role             string
	messengents, allowents int
}

func snapshot(r *remote) sessionOf {
	s := sessionOf{sid: r.sid, rsid: r.rsid, fuid: r.fuid, allowed: r.allowed, joined: r.joined, added: r.added,
		short: r.short.Private, peerShort: r.peerShort, verify: r.verify, pub: r.pub,
		coat: r.coat, prof: r.prof, window: fmt.Sprintf("%d %d %x", r.window.top, r.window.span, r.window.bits), ha: r.ha, name: r.name, role: r.role}
	for t := range r.eachTxn {
		if !t.key().rf {
			continue
		}
		switch t.(type) {
		case *messengent:
			s.messengents++
		case *allowent:
			s.allowents++
		}
	}
	return s
}

// forge packs a packet with head h and coat bytes, with foot f (nil: no
// foot) and codec hk.
func forge(tb testing.TB, hk codec.HeadKind, f packet.Foot, h codec.Head, coat []byte) []byte {
	tb.Helper()
	hc, err := codec.Lookup(hk)
	if err != nil {
		tb.Fatal(err)
	}
	if f == nil {
		f = packet.NadaFoot{}
	}
	pk := packet.Packer{Codec: hc, Foot: f, MaxPacketSize: 65000}
	b, err := pk.Pack(nil, &h, coat)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// sealed packs a packet with head h as c would send it to its peer in
// their session: its profile's head codec and its foot, or its AEAD coat
// under c's next counter.
func (p *pair) sealed(c *Core, h codec.Head, body []byte) []byte {
	p.tb.Helper()
	r := p.mainRemote()
	if c == p.other {
		r = p.otherRemote()
	}
	b, _, err := c.pack(nil, r, &h, body, false)
	if err != nil {
		p.tb.Fatal(err)
	}
	return b
}

// head is a head of kinds tk/pk with the given ids.
func head(tk codec.TransactionKind, pk codec.PacketKind, se, de, si, ti uint32, cf bool) codec.Head {
	var h codec.Head
	h.Reset()
	h.TransactionKind, h.PacketKind = tk, pk
	h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = se, de, si, ti
	h.SetCorrespondent(cf)
	h.BodyKind = codec.BodyKindJSON
	return h
}

// dueTimers lists c's timers due at c.now, to show what would spin.
func dueTimers(c *Core) string {
	var b strings.Builder
	if !c.kept.pendAt.IsZero() && !c.kept.pendAt.After(c.now) {
		b.WriteString("pend; ")
	}
	for _, r := range c.roster.remotes {
		if !r.presence.IsZero() && !r.presence.After(c.now) {
			fmt.Fprintf(&b, "%s presence (reaped %v); ", r.name, r.reaped)
		}
		if !r.reapAt.IsZero() && !r.reapAt.After(c.now) {
			fmt.Fprintf(&b, "%s reap (reaped %v); ", r.name, r.reaped)
		}
		if r.prof != nil && r.prof.aeadCheck != 0 && r.prof.aeadCheck <= c.now.UnixNano() {
			fmt.Fprintf(&b, "%s aead idle check; ", r.name)
		}
		for t := range r.eachTxn {
			if d := t.deadline(); !d.IsZero() && !d.After(c.now) {
				fmt.Fprintf(&b, "%s %T %+v; ", r.name, t, t.key())
			}
		}
	}
	return b.String()
}
