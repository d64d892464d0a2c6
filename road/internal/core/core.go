package core

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// Core is an estate's state and protocol logic, with no sockets, no
// goroutines and no clock (see the package doc and api.go). It is not safe
// for concurrent use: one goroutine, the owner, makes every call.
type Core struct {
	cfg   *Config
	log   *slog.Logger
	now   time.Time
	store Store

	local    localEstate // who we are (local.go)
	roster   roster      // the remotes we hold (roster.go)
	joinLogs logBudget   // bounds the Info lines of joins (a flood of strangers)

	codec  codec.Codec
	bodies packet.Serializer
	signer *packet.NaClFoot // signs with our key (FootChecker verifies)

	spares spares // emptied tables, messengers and windows, for reuse (spares.go)

	reasm *packet.Reassembler[uint32, msgKey] // owned by remote (nuid)
	lim   limits

	kept keeper // the keep's roles, the writes to it, the joins pending on it (keeptab.go)

	tx       outbox   // what is made to send, and what sends (outbox.go)
	bundling bundling // the messages and answers of this moment (bundle.go)
	rx       inbox    // the messages received, for the owner to take (inbox.go)
	events   []Event
	stats    stats

	wake wakeClock // the remotes by their earliest timer (wake.go)

	readers readerKeys // the table the readers check with, and its marks (keys.go)
	// rekeyAt: a session whose AEAD coat has less than this left to seal
	// (packet.AEADCoat.Remaining) is allowed again (rekey).
	rekeyAt uint64
	// sharedCaps are the peers' advertisements, by canonical form, that
	// their remotes share (shareCaps).
	sharedCaps map[string]*caps
	// replayHold is how long a replay window keeps a hole (replay.go): the
	// longest a remote may retry the first packet of a transaction.
	replayHold uint16
}

// defaultRekeyAt allows a session again once its AEAD coat may seal less
// than 2^33 more: after 2^33 blocks (128 GiB) in one direction with
// AES-256-GCM, far before Seal refuses (packet.ErrRekey); ChaCha20-Poly1305
// is limited only by its 2^63 counters.
const defaultRekeyAt = packet.AES256GCMBlockLimit / 2

// Datagram is one packet to send (Out).
type Datagram struct {
	B    []byte
	To   netip.AddrPort
	buf  *[]byte  // B's buffer from pool, given back by Release; nil when B is kept
	pool *bufPool // buf's pool
	// sign signs B's Ed25519 foot, left as zeros (Config.SignLater); nil
	// when B is ready to send.
	sign *packet.NaClFoot
	// ans keeps B once signed, in slot ansSlot for answer ansGen: a done
	// sent again unchanged (answers.go); nil when B is not kept so.
	ans     *answers
	ansSlot int
	ansGen  uint64
}

// Sign signs B's Ed25519 foot in place when the core left it unsigned
// (Config.SignLater), and does nothing otherwise. B must be signed before
// it is sent. It may be called from any goroutine, and on different
// datagrams at once; it neither allocates nor moves B.
func (d *Datagram) Sign() {
	if d.sign == nil {
		return
	}
	// B's foot is the last NaClFootSize bytes, zeros: Sign writes them
	// again (in place: they are within B's capacity), signs head || coat ||
	// zeros as the reference does and puts the signature over them. It fails
	// only without a signing key, and the core's signer has one.
	d.B, _ = d.sign.Sign(d.B[:len(d.B)-packet.NaClFootSize])
	d.sign = nil
	if d.ans != nil {
		d.ans.fill(d.ansSlot, d.ansGen, d.B)
		d.ans = nil
	}
}

// Unsigned reports whether B's Ed25519 foot waits for Sign: a costly call
// the owner leaves to another goroutine.
func (d *Datagram) Unsigned() bool { return d.sign != nil }

