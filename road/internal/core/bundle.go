package core

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Bundles and answers (raet-go only; negotiated as "bdl" in the join caps,
// between two fast-profile estates; the wire format is packet's, see
// packet/bundle.go and docs/wire.md).
//
// A moment is what the owner does between two calls of TakeOut (or
// OutLen): one command, or the datagrams and timers of one turn of its
// loop. The messages started for a remote in one moment that each fit one
// packet are not sent at once but queued; TakeOut packs them, in order,
// into as few bundle packets of the session's packet size as they fit, so
// bundling adds no delay. Each entry stays its own message transaction:
// its own ti, its own done, its own timers. When its retransmission timer
// runs out, a message is queued again, and goes in the bundles of that
// moment with whatever else is due (a lost bundle is sent again only for
// the entries not yet done). A message too large for a bundle goes alone,
// segmented if need be, as without bundles.
//
// The dones we owe a remote in one moment (for messages received alone or
// bundled, and repeats of messages finished before) are coalesced into one
// answers packet, or, when a bundle of ours goes to that remote in the same
// moment and they fit, into that bundle's answers. Acks and nacks go alone,
// as without bundles: an ack names a segment the answers cannot carry, and
// the answers carry no nacks.
//
// Received, a bundle is authenticated as one packet (its foot, or its AEAD
// coat, opened whole) before anything in it is read, and each entry then
// goes as a lone message would:
// its ti is looked up in the session's replay window, so an entry finished
// before is answered done and not delivered again, whatever bundle (or lone
// packet) it came in.

// flushBundles packs the messages and answers of this moment, remote by
// remote.
func (c *Core) flushBundles() {
	b := &c.bundling
	if len(b.queued) == 0 && len(b.answers) == 0 {
		return
	}
	// By remote, then session, then ti (in the order the ids were given:
	// a bundle sent again lists its entries as the first time).
	slices.SortStableFunc(b.queued, func(x, y *messenger) int {
		return cmp.Or(cmp.Compare(x.r.nuid, y.r.nuid), tidOrder(x.ti, y.ti))
	})
	slices.SortStableFunc(b.answers, func(x, y owed) int {
		return cmp.Or(cmp.Compare(x.r.nuid, y.r.nuid), cmp.Compare(x.si, y.si), tidOrder(x.ti, y.ti))
	})
	q, a := b.queued, b.answers
	for len(q) > 0 || len(a) > 0 {
		var r *remote
		if len(q) > 0 && (len(a) == 0 || q[0].r.nuid <= a[0].r.nuid) {
			r = q[0].r
		} else {
			r = a[0].r
		}
		nq, na := 0, 0
		for nq < len(q) && q[nq].r == r {
			nq++
		}
		for na < len(a) && a[na].r == r {
			na++
		}
		c.flushRemote(r, q[:nq], a[:na])
		q, a = q[nq:], a[na:]
	}
	clear(b.queued)
	clear(b.answers)
	b.queued, b.answers = b.queued[:0], b.answers[:0]
}

// tidOrder compares transaction ids, which wrap, as serial numbers.
func tidOrder(x, y uint32) int { return cmp.Compare(int32(x-y), 0) }

// flushRemote sends r's queued messages ms in bundles and the dones as owed
// it, sorted by session and ti.
func (c *Core) flushRemote(r *remote, ms []*messenger, as []owed) {
	b := &c.bundling
	live := ms[:0]
	for _, m := range ms {
		m.queued = false // its timers count again (deadline)
		c.wake.retime(m)
		if m.bundled && r.added && r.allowed && m.in == r {
			live = append(live, m)
		}
	}
	if !c.bundles(r) {
		// The session changed in this moment to one that does not bundle
		// (a new allow): each goes alone.
		for _, m := range live {
			m.sendAlone(c)
		}
		for _, o := range as {
			h := &c.tx.head
			*h = c.outHead(codec.TransactionKindMessage, codec.PacketKindDone, r.nuid, r.fuid, o.si, o.ti, true)
			h.BodyKind, h.CoatKind, h.FootKind = c.cfg.BodyKind, r.coatKind(), codec.FootKindNaCl
			c.send(r, h, nil, r.ha)
		}
		return
	}
	b.pig = b.pig[:0]
	c.owedAnswers(r, as, len(live) > 0)
	if len(live) > 0 {
		c.sendBundles(r, live)
	}
	if len(b.pig) > 0 { // not carried by a bundle
		c.sendAnswers(r, r.rsid, b.pig)
	}
}

// maxRanges is how many answer ranges one packet to r carries: each is at
// most 8 bytes, and a head and foot take less than 192.
func maxRanges(r *remote) int {
	return min(packet.MaxAnswerRanges, max(1, (r.prof.mps-192)/8))
}

// owedAnswers turns the dones owed to r into answer ranges and sends them,
// but for those of r's current session when a bundle may carry them
// (bundling): those it leaves in pig.
func (c *Core) owedAnswers(r *remote, as []owed, bundling bool) {
	b := &c.bundling
	for len(as) > 0 {
		si := as[0].si
		n := 1
		for n < len(as) && as[n].si == si {
			n++
		}
		rs, ids := b.ranges[:0], 0
		for i, o := range as[:n] {
			if i > 0 && o.ti == as[i-1].ti {
				continue // owed twice in one moment: one done
			}
			if len(rs) == maxRanges(r) || ids == packet.MaxAnswerIDs {
				c.sendAnswers(r, si, rs)
				rs, ids = rs[:0], 0
			}
			rs = packet.AddAnswer(rs, codec.PacketKindDone, o.ti)
			ids++
		}
		if bundling && si == r.rsid {
			b.pig = append(b.pig, rs...)
		} else {
			c.sendAnswers(r, si, rs)
		}
		b.ranges = rs[:0]
		as = as[n:]
	}
}

// sendAnswers sends an answers packet of rs to r, for r's session si.
func (c *Core) sendAnswers(r *remote, si uint32, rs []packet.AnswerRange) {
	if len(rs) == 0 {
		return
	}
	h := &c.tx.head
	*h = c.outHead(codec.TransactionKindMessage, codec.PacketKindAnswers, r.nuid, r.fuid, si, 0, true)
	h.BodyKind, h.CoatKind, h.FootKind = c.cfg.BodyKind, r.coatKind(), codec.FootKindNaCl
	pk := c.packerFor(r, h)
	buf := c.tx.bufs.get(pk.MaxPacketSize)
	var out []byte
	var err error
	if r.aead() != nil {
		// The list is the body the session's AEAD coat seals (c.pack).
		b := &c.bundling
		if b.list, err = packet.AppendAnswers(b.list[:0], rs); err == nil {
			out, _, err = c.pack(*buf, r, h, b.list, false)
		}
	} else {
		out, err = pk.PackAnswers(*buf, h, rs)
	}
	if err != nil {
		c.tx.bufs.put(buf)
		c.packFailed(r, err)
		return
	}
	c.transmit(out, buf, r.ha, h, nil)
}

// sendBundles packs the messages ms to r into bundles, in order, the first
// that has room carrying the answers in pig.
func (c *Core) sendBundles(r *remote, ms []*messenger) {
	b := &c.bundling
	h := c.outHead(codec.TransactionKindMessage, codec.PacketKindBundle, r.nuid, r.fuid, r.sid, 0, false)
	h.BodyKind, h.CoatKind, h.FootKind = c.cfg.BodyKind, r.coatKind(), codec.FootKindNaCl
	b.packer = c.packerFor(r, &h)
	b.bundler.Packer, b.bundler.Coat, b.bundler.AEAD = &b.packer, r.coat, r.aead()
	b.bundler.Reset(&h)
	first := 0
	for i, m := range ms {
		c.tx.scratch = m.plaintext(c.tx.scratch[:0])
		e := packet.BundleEntry{TI: m.ti, BodyKind: m.bk, Plain: c.tx.scratch}
		err := b.bundler.Add(e)
		if errors.Is(err, packet.ErrBundleFull) {
			c.flushBundle(r, &h, ms[first:i])
			first = i
			err = b.bundler.Add(e)
		}
		if err != nil {
			// Too large for a bundle after all (its table entry): alone.
			m.sendAlone(c)
		}
	}
	if b.bundler.Len() > 0 {
		c.flushBundle(r, &h, ms[first:])
	}
}

// flushBundle sends the bundle being built, whose entries are the bundled
// ones of ms, with the answers in pig if they fit.
func (c *Core) flushBundle(r *remote, h *codec.Head, ms []*messenger) {
	b := &c.bundling
	if len(b.pig) > 0 {
		list, err := packet.AppendAnswers(b.list[:0], b.pig)
		if err == nil && b.bundler.SetAnswers(list) == nil {
			b.pig = b.pig[:0]
		}
		b.list = list[:0]
	}
	buf := c.tx.bufs.get(b.packer.MaxPacketSize)
	out, err := b.bundler.Flush(*buf)
	if a := b.bundler.AEAD; a != nil {
		c.sealedAEAD(r, a, err)
	}
	if err != nil {
		c.tx.bufs.put(buf)
		c.packFailed(r, err)
		b.bundler.Reset(h)
		for _, m := range ms { // their timers try again
			if m.bundled {
				m.redo.restart(c.now)
				c.wake.retime(m)
			}
		}
		return
	}
	c.transmit(out, buf, r.ha, h, nil)
	again := false
	seq := r.nextSeq()
	for _, m := range ms {
		if m.bundled {
			again = again || m.retry
			m.sent(c, seq)
		}
	}
	if again { // a packet sent again, if only in part
		c.stats.retransmit()
		r.retransmits++
	}
}

// sendAlone sends a message queued for a bundle by itself.
func (m *messenger) sendAlone(c *Core) {
	if err := m.alone(c); err != nil {
		c.removeTxn(m.r, m)
		m.finish(c, err)
		return
	}
	m.burst(c)
}

// sent records that a bundle, datagram seq, carried the message.
func (m *messenger) sent(c *Core, seq uint32) {
	m.lastSeg, m.current = 0, 1
	c.timeRequest(&m.sentAt, m.r.ha, m.retry)
	m.resent = m.resent || m.retry
	m.retry = false
	c.transmitted(m, seq)
	m.redo.restart(c.now)
	c.wake.retime(m)
}

// receiveBundled takes a bundle or an answers packet from r, authenticated
// and routed (handle).
func (c *Core) receiveBundled(p *rxPacket, r *remote) {
	h := &p.Head
	if !r.added || !c.bundles(r) || h.TransactionKind != codec.TransactionKindMessage {
		c.stats.drop(dropBundleUnnegotiated)
		return
	}
	if h.PacketKind == codec.PacketKindAnswers {
		c.receiveAnswers(p, r)
		return
	}
	rs, ok := c.openBundle(p, r)
	if !ok {
		return
	}
	b := &c.bundling
	// The answers are of our transactions: of our session, which the
	// bundle's head (of its sender's session) does not name.
	live := c.answered(r, r.sid, rs) > 0
	b.own, b.owing = nil, 0
	for i := range b.parsed.Entries {
		b.owing += len(b.parsed.Entries[i].Plain)
	}
	for i := range b.parsed.Entries {
		live = c.bundledMessage(p, r, &b.parsed.Entries[i]) || live
	}
	// The messages hold their memory now.
	b.own = nil
	if live { // not only repeats, which could hide a remote gone: it is there
		c.heard(r)
		c.refresh(r, yes)
	}
}

// receiveAnswers takes an answers packet from r: the dones of our
// messages.
func (c *Core) receiveAnswers(p *rxPacket, r *remote) {
	b := &c.bundling
	h := &p.Head
	rs, err := packet.ParseAnswers(b.ranges[:0], p.Coat)
	if err != nil || !h.Correspondent() {
		c.stats.drop(dropAnswers)
		return
	}
	b.ranges = rs[:0]
	if c.answered(r, h.SessionID, rs) > 0 {
		c.heard(r) // the answer of a live transaction: it is there
	}
}

// openBundle checks and opens a bundle from r into c.bundling.parsed and
// returns the answers it carries; false after dropping it (or nacking its
// entries, when r is not allowed).
func (c *Core) openBundle(p *rxPacket, r *remote) ([]packet.AnswerRange, bool) {
	b := &c.bundling
	h := &p.Head
	if h.Correspondent() || h.Segment() || h.SegmentCount > 1 {
		c.stats.drop(dropBundle)
		return nil, false
	}
	if h.CoatKind != r.coatKind() {
		c.stats.drop(dropCoatDowngrade)
		return nil, false
	}
	if err := packet.ParseBundle(p.Coat, &b.parsed); err != nil {
		c.stats.drop(dropBundle)
		return nil, false
	}
	if !r.allowed || r.coat == nil {
		// As a lone message would be: each entry is nacked.
		for _, e := range b.parsed.Entries {
			eh := entryHead(p, &e)
			c.replyStaleTo(&eh, p.from, r, codec.PacketKindNack)
		}
		return nil, false
	}
	var coat packet.Coat = r.coat // with an AEAD coat, handle opened the packet whole
	if r.aead() != nil {
		coat = nil
	}
	plain, err := b.parsed.Open(b.plain[:0], coat)
	if err != nil {
		if errors.Is(err, packet.ErrBundlePayload) {
			c.stats.drop(dropBundle)
		} else {
			c.stats.drop(errDrop(err))
		}
		return nil, false
	}
	b.plain = plain[:0]
	var rs []packet.AnswerRange
	if len(b.parsed.Answers) > 0 {
		if rs, err = packet.ParseAnswers(b.ranges[:0], b.parsed.Answers); err != nil {
			c.stats.drop(dropAnswers)
			return nil, false
		}
		b.ranges = rs[:0]
	}
	return rs, true
}

// answered takes the answers rs of r to our transactions of session si,
// and returns how many were of live ones. Each done ends its messenger as
// a done packet would (done), the remote refreshed at the first and what
// waits started after the last (not at each).
func (c *Core) answered(r *remote, si uint32, rs []packet.AnswerRange) (live int) {
	dones := 0
	for _, g := range rs {
		for k := range g.Count {
			m, _ := r.txn(txnKey{si: si, ti: g.First + k}).(*messenger)
			switch {
			case m == nil:
				c.stats.drop(dropStaleAnswer) // done before, or never ours
			case g.Kind == codec.PacketKindDone:
				live++
				m.sample(c)
				if dones++; dones == 1 {
					c.refresh(r, yes)
				}
				m.doneOnly(c)
			default: // an ack: the message arrived, its done may take a while
				live++
				m.acked = true
				m.sample(c)
			}
		}
	}
	if dones > 0 {
		c.startHeld(r)
	}
	return live
}

// ownCopy copies plain, a new entry's, into the memory the bundle being
// received gives its entries (bundling.own), capped so that an append to
// it cannot reach the next entry's.
func (c *Core) ownCopy(plain []byte) []byte {
	b := &c.bundling
	if b.own == nil {
		b.own = make([]byte, 0, b.owing)
	}
	start := len(b.own)
	b.own = append(b.own, plain...)
	return b.own[start:len(b.own):len(b.own)]
}

// entryHead is the head entry e of bundle p would have as a lone message.
func entryHead(p *rxPacket, e *packet.BundleEntry) codec.Head {
	h := p.Head
	h.PacketKind, h.TransactionID, h.Flags, h.BodyKind = codec.PacketKindMessage, e.TI, e.Flags, e.BodyKind
	return h
}

// bundledMessage takes entry e of bundle p from r as a lone message packet
// of the same ti would be taken (correspond, messengent.message), and
// reports whether it was new (no repeat).
func (c *Core) bundledMessage(p *rxPacket, r *remote, e *packet.BundleEntry) bool {
	eh := entryHead(p, e)
	switch r.window.state(e.TI) {
	case replayUsed:
		c.stats.drop(dropReplayed)
		c.replyStaleTo(&eh, p.from, r, codec.PacketKindDone)
		return false
	case replayRefused:
		c.stats.drop(dropReplayed)
		c.replyStaleTo(&eh, p.from, r, codec.PacketKindNack)
		return false
	case replayTooOld:
		c.stats.drop(dropReplayTooOld)
		c.replyStaleTo(&eh, p.from, r, codec.PacketKindNack)
		return false
	}
	if t := r.txn(txnKey{rf: true, si: eh.SessionID, ti: e.TI}); t != nil {
		if m, ok := t.(*messengent); !ok || !m.whole {
			c.stats.drop(dropBundleEntryBusy) // a segmented message of that ti
		}
		return false // else whole already, waiting to be delivered
	}
	if eh.Again() {
		c.stats.drop(dropStaleMessage)
		c.replyStaleTo(&eh, p.from, r, codec.PacketKindNack)
		return false
	}
	msg, id, later, err := c.decodeMessage(r, e.BodyKind, c.ownCopy(e.Plain))
	// Most entries are delivered (or refused) at once: their messengent
	// ends within opened, and needs neither memory of its own nor a place
	// in r's tables. One that waits (for room to deliver) moves to its own; one
	// for the decoder has its own from the start (its Decode points to it).
	b := &c.bundling
	m := &b.lone
	if later {
		m = new(messengent)
	}
	*m = messengent{r: r, si: eh.SessionID, ti: e.TI, ck: eh.CoatKind, fk: eh.FootKind, redo: r.messageRedo(),
		first: c.now}
	m.timeout = expiry(earliest(time.Time(after(c.now, c.cfg.MessageTimeout)), c.now.Add(maxReassemblyAge)))
	m.opened(c, msg, id, later, err)
	if !m.ended {
		if m == &b.lone {
			m = new(messengent)
			*m = b.lone
		}
		c.addTxn(r, m)
	}
	b.lone = messengent{}
	return true
}
