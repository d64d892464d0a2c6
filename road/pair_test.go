package road

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// pair is two cores, a main estate and another, that talk through memory
// with a fake clock: the rig of the attack tests, the fuzz target and the
// benchmarks of the core. Nothing runs but what the test calls.
type pair struct {
	tb          testing.TB
	now         time.Time
	main, other *core
	mainAddr    netip.AddrPort
	otherAddr   netip.AddrPort
	// wire records every datagram that went between them, in order.
	wire []wired
	// delivered are the messages each core delivered.
	delivered map[*core][]Message
	// cut drops, when set, what it returns true for (a lossy or on-path
	// network).
	cut func(w wired) bool
}

type wired struct {
	from *core
	b    []byte
}

var (
	pairMain  = netip.MustParseAddrPort("127.0.0.1:7530")
	pairOther = netip.MustParseAddrPort("127.0.0.2:7531")
)

// newPair makes the two cores: main is Main with policy mainAuto, other
// accepts any keys; cfg adjusts both configurations.
func newPair(tb testing.TB, mainAuto keep.AutoMode, cfg func(main, other *Config)) *pair {
	tb.Helper()
	mc := Config{Name: "main", Main: true, Auto: mainAuto, AlivePeriod: -1}
	oc := Config{Name: "other", Auto: keep.AutoAlways, AlivePeriod: -1}
	if cfg != nil {
		cfg(&mc, &oc)
	}
	p := &pair{tb: tb, now: time.Unix(1_700_000_000, 0), mainAddr: pairMain, otherAddr: pairOther,
		delivered: map[*core][]Message{}}
	p.main = p.newCore(&mc, nil)
	p.other = p.newCore(&oc, nil)
	p.main.start(p.mainAddr)
	p.other.start(p.otherAddr)
	return p
}

func (p *pair) newCore(cfg *Config, st store) *core {
	p.tb.Helper()
	full, err := populate(cfg)
	if err != nil {
		p.tb.Fatal(err)
	}
	if st == nil {
		if full.KeepDir != "" {
			k, err := keep.Open(full.KeepDir, &keep.Config{Auto: full.Auto})
			if err != nil {
				p.tb.Fatal(err)
			}
			st = diskStore{k}
		} else {
			st = newMemStore(full.Auto)
		}
	}
	c, err := newCore(full, st, p.now)
	if err != nil {
		p.tb.Fatal(err)
	}
	return c
}

func (p *pair) addrOf(c *core) netip.AddrPort {
	if c == p.main {
		return p.mainAddr
	}
	return p.otherAddr
}

// pump carries datagrams both ways until none is left (bounded).
func (p *pair) pump() {
	for range 10_000 {
		moved := false
		for _, c := range []*core{p.main, p.other} {
			out := c.out
			c.out = nil
			for _, d := range out {
				b := bytes.Clone(d.b)
				if d.buf != nil {
					c.bufs.put(d.buf)
				}
				w := wired{from: c, b: b}
				p.wire = append(p.wire, w)
				if p.cut != nil && p.cut(w) {
					continue
				}
				moved = true
				to := p.other
				if d.to == p.mainAddr {
					to = p.main
				} else if d.to != p.otherAddr {
					continue // to an attacker's address: gone
				}
				to.now = p.now
				to.receive(b, p.addrOf(c))
				to.flushWake()
			}
			p.collect(c)
		}
		if !moved {
			return
		}
	}
	p.tb.Fatal("pair: the datagrams never stopped")
}

func (p *pair) collect(c *core) {
	p.delivered[c] = append(p.delivered[c], c.delivery...)
	c.delivery = c.delivery[:0]
	c.events = c.events[:0]
}

// advance moves the clock on by d in steps, running the timers due.
func (p *pair) advance(d time.Duration) {
	end := p.now.Add(d)
	for range 100_000 {
		next := end
		for _, c := range []*core{p.main, p.other} {
			if !c.wake.IsZero() && c.wake.Before(next) {
				next = c.wake
			}
		}
		if next.Before(p.now) {
			next = p.now
		}
		p.now = next
		for _, c := range []*core{p.main, p.other} {
			if !c.wake.IsZero() && !c.wake.After(p.now) {
				c.tick(p.now)
				c.flushWake()
				if !c.wake.IsZero() && !c.wake.After(p.now) {
					p.tb.Fatalf("%s: a timer stays due after its tick (%v): the stack would spin", c.name, c.wake)
				}
			}
		}
		p.pump()
		if !p.now.Before(end) {
			return
		}
	}
	p.tb.Fatal("pair: the timers never settled")
}

// join has other join and allow main, and fails the test unless both
// sides end allowed.
func (p *pair) join() {
	p.tb.Helper()
	o := p.other
	r := o.newRemote(p.mainAddr, 0, 0)
	o.addRemote(r)
	res := make(chan error, 4)
	r.waiters = append(r.waiters, res)
	o.now = p.now
	o.startJoiner(r, true, false)
	o.flushWake()
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
func (p *pair) mainRemote() *remote  { return p.main.byName[p.other.name] }
func (p *pair) otherRemote() *remote { return p.other.byName[p.main.name] }

// send has from send body to its peer and returns the outcome, after
// pumping.
func (p *pair) send(from *core, body map[string]any) error {
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
	from.now = p.now
	from.startMessenger(r, b, from.cfg.BodyKind, msgID{}, res, p.now)
	from.flushWake()
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
func (p *pair) inject(c *core, b []byte, from netip.AddrPort) {
	c.now = p.now
	c.receive(bytes.Clone(b), from)
	c.flushWake()
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
	window                 replayWindow
	ha                     netip.AddrPort
	name, role             string
	messengents, allowents int
}

func snapshot(r *remote) sessionOf {
	s := sessionOf{sid: r.sid, rsid: r.rsid, fuid: r.fuid, allowed: r.allowed, joined: r.joined, added: r.added,
		short: r.short.Private, peerShort: r.peerShort, verify: r.verify, pub: r.pub,
		coat: r.coat, prof: r.prof, window: r.window, ha: r.ha, name: r.name, role: r.role}
	for k, t := range r.txns {
		if !k.rf {
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