// Release gives the datagram's buffer back once B is sent (or dropped). It
// may be called from any goroutine, once; B must not be used after it.
func (d *Datagram) Release() {
	if d.buf != nil {
		d.pool.put(d.buf)
	}
	*d = Datagram{}
}

// rxPacket is a received packet, parsed and verified.
type rxPacket struct {
	packet.Packet
	from netip.AddrPort
}

// msgKey identifies an incoming segmented message.
type msgKey struct {
	nuid, si, ti uint32
}

// New makes a core from cfg (see Config.Populate) and st: it restores or
// makes the local estate and restores the kept remotes. now is the time.
func New(cfg *Config, st Store, now time.Time) (*Core, error) {
	if err := cfg.Populate(); err != nil {
		return nil, err
	}
	hc, err := codec.Lookup(cfg.HeadKind)
	if err != nil {
		return nil, err
	}
	ser, err := packet.Builtin(cfg.BodyKind)
	if err != nil {
		return nil, err
	}
	c := &Core{
		cfg: cfg, log: cfg.Logger, now: now, store: st,
		codec: hc, bodies: ser,
		roster: newRoster(),
		kept:   keeper{roles: map[string]*keptRole{}}, spares: newSpares(),
		reasm: packet.NewReassembler[uint32, msgKey](&cfg.Reassembly),
		stats: newStats(), readers: readerKeys{all: true}, rekeyAt: defaultRekeyAt,
		replayHold: replayHold(max(cfg.MessageTimeout, cfg.AllowTimeout, cfg.AliveTimeout)),
	}
	if cfg.MessageTimeout < 0 {
		c.replayHold = replayHold(-1) // messages are retried for ever
	}
	if err := c.loadLocal(); err != nil {
		return nil, err
	}
	c.signer = packet.NewNaClFoot((*[32]byte)(&c.local.signing.Seed), nil)
	c.loadRoles()
	c.loadRemotes()
	return c, nil
}

// loadLocal restores the local estate from the store or makes a new one.
func (c *Core) loadLocal() error {
	est, role, ok, err := c.store.loadLocal()
	if err != nil {
		return fmt.Errorf("raet: load local estate: %w", err)
	}
	c.local.main = c.cfg.Main
	if ok {
		if c.cfg.Name != "" && c.cfg.Name != est.Name {
			return fmt.Errorf("raet: the keep belongs to estate %q, not %q", est.Name, c.cfg.Name)
		}
		c.local.name, c.local.role, c.local.uid, c.local.puid, c.local.sid, c.local.fqdn = est.Name, est.Role, est.UID, est.PUID, est.SID, est.FQDN
		c.local.keptAHA = est.AHA
		c.local.signing = keys.NewSigning(role.Seed)
		if c.local.box, err = keys.NewBox(role.Private); err != nil {
			return err
		}
	} else {
		c.local.name = c.cfg.Name
		if c.local.name == "" {
			c.local.name = "estate_" + randomHex(16)
		}
		c.local.role = c.cfg.Role
		if c.local.role == "" {
			c.local.role = c.local.name
		}
		c.local.signing = keys.GenerateSigning()
		if c.local.box, err = keys.GenerateBox(); err != nil {
			return err
		}
		c.local.uid = c.nextUid()
	}
	return nil
}

// loadRemotes restores the kept remotes, with their roles' keys (loadRoles
// first): joined as they were, not allowed, with a new session (§9.3).
func (c *Core) loadRemotes() {
	kept, err := c.store.loadRemotes()
	if err != nil {
		c.log.Warn("raet: some kept remotes were not loaded", "err", err)
	}
	for _, est := range kept {
		if r := c.restore(est); r != nil {
			c.addRemote(r)
			// The uids given since the local estate was last written (only
			// at start) are the kept remotes': the next is beyond them.
			if r.nuid > c.local.puid {
				c.local.puid = r.nuid
			}
		}
	}
}

// restore makes a remote from its kept files: joined as it was, not
// allowed, with a new session (§9.3); nil when they are unusable or clash
// with a remote we hold.
func (c *Core) restore(est keep.RemoteEstate) *remote {
	ha, perr := parseHostPort(est.HA)
	if perr != nil {
		c.log.Warn("raet: kept remote has a bad address", "remote", est.Name, "err", perr)
		return nil
	}
	kr, err := c.keptRoleOf(est.Role)
	if kr == nil {
		c.log.Warn("raet: kept remote has no role keys; skipped", "remote", est.Name, "role", est.Role, "err", err)
		return nil
	}
	r := &remote{nuid: est.UID, fuid: est.FUID, name: est.Name, role: est.Role, ha: ha,
		main: est.Main, kind: est.Kind, fqdn: est.FQDN, verify: kr.rec.Verify, pub: kr.rec.Public,
		sid: est.SID, keptSid: est.SID, joined: est.Joined != nil && *est.Joined}
	if !r.joined || kr.rec.Acceptance != keep.Accepted {
		// Only keys an operator (or the policy) accepted make a joined
		// remote: a kept "joined" of keys not accepted is not trusted.
		r.joined = false
	}
	if c.roster.remotes[r.nuid] != nil || c.roster.byName[r.name] != nil || r.nuid == c.local.uid {
		c.log.Warn("raet: kept remote clashes with another; skipped", "remote", r.name, "uid", r.nuid)
		return nil
	}
	r.nextSid()
	return r
}

// Start records the listening address and persists the local estate and
// remotes, as the reference does at stack start, and starts the presence
// timers.
func (c *Core) Start(addr netip.AddrPort, now time.Time) {
	c.now = now
	c.local.aha = keep.HostPort{Host: addr.Addr().String(), Port: addr.Port()}
	c.saveLocal()
	rs := make([]*remote, 0, len(c.roster.remotes))
	for _, r := range c.roster.remotes {
		c.saveRemote(r, false)
		rs = append(rs, r)
	}
	c.startPresence(rs)
}

func (c *Core) nextUid() uint32 {
	for {
		c.local.puid++
		if c.local.puid == 0 {
			c.local.puid = 1
		}
		if c.local.puid != c.local.uid && c.roster.remotes[c.local.puid] == nil {
			return c.local.puid
		}
	}
}

// newRemote makes a remote for address ha, not yet added.
func (c *Core) newRemote(ha netip.AddrPort, fuid, sid uint32) *remote {
	return &remote{nuid: c.nextUid(), fuid: fuid, sid: sid, ha: ha, name: "estate_" + randomHex(16)}
}

// addRemote adds r, forgetting the longest silent remote when there are
// more than MaxRemotes (forget.go).
func (c *Core) addRemote(r *remote) {
	c.markKeys(r)
	r.added = true
	r.heard = c.now
	c.roster.silence.last(r)
	c.roster.remotes[r.nuid] = r
	c.roster.byName[r.name] = r
	c.roster.peak.Note(len(c.roster.remotes))
	if r.role == "" {
		r.role = r.name
	}
	c.wake.touch(r)
	c.capRemotes(r)
}

func (c *Core) renameRemote(r *remote, name string) error {
	if o := c.roster.byName[name]; o != nil && o != r {
		return fmt.Errorf("raet: name %q is taken", name)
	}
	if r.added {
		old := r.name
		delete(c.roster.byName, old)
		c.roster.byName[name] = r
		c.deleteRemote(old)
	}
	r.name = name
	return nil
}

// removeRemote forgets r (and its kept file), ending its transactions.
func (c *Core) removeRemote(r *remote, reason error) {
	for t := range r.eachTxn {
		t.abort(c, codec.PacketKindNack)
	}
	for _, m := range r.saved {
		m.finish(c, reason)
	}
	r.dropSaved()
	c.notifyWaiters(r, reason)
	c.markKeys(r)
	c.wake.touch(r)
	if r.added {
		delete(c.roster.remotes, r.nuid)
		c.roster.silence.remove(r)
		if c.roster.byName[r.name] == r {
			delete(c.roster.byName, r.name)
		}
		c.deleteRemote(r.name)
		c.event(EventRemoved, r)
	}
	r.added = false
	for ha, j := range c.roster.joinees {
		if j == r {
			delete(c.roster.joinees, ha)
		}
	}
}

// addTxn registers t with r, in place of another at its key.
func (c *Core) addTxn(r *remote, t txn) {
	k := t.key()
	if old := r.txn(k); old != nil && old != t {
		c.removeTxn(r, old)
	}
	m := r.table(k)
	if *m == nil {
		var ok bool
		if *m, ok = c.spares.txns.Get(); !ok {
			*m = make(map[txnID]txn, 1)
		}
	}
	(*m)[k.id()] = t
	t.timerSlot().in = r
	c.wake.retime(t)
}

// removeTxn unregisters t from r (if it is still the one at its key).
func (c *Core) removeTxn(r *remote, t txn) {
	if s := t.timerSlot(); s.in == r {
		k := t.key()
		m := r.table(k)
		delete(*m, k.id())
		s.in, s.marked = nil, false // not keyed again (flushWake)
		r.clock.set(t, time.Time{})
		if len(*m) == 0 { // an idle remote holds no table
			c.spares.txns.Put(*m)
			*m = nil
		}
		if r.numTxns() == 0 && cap(r.clock) > idleClock {
			r.clock = nil
		}
	}
	c.wake.touch(r)
}

// idleClock is the most entries a remote's clock keeps room for once it
// has no transaction.
const idleClock = 16

func (c *Core) event(k EventKind, r *remote) { c.report(k, c.nameOf(r), r.nuid, ReasonNone, r.ha, "") }

// --- sending -------------------------------------------------------------

// outHead returns a head for a packet of transaction kind tk to r.
func (c *Core) outHead(tk codec.TransactionKind, pk codec.PacketKind, se, de, si, ti uint32, cf bool) codec.Head {
	var h codec.Head
	h.Reset()
	h.TransactionKind, h.PacketKind = tk, pk
	h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = se, de, si, ti
	h.SetCorrespondent(cf)
	return h
}

// packerFor returns the packer for a packet with head h to r: the session's
// negotiated profile for everything but joins and allows, else the
// reference profile (the stack's head kind, Ed25519, MaxPacketSize).
func (c *Core) packerFor(r *remote, h *codec.Head) packet.Packer {
	pk := packet.Packer{Codec: c.codec, Foot: packet.NadaFoot{}, MaxPacketSize: c.cfg.MaxPacketSize}
	if h.FootKind != codec.FootKindNada {
		pk.Foot = c.signer
	}
	tk := h.TransactionKind
	if r == nil || r.prof == nil || tk == codec.TransactionKindJoin || tk == codec.TransactionKindAllow {
		return pk
	}
	pk.Codec, pk.MaxPacketSize = r.prof.codec, r.prof.mps
	if h.FootKind != codec.FootKindNada && r.prof.mac != nil {
		pk.Foot = r.prof.mac
	}
	return pk
}

// signLater makes pk leave an Ed25519 foot as zeros when the caller signs
// it off the owner goroutine (Config.SignLater), and returns the signer
// for the datagram (Datagram.Sign); nil when pk signs as it packs.
func (c *Core) signLater(pk *packet.Packer) *packet.NaClFoot {
	if !c.cfg.SignLater || pk.Foot != packet.Foot(c.signer) {
		return nil
	}
	pk.Foot = unsignedFoot{}
	return c.signer
}

// unsignedFoot is an Ed25519 foot of zeros, signed later (Datagram.Sign).
type unsignedFoot struct{}

func (unsignedFoot) Kind() codec.FootKind { return codec.FootKindNaCl }
func (unsignedFoot) Size() int            { return packet.NaClFootSize }
func (unsignedFoot) Sign(pkt []byte) ([]byte, error) {
	return append(pkt, make([]byte, packet.NaClFootSize)...), nil
}
func (unsignedFoot) Verify(_, _ []byte, de uint32) error {
	return &packet.FootError{Kind: codec.FootKindNaCl, Op: "verify", De: de, Err: packet.ErrFootVerify}
}

// pack appends to dst (nil: a new buffer of the right size) one packet
// with head h (bk, ck and fk set by the caller) and the serialized body,
// sealing it with r's coat when h.CoatKind says so. With later, an
// Ed25519 foot may be left for the caller to sign (signLater): pack then
// returns the signer too.
func (c *Core) pack(dst []byte, r *remote, h *codec.Head, body []byte, later bool) ([]byte, *packet.NaClFoot, error) {
	if packet.IsAEAD(h.CoatKind) {
		b, err := c.packAEAD(dst, r, h, body)
		return b, nil, err
	}
	coat := body
	if h.CoatKind != codec.CoatKindNada && len(body) > 0 {
		if r == nil || r.coat == nil || r.coat.Kind() != h.CoatKind {
			return nil, nil, fmt.Errorf("raet: no session keys with %s to coat a packet", remoteName(r))
		}
		var err error
		if coat, err = r.coat.Seal(nil, body); err != nil {
			return nil, nil, err
		}
	}
	if dst == nil {
		dst = make([]byte, 0, 128+len(coat)+packet.NaClFootSize)
	}
	pk := c.packerFor(r, h)
	var sign *packet.NaClFoot
	if later {
		sign = c.signLater(&pk)
	}
	b, err := pk.Pack(dst, h, coat)
	return b, sign, err
}

// packAEAD packs a packet of r's session sealed with its AEAD coat, under
// a new counter (aead.go): no foot, whatever h.FootKind says.
func (c *Core) packAEAD(dst []byte, r *remote, h *codec.Head, body []byte) ([]byte, error) {
	var a *packet.AEADCoat
	if r != nil {
		a = r.aead()
	}
	if a == nil || a.Kind() != h.CoatKind {
		return nil, fmt.Errorf("raet: no %v session keys with %s to coat a packet", h.CoatKind, remoteName(r))
	}
	if dst == nil {
		dst = make([]byte, 0, 128+len(body)+packet.AEADOverhead)
	}
	pk := c.packerFor(r, h)
	b, err := pk.PackAEAD(dst, h, a, body)
	c.sealedAEAD(r, a, err)
	return b, err
}

// sealedAEAD follows every seal with r's AEAD coat a: a coat with little
// left to seal (rekeyAt), or none (err), has r allowed again.
func (c *Core) sealedAEAD(r *remote, a *packet.AEADCoat, err error) {
	if (err == nil && a.Remaining() < c.rekeyAt) || errors.Is(err, packet.ErrRekey) {
		c.rekey(r)
	}
	c.usedAEAD(r, true)
}

// aeadIdle is a new AEAD session's hold: how long it may go without a
// packet sealed or opened before its coat drops its cipher states
// (packet.AEADCoat.Drop; ~1.5 KiB with AES-256-GCM, as much as the rest
// of a remote's state); its
// next packet builds them again (~1.4 µs, BenchmarkAEADCoatRebuild). A
// busy session never runs this timer: each packet moves it. A session
// whose presence period is longer (a main's grows with its remotes,
// presence.go: 5 s at 1000 remotes and the default AliveRate) drops them
// at the end of each alive exchange instead (idleExchange), so that its
// idle remotes hold none and run no timer between their alives.
//
// A session whose traffic comes in bursts a little further apart than
// that (a main that sends to each of its remotes every few seconds) would
// drop and rebuild them for every burst: 2.6 KB of garbage and a rebuild
// each. So the hold adapts (adaptHold): states wanted again within a hold
// of being dropped are kept twice as long from then on, up to aeadHoldMax;
// wanted later than that, half as long, down to aeadIdle.
const (
	aeadIdle    = 2 * time.Second
	aeadHoldMax = 8 * aeadIdle
)

// usedAEAD records a packet sealed or opened with r's AEAD coat, whose
// cipher states are therefore built: they go the session's hold after the
// last such packet (remoteDeadline, idleAEAD). A coat that did not open
// (forged, say) only starts that timer if it was not running, so forgeries
// cannot keep the states beyond a hold, nor lengthen it.
func (c *Core) usedAEAD(r *remote, opened bool) {
	p := r.prof
	if p == nil || p.aead == nil || (!opened && p.aeadCheck != 0) {
		return
	}
	now := c.now.UnixNano()
	if p.aeadCheck == 0 && opened && p.aeadDropped != 0 {
		p.adaptHold(now)
	}
	p.aeadCheck = now + int64(p.hold())
	c.wake.touch(r)
}

// hold is how long the session's AEAD cipher states are kept idle.
func (p *profile) hold() time.Duration {
	if p.aeadHold == 0 {
		return aeadIdle
	}
	return p.aeadHold
}

// adaptHold follows states dropped by idleAEAD and wanted again at now:
// within a hold of the drop, the hold doubles (up to aeadHoldMax);
// later, it halves (down to aeadIdle).
func (p *profile) adaptHold(now int64) {
	h := p.hold()
	if now-p.aeadDropped < int64(h) {
		h = min(2*h, aeadHoldMax)
	} else {
		h = max(h/2, aeadIdle)
	}
	p.aeadHold, p.aeadDropped = h, 0
}

// idleAEAD drops the cipher states of r's AEAD coat once its timer is due:
// nothing was sealed or opened with it for its hold.
func (c *Core) idleAEAD(r *remote) {
	if p := r.prof; p != nil && p.aeadCheck != 0 && c.now.UnixNano() >= p.aeadCheck {
		p.aead.Drop()
		p.aeadCheck, p.aeadDropped = 0, c.now.UnixNano()
	}
}

// idleExchange follows an alive exchange with r that left nothing under
// way. A driver asks only after a period of silence both ways (presence.go),
// so the session was idle for that period and is idle until the next
// exchange: when the period is longer than aeadIdle, its AEAD cipher
// states go now rather than by a timer a hold later (whatever the hold:
// an idle remote holds none between its alives), and the hold is left as
// it is (the next exchange's rebuild says nothing of the traffic).
func (c *Core) idleExchange(r *remote) {
	p := r.prof
	if p == nil || p.aeadCheck == 0 || r.numTxns() > 0 || c.pairPeriod(r) <= aeadIdle {
		return
	}
	p.aead.Drop()
	p.aeadCheck = 0
}

// marshal serializes a control or message body with the stack's body kind.
func (c *Core) marshal(body any) ([]byte, error) { return c.bodies.Marshal(nil, body) }

// transmit queues a packed datagram; buf is its pooled buffer, or nil;
// sign its signer when its foot is left to sign (signLater), or nil. A
// datagram to an address whose keep writes are not yet durable waits for
// them (keeptab.go).
func (c *Core) transmit(b []byte, buf *[]byte, to netip.AddrPort, h *codec.Head, sign *packet.NaClFoot) {
	c.queueOut(Datagram{B: b, To: to, buf: buf, pool: &c.tx.bufs, sign: sign}, h)
}

// queueOut queues d, a packet of head h (transmit).
func (c *Core) queueOut(d Datagram, h *codec.Head) {
	if seq, ok := c.heldFor(d.To); ok {
		c.hold(seq, d)
	} else {
		c.tx.push(d)
	}
	c.stats.out(h, max(int(h.PacketLength), len(d.B)))
}

// retransmit queues a datagram sent before and kept, unchanged; not while
// what goes to its address waits for the keep (the datagram, or what came
// after it, is not out yet: a timer sends it again later; false then).
func (c *Core) retransmit(b []byte, to netip.AddrPort) bool {
	if _, ok := c.heldFor(to); ok {
		return false
	}
	c.tx.push(Datagram{B: b, To: to})
	c.stats.retransmit()
	return true
}

// resend queues a copy of b, a packet sent before whose memory its keeper
// reuses, in a pooled buffer; sign is its signer when b was kept unsigned
// (signLater: the signature comes out the same, Ed25519 is deterministic);
// not while its address waits for the keep (as retransmit): false then.
func (c *Core) resend(b []byte, to netip.AddrPort, sign *packet.NaClFoot) bool {
	if _, ok := c.heldFor(to); ok {
		return false
	}
	buf := c.tx.bufs.get(len(b))
	*buf = append((*buf)[:0], b...)
	c.tx.push(Datagram{B: *buf, To: to, buf: buf, pool: &c.tx.bufs, sign: sign})
	c.stats.retransmit()
	return true
}

// sendNew packs and queues a packet to `to`, and returns it for the caller
// to keep (and send again); nil when it could not be packed, which is
// logged and counted.
func (c *Core) sendNew(r *remote, h *codec.Head, body []byte, to netip.AddrPort) []byte {
	b, _, err := c.pack(nil, r, h, body, false)
	if err != nil {
		c.packFailed(r, err)
		return nil
	}
	c.transmit(b, nil, to, h, nil)
	return b
}

// send packs and queues a packet the caller does not keep, in a buffer from
// c.tx.bufs that the writer gives back. It reports whether the packet went.
func (c *Core) send(r *remote, h *codec.Head, body []byte, to netip.AddrPort) bool {
	d, ok := c.packOut(r, h, body, to)
	if ok {
		c.queueOut(d, h)
	}
	return ok
}

// packOut packs a packet of head h to r at `to` for send, in a buffer from
// c.tx.bufs; false when it could not be packed, which is logged and counted.
func (c *Core) packOut(r *remote, h *codec.Head, body []byte, to netip.AddrPort) (Datagram, bool) {
	limit := c.cfg.MaxPacketSize
	if r != nil && r.prof != nil {
		limit = max(limit, r.prof.mps)
	}
	buf := c.tx.bufs.get(limit)
	b, sign, err := c.pack(*buf, r, h, body, true)
	if err != nil {
		c.tx.bufs.put(buf)
		c.packFailed(r, err)
		return Datagram{}, false
	}
	return Datagram{B: b, To: to, buf: buf, pool: &c.tx.bufs, sign: sign}, true
}

// sendAnswer sends the done of head h to r at `to`, and keeps it to send
// again unchanged should the message come again (answers.go).
func (c *Core) sendAnswer(r *remote, h *codec.Head, to netip.AddrPort) {
	d, ok := c.packOut(r, h, nil, to)
	if !ok {
		return
	}
	if keepsAnswer(h.CoatKind) {
		k := answerKey{to: to, nuid: h.SourceID, fuid: h.DestinationID, si: h.SessionID, ti: h.TransactionID,
			ck: h.CoatKind, fk: h.FootKind}
		c.tx.answers.note(k, &d, c.now, answersFor(len(c.roster.remotes)))
	}
	c.queueOut(d, h)
}

// answerAgain sends the kept done (sendAnswer) of the message of head h,
// received again from `from`; false when none is kept (or what goes to
// `from` waits for the keep: a done signed anew waits with it).
func (c *Core) answerAgain(h *codec.Head, from netip.AddrPort) bool {
	if _, held := c.heldFor(from); held || !keepsAnswer(h.CoatKind) {
		return false
	}
	k := answerKeyOf(h, from)
	buf := c.tx.bufs.get(maxAnswerSize)
	b, ok := c.tx.answers.recall(&k, (*buf)[:0])
	if !ok {
		c.tx.bufs.put(buf)
		return false
	}
	*buf = b
	out := &c.tx.head
	out.Reset()
	out.TransactionKind, out.PacketKind = h.TransactionKind, codec.PacketKindDone
	c.queueOut(Datagram{B: b, To: from, buf: buf, pool: &c.tx.bufs}, out)
	return true
}

func (c *Core) packFailed(r *remote, err error) {
	c.stats.drop(dropPackError)
	if errors.Is(err, packet.ErrRekey) {
		return // counted: it would be every packet until the new allow (rekey logs)
	}
	c.log.Warn("raet: pack", "remote", remoteName(r), "err", err)
}

func remoteName(r *remote) string {
	if r == nil {
		return "?"
	}
	return r.name
}

// removeStaleCorrespondents ends r's correspondent transactions of older
// sessions once it started a newer one, whose ids start a new window.
func (c *Core) removeStaleCorrespondents(r *remote) {
	held := false
	for t := range r.eachTxn {
		if k := t.key(); k.rf && !validSid(k.si, r.rsid) {
			if a, ok := t.(*allowent); ok && r.allowed && a.lastKind == codec.PacketKindAck {
				// Allowed, and its final ack lost: the remote's packet of the
				// new session says it has the session, so what waits for the
				// allow goes now (as when the allowent times out).
				held = true
			}
			t.abort(c, codec.PacketKindNack)
			c.removeTxn(r, t)
		}
	}
	r.window.reset()
	if held {
		c.startHeld(r)
	}
}

// replaceStaleInitiators ends our transactions of older sessions after our
// session changed, saving their messages to send after the next allow.
func (c *Core) replaceStaleInitiators(r *remote) {
	for t := range r.eachTxn {
		k := t.key()
		if k.rf || validSid(k.si, r.sid) {
			continue
		}
		if m, ok := t.(*messenger); ok {
			c.ended(m)
			r.save(m)
			m.abort(c, codec.PacketKindNack)
			c.removeTxn(r, t)
			continue
		}
		t.abort(c, codec.PacketKindNack)
		c.removeTxn(r, t)
	}
}

// --- timers --------------------------------------------------------------

// timeOutSaved ends the messages of r.saved whose timeout is due, and sets
// r.savedDue to the earliest timeout of those left.
func (c *Core) timeOutSaved(r *remote) {
	kept, due := r.saved[:0], time.Time{}
	for _, m := range r.saved {
		c.wake.savedWalked++
		if m.timeout.due(c.now) {
			m.finish(c, ErrTimeout)
			continue
		}
		kept = append(kept, m)
		due = earliest(due, time.Time(m.timeout))
	}
	clear(r.saved[len(kept):])
	r.saved, r.savedDue = kept, expiry(due)
	if len(kept) == 0 {
		r.dropSaved()
	}
}

// tickRemote runs r's timers that are due (see remoteDeadline and tick in
// timers.go).
func (c *Core) tickRemote(r *remote) {
	// Only the due: each leaves the clock, keyed again at the next flush;
	// a tick moves no other's key (retime waits for the flush), so this
	// ends within len(r.clock) turns.
	for r.clock.dueAt(c.now) {
		t := r.clock.pop()
		c.wake.keyed++
		c.wake.retime(t)
		if d := t.deadline(); !d.IsZero() && !c.now.Before(d) {
			t.tick(c)
		}
	}
	// Messages saved for the next allow, or held back by the window,
	// still time out.
	if r.savedDue.due(c.now) {
		c.timeOutSaved(r)
	}
	c.startHeld(r)
	c.idleAEAD(r)
	if !r.added {
		return
	}
	c.managePresence(r)
}

// --- join waiters ----------------------------------------------------------

func (c *Core) notifyWaiters(r *remote, err error) {
	for _, w := range r.waiters {
		w <- err
	}
	r.waiters = nil
}
