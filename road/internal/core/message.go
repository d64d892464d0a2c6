package core

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Message (tk=0, §8.5): the body is serialized, sealed once with the
// session's coat and sent whole or in segments, each signed. In a session
// with an AEAD coat the body is cut first and each segment sealed in its
// own packet, under a new counter every time it is sent (aead.go). The
// receiver asks for what it misses (resend), acknowledges bursts (ack) and
// ends with done.
//
//	messenger                        messengent
//	  segments…(wf on the last) ───▶   reassembles
//	  ◀── resend{misseds} / ack(sn)    (when wf arrives and it is not whole)
//	  missed segments (af) ────────▶
//	  ◀── done                         delivers

// maxMisseds is the most segment numbers one resend carries (the reference's
// MAX_MISSEDS_RESEND).
const maxMisseds = 64

// maxReassemblyAge is the longest a message we receive may take, from its
// first packet, whatever MessageTimeout says (also when it says never).
const maxReassemblyAge = 10 * time.Minute

// Segment flags the messenger keeps per segment, as the reference keeps them
// on its packets.
const (
	segWait  = 1 << iota // wf was set on it
	segAgain             // af was set on it
)

func (m *messenger) orderLinks() *links[*messenger] { return &m.sendLinks }

// onePacket reports whether the message travels in one packet, from the
// lengths of its envelope and body (plainLen). One whose coat leaves room
// for the largest head any codec writes (codec.MaxHeadSize) does, and one
// at least a packet long does not: for neither is a head encoded, as
// Segments encodes one to measure it. The head is built in c.tx.head, not
// one of its own that would escape.
func (m *messenger) onePacket(c *Core) bool {
	r := m.r
	h := &c.tx.head
	*h = m.head(c, 0, 0)
	h.FootKind = codec.FootKindNaCl
	pk := c.packerFor(r, h)
	plain := m.plainLen()
	a := r.aead()
	n := plain + packet.AEADOverhead
	if a == nil {
		n = plain + r.coat.Overhead() + pk.Foot.Size()
	}
	switch {
	case pk.MaxPacketSize > 0 && codec.MaxHeadSize+n <= pk.MaxPacketSize: // with any head, one packet
		return true
	case pk.MaxPacketSize > 0 && plain >= pk.MaxPacketSize: // with any head, more than one
		return false
	}
	var count int
	var err error
	if a != nil {
		_, count, err = pk.SegmentsAEAD(h, a, plain)
	} else {
		_, count, err = pk.Segments(h, plain+r.coat.Overhead())
	}
	return err == nil && count == 1
}

// alone seals the message and plans its segments, to send it by itself.
func (m *messenger) alone(c *Core) error {
	r := m.r
	var err error
	mids := r.prof != nil && r.prof.mids
	m.aead = r.aead()
	m.prefix = nil
	switch {
	case m.aead != nil && mids:
		m.coat, m.prefix = m.body, packet.AppendMessageID(m.env[:0], m.id, nil)
	case m.aead != nil:
		m.coat = m.body // sealed packet by packet
	case mids:
		m.coat, err = sealWithID(r.coat, m.id, m.body)
	default:
		m.coat, err = r.coat.Seal(nil, m.body)
	}
	if err != nil {
		return err
	}
	m.bundled = false
	h := m.head(c, 0, 0)
	h.FootKind = codec.FootKindNaCl
	pk := c.packerFor(r, &h)
	if m.aead != nil {
		m.segSize, m.count, err = pk.SegmentsAEAD(&h, m.aead, m.coatLen())
	} else {
		m.segSize, m.count, err = pk.Segments(&h, len(m.coat))
	}
	if err != nil {
		return err
	}
	m.flag1 = [1]uint8{}
	if m.flags = m.flag1[:]; m.count > 1 {
		m.flags = make([]uint8, m.count)
	}
	m.redo = m.freshRedo()
	return nil
}

// plainLen is the length of what plaintext appends.
func (m *messenger) plainLen() int {
	if m.r.prof != nil && m.r.prof.mids {
		return len(packet.AppendMessageID(m.env[:0], m.id, nil)) + len(m.body)
	}
	return len(m.body)
}

// plaintext appends what the message's coat seals to dst: its id envelope
// (to a peer that negotiated message ids) and its body.
func (m *messenger) plaintext(dst []byte) []byte {
	if m.r.prof != nil && m.r.prof.mids {
		return packet.AppendMessageID(dst, m.id, m.body)
	}
	return append(dst, m.body...)
}

func (m *messenger) head(c *Core, pk codec.PacketKind, flags uint8) codec.Head {
	h := c.outHead(codec.TransactionKindMessage, pk, m.r.nuid, m.r.fuid, m.si, m.ti, false)
	h.BodyKind, h.CoatKind = m.bk, m.r.coatKind()
	h.SetWait(flags&segWait != 0)
	h.SetAgain(flags&segAgain != 0)
	return h
}

// sendSeg packs and sends segment i with its current flags, in a pooled
// buffer, and keeps a copy of its bytes in last (whose memory the
// messenger reuses: one allocation per message, not per packet).
func (m *messenger) sendSeg(c *Core, i int, again bool) {
	h := &c.tx.head
	*h = m.head(c, codec.PacketKindMessage, m.flags[i])
	h.FootKind = codec.FootKindNaCl
	pk := c.packerFor(m.r, h)
	var sign *packet.NaClFoot
	if m.aead == nil { // an aead packet has no foot
		sign = c.signLater(&pk)
	}
	buf := c.tx.bufs.get(pk.MaxPacketSize)
	var b []byte
	var err error
	if m.aead != nil {
		b, err = pk.PackSegmentAEAD(*buf, h, m.aead, m.prefix, m.coat, i, m.segSize, m.count)
		c.sealedAEAD(m.r, m.aead, err)
	} else {
		b, err = pk.PackSegment(*buf, h, m.coat, i, m.segSize, m.count)
	}
	if err != nil {
		c.tx.bufs.put(buf)
		c.stats.drop(dropPackError)
		return
	}
	if again {
		c.stats.retransmit()
		m.r.retransmits++
		m.resent = true
	}
	c.transmit(b, buf, m.r.ha, h, sign)
	c.transmitted(m, m.r.nextSeq())
	if m.aead == nil {
		m.last, m.lastSign = append(m.last[:0], b...), sign
	}
	m.lastSeg = i
	c.timeRequest(&m.sentAt, m.r.ha, again)
	m.redo.restart(c.now)
	c.wake.retime(m)
}

// sample gives the remote's RTT estimate the time since the last packet,
// unless it was sent again.
func (m *messenger) sample(c *Core) { c.timedAnswer(m.r, &m.sentAt, false) }

// burst sends the next BurstSize segments (all when 0), wf on the last.
func (m *messenger) burst(c *Core) {
	if !m.r.allowed {
		c.removeTxn(m.r, m)
		m.finish(c, ErrNotAllowed)
		return
	}
	n := m.count - m.current
	if b := c.cfg.BurstSize; b > 0 {
		n = min(n, b)
	}
	if n <= 0 {
		return
	}
	m.flags[m.current+n-1] |= segWait
	for range n {
		m.sendSeg(c, m.current, false)
		m.current++
	}
}

func (m *messenger) receive(c *Core, p *rxPacket) {
	r := m.r
	switch p.Head.PacketKind {
	case codec.PacketKindAck:
		m.acked = true
		m.sample(c)
		c.refresh(r, yes)
		if len(m.misseds) > 0 {
			m.sendMisseds(c)
			return
		}
		next := int(p.Head.SegmentNumber) + 1
		if m.current > next {
			// Those from next on go again: a repeat once all went.
			m.repeated = m.repeated || m.current >= m.count
			m.current = next
		}
		if m.current < m.count {
			m.burst(c)
		}
	case codec.PacketKindResend:
		m.acked = true
		m.sample(c)
		c.refresh(r, yes)
		misseds, err := parseMisseds(p, r)
		if err != nil {
			c.stats.drop(dropResendBody)
			return
		}
		for _, s := range misseds {
			if s < 0 || s >= m.count {
				c.stats.drop(dropResendRange)
				return
			}
			if !slices.Contains(m.misseds, s) {
				m.misseds = append(m.misseds, s)
			}
		}
		m.sendMisseds(c)
	case codec.PacketKindDone:
		m.done(c)
	case codec.PacketKindNack:
		if m.repeated && !p.Head.Wait() {
			// The answer to a repeat of a message the receiver finished,
			// its done lost: the reference's receiver nacks a message
			// packet of a transaction it finished (§8.5) where raet-go
			// answers done; a refusal (of a receiver that cannot take it)
			// has wf, copied from the packet that started its messengent,
			// which a finished one's stale nack never has.
			m.done(c)
			return
		}
		c.refresh(r, yes)
		c.removeTxn(r, m)
		m.finish(c, ErrRejected)
		c.startHeld(r)
	}
}

// done ends the messenger: the remote said done.
func (m *messenger) done(c *Core) {
	m.sample(c)
	c.refresh(m.r, yes)
	m.doneOnly(c)
	c.startHeld(m.r)
}

// doneOnly ends the messenger as done does, but for what the caller does
// once for many (answered): refresh the remote, start what waits.
func (m *messenger) doneOnly(c *Core) {
	c.answeredSend(m)
	c.removeTxn(m.r, m)
	c.stats.rtt(c.now.Sub(m.started))
	m.finish(c, nil)
}

// sendMisseds sends the segments asked for again: af on all, wf only on the
// last of the burst.
func (m *messenger) sendMisseds(c *Core) {
	n := len(m.misseds)
	if b := c.cfg.BurstSize; b > 0 {
		n = min(n, b)
	}
	batch := m.misseds[:n]
	m.repeated = m.repeated || m.current >= m.count
	for i, s := range batch {
		m.flags[s] |= segAgain
		if i == n-1 {
			m.flags[s] |= segWait
		} else {
			m.flags[s] &^= segWait
		}
		m.sendSeg(c, s, true)
	}
	m.misseds = append(m.misseds[:0], m.misseds[n:]...)
}

func (m *messenger) tick(c *Core) {
	if m.timeout.due(c.now) {
		c.removeTxn(m.r, m)
		m.finish(c, ErrTimeout)
		return
	}
	if m.bundled {
		if !m.lostAt.IsZero() && !c.now.Before(m.lostAt) {
			m.lost(c) // found lost by a later message's done (rack.go)
			c.detectLost(m.r)
			return
		}
		if m.redo.due(c.now) && !m.queued {
			// Lost, or its done was: into the bundles of this moment again.
			m.backoff(c)
			c.wake.retime(m)
			m.retry = true
			c.queue(m)
		}
		return
	}
	if !m.lostAt.IsZero() && !c.now.Before(m.lostAt) {
		// Found lost by a later message's done (rack.go).
		m.lost(c)
		c.detectLost(m.r)
		return
	}
	if !m.redo.due(c.now) || m.lastSeg < 0 {
		return
	}
	m.backoff(c)
	c.wake.retime(m)
	m.sendAgain(c)
}

// sendAgain sends the message's last packet again (its timer ran out, or
// a later message's done shows it lost): with af, or unchanged.
func (m *messenger) sendAgain(c *Core) {
	m.repeated = m.repeated || m.current >= m.count
	if m.acked && m.flags[m.lastSeg]&segAgain == 0 {
		m.flags[m.lastSeg] |= segAgain
		m.sendSeg(c, m.lastSeg, true)
		return
	}
	if m.aead != nil {
		m.sendSeg(c, m.lastSeg, true) // sealed again: a counter is never sent twice
		return
	}
	// Unchanged: no new signature under load (but for a foot left to sign,
	// which comes out the same).
	if c.resend(m.last, m.r.ha, m.lastSign) {
		m.r.retransmits++
	}
	m.sentAt, m.resent = time.Time{}, true
	m.redo.restart(c.now)
	c.wake.retime(m)
	c.transmitted(m, m.r.nextSeq())
}

// backoff backs its timer off, from the remote's estimate when that came
// down since the message started (timed since: messageRedo).
func (m *messenger) backoff(c *Core) {
	m.redo.rebase(m.freshRedo())
	m.redo.backoff(c.now)
}

// freshRedo is the timer the message would start with now.
func (m *messenger) freshRedo() redo {
	if m.count > 1 {
		return m.r.segmentedRedo()
	}
	return m.r.messageRedo()
}

// abort ends the messenger when its session went stale; the core saves it
// to send again after the next allow.
func (m *messenger) abort(c *Core, pk codec.PacketKind) {
	h := &c.tx.head
	*h = m.head(c, pk, 0)
	c.send(m.r, h, nil, m.r.ha)
}

// finish reports the outcome to Send.
func (m *messenger) finish(c *Core, err error) {
	c.ended(m)
	if err == nil {
		c.stats.c.MessagesOut++
	} else {
		c.stats.c.MessageFails++
		err = &TxnError{Txn: "message", Remote: m.r.name, Err: err}
	}
	if m.result != nil {
		m.result.MessageDone(err)
		m.result = nil
	}
	m.release()
	if m.in == nil && !m.queued {
		c.spares.retire(m) // a spare at the next Deadline
	}
}

// release gives the body's pooled buffer back once the message has its
// outcome. Nothing reads the body after: each packet sealed it, or a piece
// of it, into a buffer of its own (a bundle, a segment, the copy in last),
// and the messenger has left its remote's transactions, or they are being
// dropped whole (forget, Shutdown). The one reader left would be the flush
// of this moment, when it is still queued for a bundle (which does not
// send one that left the transactions): its buffer is then left to the
// collector. A messenger made stale by a new session hands body and buf to
// its successor (startHeld) without an outcome, so each buffer is given
// back once.
func (m *messenger) release() {
	if m.buf == nil || m.queued {
		return
	}
	if m.aead != nil {
		m.coat = nil // the body itself (alone)
	}
	bodies.put(m.buf)
	m.body, m.buf = nil, nil
}

// parseMisseds reads a resend body: {"misseds": [n, ...]}.
func parseMisseds(p *rxPacket, r *remote) ([]int, error) {
	body, err := openControl(p, r)
	if err != nil {
		return nil, err
	}
	list, ok := body["misseds"].([]any)
	if !ok {
		return nil, fmt.Errorf("no misseds list")
	}
	out := make([]int, 0, len(list))
	for _, v := range list {
		n, ok := intValue(v)
		if !ok || n < 0 || n > 0xffff {
			return nil, fmt.Errorf("bad segment number %v", v)
		}
		out = append(out, int(n))
	}
	return out, nil
}

// --- messengent --------------------------------------------------------------

func (c *Core) startMessengent(p *rxPacket, r *remote) {
	redo := r.messageRedo()
	if p.Head.SegmentCount > 1 || p.Head.Segment() {
		redo = r.segmentedRedo()
	}
	m := &messengent{r: r, si: p.Head.SessionID, ti: p.Head.TransactionID, wait: p.Head.Wait(),
		ck: p.Head.CoatKind, fk: p.Head.FootKind, redo: redo}
	m.message(c, p)
}

// head is the head of its reply of kind pk (segment number sn), in
// c.tx.head.
func (m *messengent) head(c *Core, pk codec.PacketKind, sn int) *codec.Head {
	h := &c.tx.head
	*h = c.outHead(codec.TransactionKindMessage, pk, m.r.nuid, m.r.fuid, m.si, m.ti, true)
	h.BodyKind, h.CoatKind, h.FootKind = c.cfg.BodyKind, m.ck, m.fk
	h.SetWait(m.wait)
	h.SegmentNumber = uint16(sn)
	return h
}

func (m *messengent) send(c *Core, pk codec.PacketKind, body []byte, sn int) {
	if c.send(m.r, m.head(c, pk, sn), body, m.r.ha) {
		m.redo.restart(c.now)
		c.wake.retime(m)
	}
}

// remove ends the transaction, delivered or (refused) not.
func (m *messengent) remove(c *Core, refused bool) {
	m.end(c)
	c.used(m.r, m.si, m.ti, refused)
}

// end ends m, leaving its transaction id unused (remove uses it).
func (m *messengent) end(c *Core) {
	c.unwait(m)
	m.ended = true
	c.removeTxn(m.r, m)
	c.reasm.Drop(m.msgKey())
}

// nack refuses the message, with wf: a refusal, not the stale nack of a
// finished transaction (see messenger.receive).
func (m *messengent) nack(c *Core) {
	m.wait = true
	m.send(c, codec.PacketKindNack, nil, 0)
	m.remove(c, true)
}

func (m *messengent) abort(c *Core, pk codec.PacketKind) { m.nack(c) }

func (m *messengent) receive(c *Core, p *rxPacket) {
	switch p.Head.PacketKind {
	case codec.PacketKindMessage:
		m.message(c, p)
	case codec.PacketKindNack:
		c.refresh(m.r, yes)
		m.remove(c, true) // the sender gave it up
	}
}

func (m *messengent) message(c *Core, p *rxPacket) {
	r := m.r
	if !r.allowed || r.coat == nil {
		m.nack(c)
		return
	}
	if m.whole {
		c.stats.c.Duplicates++
		return // whole already; waiting to deliver
	}
	h := &p.Head
	var whole []byte
	complete, progress := false, true
	if h.SegmentCount <= 1 && !h.Segment() {
		whole, complete = p.Coat, true
		if packet.IsAEAD(h.CoatKind) {
			// Opened into the datagram's buffer, which goes back after
			// Receive; the message keeps its body.
			whole = bytes.Clone(whole)
		}
	} else {
		var ok bool
		if whole, complete, progress, ok = m.segment(c, p); !ok {
			return
		}
	}
	if r.txn(m.key()) == nil {
		c.addTxn(r, m)
		m.first = c.now
	}
	if progress {
		// Only a new segment buys time: duplicates do not, and nothing
		// buys more than maxReassemblyAge from the first segment.
		m.timeout = expiry(earliest(time.Time(after(c.now, c.cfg.MessageTimeout)), m.first.Add(maxReassemblyAge)))
		c.wake.retime(m)
	}
	c.refresh(r, yes)
	m.wait = h.Wait()
	if complete {
		msg, id, later, err := c.openMessage(r, h.BodyKind, h.CoatKind, whole)
		m.opened(c, msg, id, later, err)
		return
	}
	if m.wait {
		m.askMore(c)
	}
}

// segment adds p, a segment of m, to the reassembly: whole is the message
// once complete, progress says the segment was new; false after dropping
// (or nacking) it.
func (m *messengent) segment(c *Core, p *rxPacket) (whole []byte, complete, progress, ok bool) {
	r, h := m.r, &p.Head
	m.highest = max(m.highest, int(h.SegmentNumber))
	fresh := r.txn(m.key()) == nil
	if fresh && c.reserved(m) {
		// The last free slot is kept for an older message (fair.go).
		c.reassemblyFull(r, packet.ErrRemoteQuota)
		return nil, false, false, false
	}
	evicted := c.reasm.Evicted()
	got, prog, err := c.reasm.Add(r.nuid, m.msgKey(), h, p.Coat)
	if n := c.reasm.Evicted() - evicted; n > 0 {
		c.stats.drops[dropReassemblyEvicted] += n
	}
	switch {
	case errors.Is(err, packet.ErrRemoteQuota), errors.Is(err, packet.ErrTooManyMessages), errors.Is(err, packet.ErrReassemblyMemory):
		// Out of room for now: drop it; the sender will send it again.
		c.reassemblyFull(r, err)
		if fresh {
			c.starve(m, err)
			return nil, false, false, false
		}
	case err != nil:
		c.stats.drop(dropSegment)
		m.nack(c)
		return nil, false, false, false
	default:
		c.fed(m)
	}
	if !prog && err == nil {
		c.stats.c.Duplicates++
	}
	return got, got != nil, prog, true
}

// opened takes the message once whole and opened (openMessage's outcome):
// it delivers it, hands its body to the decoder, or nacks it.
func (m *messengent) opened(c *Core, msg Message, id MsgID, later bool, err error) {
	if err != nil {
		c.stats.drop(errDrop(err))
		m.nack(c)
		return
	}
	m.pending, m.whole, m.id = msg, true, id
	if later {
		m.decoding = true
		m.dec = Decode{Kind: msg.Kind, Raw: msg.Raw, m: m}
		c.rx.decodes = append(c.rx.decodes, &m.dec)
		return
	}
	m.complete(c)
}

// reassemblyFull counts a segment dropped for want of reassembly room and
// logs it, at most once a minute per remote.
func (c *Core) reassemblyFull(r *remote, err error) {
	reason := dropReassemblyFull
	if errors.Is(err, packet.ErrRemoteQuota) {
		reason = dropReassemblyRemoteFull
	}
	c.stats.drop(reason)
	if c.now.UnixNano() < r.reasmWarned {
		return
	}
	r.reasmWarned = c.now.Add(time.Minute).UnixNano()
	c.log.Warn("raet: segments dropped, no reassembly room (logged once a minute per remote)",
		"remote", r.name, "reason", reason, "err", err)
}

// askMore asks for the missing segments, or acknowledges the highest seen.
func (m *messengent) askMore(c *Core) {
	missing, high := c.reasm.Missing(nil, m.msgKey())
	if high < 0 {
		// Evicted, or refused for room so far: nothing is stored. An ack
		// would tell the sender that all came up to the highest; ask for
		// the first segments again instead (the acks that follow their
		// burst ask for the rest).
		m.lowest = 0
		for s := range min(m.highest+1, maxMisseds) {
			missing = append(missing, uint16(s))
		}
	}
	var misseds []int
	for _, s := range missing {
		if int(s) >= m.lowest {
			misseds = append(misseds, int(s))
		}
	}
	if len(misseds) == 0 {
		m.send(c, codec.PacketKindAck, nil, m.highest)
		return
	}
	m.lowest = misseds[0]
	for len(misseds) > 0 {
		n := min(len(misseds), maxMisseds)
		body, err := c.marshal(packet.OrderedMap{{Key: "misseds", Value: misseds[:n]}})
		if err != nil {
			return
		}
		m.send(c, codec.PacketKindResend, body, 0)
		misseds = misseds[n:]
	}
}

// admitWaiting delivers the messages waiting for room, oldest first, while
// the receive queue has room.
func (c *Core) admitWaiting() {
	for c.rx.roomWaits.len() > 0 && c.rx.delivery.len() < c.cfg.ReceiveQueue {
		w := c.rx.roomWaits.items()[0]
		c.rx.roomWaits.drop(1)
		if m := w.waiting(); m != nil {
			c.unwait(m)
			m.complete(c)
		}
	}
}

// waitForRoom puts m at the end of c.rx.roomWaits, or, when the line is full
// or m's remote holds its share of it, forgets m unanswered and its
// transaction id unused, so that the sender's next send of it is taken as
// new: what waits is bounded (as many as the receive queue holds, at least
// minWaits) and one remote does not fill the line for the others (a
// quarter of it, at least minRemoteWaits). Those that ended while waiting
// leave their entries behind until reached; when the entries double since
// the last sweep, it sweeps them out, so that they stay bounded by twice
// those waiting (however long nobody takes deliveries).
func (c *Core) waitForRoom(m *messengent) {
	if c.rx.roomWaiting >= max(minWaits, c.cfg.ReceiveQueue) || int(m.r.roomWaits) >= max(minRemoteWaits, c.cfg.ReceiveQueue/4) {
		c.stats.drop(dropReceiveWaitsFull)
		m.end(c)
		return
	}
	c.stats.drop(dropReceiveQueueFull)
	if c.rx.roomWaits.len() >= c.rx.roomSweep {
		c.sweepRoomWaits()
	}
	m.roomWait = true
	m.r.roomWaits++
	c.rx.roomWaiting++
	c.rx.roomWaits.push(roomWait{m.r, m.key()})
}

// sweepRoomWaits drops the entries of c.rx.roomWaits whose messages no
// longer wait, keeping the others in order.
func (c *Core) sweepRoomWaits() {
	all := c.rx.roomWaits.items()
	live := all[:0]
	for _, w := range all {
		if w.waiting() != nil {
			live = append(live, w)
		}
	}
	clear(all[len(live):])
	c.rx.roomWaits = fifo[roomWait]{s: live}
	c.rx.roomSweep = max(minRoomSweep, 2*c.rx.roomWaits.len())
}

// unwait takes m out of the count of those waiting for room (its entry
// stays in inbox.roomWaits until reached or swept).
func (c *Core) unwait(m *messengent) {
	if m.roomWait {
		m.roomWait = false
		m.r.roomWaits--
		c.rx.roomWaiting--
	}
}

const (
	// minRoomSweep is the fewest entries of inbox.roomWaits that are swept.
	minRoomSweep = 64
	// minWaits and minRemoteWaits are the fewest messages that may wait
	// for room in the receive queue, in all and from one remote, however
	// short the queue.
	minWaits, minRemoteWaits = 64, 16
)

// complete delivers the message and sends done, unless the receive queue is
// full: then it waits in c.rx.roomWaits, saying nothing (the sender resends,
// and it is ignored while whole), until Delivered frees room, or its
// timeout nacks it. While any waits the queue is full (admitWaiting fills
// it before it stops), so one that comes later waits behind them.
func (m *messengent) complete(c *Core) {
	if m.id.Seq != 0 && m.r.mids.repeated(m.id, c.now) {
		// Delivered before, in this session or an earlier one (a sender
		// restarted on its durable queue): done, and not again.
		c.stats.drop(dropMessageIDRepeated)
		m.done(c)
		m.remove(c, false)
		return
	}
	if c.rx.delivery.len() >= c.cfg.ReceiveQueue {
		c.waitForRoom(m)
		return
	}
	if m.id.Seq != 0 {
		m.r.mids.delivered(m.id, c.now)
	}
	c.rx.delivery.push(m.pending)
	c.stats.c.MessagesIn++
	m.done(c)
	m.remove(c, false)
}

// done answers the message done: in the answers of this moment to a
// session that bundles (bundle.go), else in a done packet.
func (m *messengent) done(c *Core) {
	if c.bundles(m.r) {
		c.answer(m.r, m.si, m.ti)
		return
	}
	// Kept, to send again unchanged should the message come again.
	c.sendAnswer(m.r, m.head(c, codec.PacketKindDone, 0), m.r.ha)
}

func (m *messengent) tick(c *Core) {
	if m.timeout.due(c.now) {
		m.nack(c)
		return
	}
	if !m.redo.due(c.now) {
		return
	}
	m.redo.backoff(c.now)
	c.wake.retime(m)
	if m.decoding {
		return // the decoder answers, or the timeout nacks
	}
	if m.whole {
		return // waiting for room: Delivered delivers it
	}
	m.askMore(c)
}

// decoded takes the outcome of decoding the pending body off the owner
// goroutine: deliver it, or nack a body that does not decode.
func (m *messengent) decoded(c *Core, body map[string]any, err error) {
	if !m.decoding || m.r.txn(m.key()) != txn(m) {
		return // ended meanwhile (timeout, nack)
	}
	m.decoding = false
	if err != nil {
		c.stats.drop(errDrop(err))
		m.nack(c)
		return
	}
	m.pending.Body = body
	m.complete(c)
}

// openMessage opens a whole coat and decodes it (decodeMessage).
func (c *Core) openMessage(r *remote, bk codec.BodyKind, ck codec.CoatKind, coat []byte) (msg Message, id MsgID, later bool, err error) {
	plain, err := openCoat(r, ck, coat)
	if err != nil {
		return msg, id, false, err
	}
	return c.decodeMessage(r, bk, plain)
}

// decodeMessage takes a message's id (from a peer that negotiated message
// ids) from its opened coat plain, which the message keeps, and decodes
// its body, or, for a body of a BatchSerializer's kind, leaves that to the
// decoder goroutine (later).
func (c *Core) decodeMessage(r *remote, bk codec.BodyKind, plain []byte) (msg Message, id MsgID, later bool, err error) {
	if r.prof != nil && r.prof.mids {
		if id, plain, err = packet.SplitMessageID(plain); err != nil {
			return msg, id, false, &packet.BodyError{Kind: bk, Op: "unmarshal", Err: fmt.Errorf("%w: %w", packet.ErrMalformedBody, err)}
		}
	}
	msg = Message{From: r.name, Kind: bk, Raw: plain}
	if bk == codec.BodyKindRaw {
		return msg, id, false, nil
	}
	ser, err := c.cfg.Serializers.Lookup(bk)
	if err != nil {
		return Message{}, id, false, err
	}
	if _, ok := ser.(packet.BatchSerializer); ok && c.cfg.DecodeLater && len(plain) > 0 {
		return msg, id, true, nil
	}
	var body map[string]any // of its own: msg does not escape to the serializer
	if err := ser.Unmarshal(plain, &body); err != nil {
		return Message{}, id, false, err
	}
	msg.Body = body
	return msg, id, false, nil
}

// bundles reports whether r's session bundles. A bundle's table is in the
// clear, authenticated by the packet's foot (MAC or Ed25519), or, with an
// AEAD coat, sealed with the rest of the bundle.
func (c *Core) bundles(r *remote) bool { return r.prof != nil && r.prof.bdl }

// answer owes r a done for its transaction (si, ti), in the answers of
// this moment.
func (c *Core) answer(r *remote, si, ti uint32) {
	c.bundling.answers = append(c.bundling.answers, owed{r: r, si: si, ti: ti})
}

// startMessenger sends a serialized body with its id to r. result receives
// the outcome. A message that fits one packet of a session that bundles
// waits for the flush of this moment (bundle.go); any other is sealed and
// sent now, whole or in segments. It returns the messenger, under way
// unless it ended at once (m.in is nil then).
func (c *Core) startMessenger(r *remote, body []byte, buf *[]byte, bk codec.BodyKind, id MsgID, result Waiter, started time.Time) *messenger {
	m, ok := c.spares.messengers.Get()
	if !ok {
		m = new(messenger)
	}
	*m = messenger{r: r, body: body, buf: buf, bk: bk, id: id, result: result, started: started, lastSeg: -1}
	if !r.allowed || r.coat == nil {
		m.finish(c, ErrNotAllowed)
		return m
	}
	m.si, m.ti = r.sid, r.nextTid()
	m.timeout = after(c.now, c.cfg.MessageTimeout)
	m.redo = r.messageRedo()
	if c.bundles(r) && m.onePacket(c) {
		m.bundled, m.count, m.flags = true, 1, m.flag1[:]
		c.addTxn(r, m)
		c.queue(m)
		return m
	}
	if err := m.alone(c); err != nil {
		m.finish(c, err)
		return m
	}
	c.addTxn(r, m)
	m.burst(c)
	return m
}

// queue puts m in the bundles of this moment.
func (c *Core) queue(m *messenger) {
	m.queued = true
	c.wake.retime(m)
	c.bundling.queued = append(c.bundling.queued, m)
}

// opens reports whether a message may start now to r (on ids; the room of
// a segmented one is checked once it is cut, in began).
func (c *Core) opens(r *remote) bool {
	w := r.win
	if w == nil {
		return true
	}
	oldest, ok := w.oldest(r)
	if ok && r.tid+1-oldest >= sendSpan {
		return false
	}
	cfg := c.reasm.Config()
	return w.large == 0 || (w.large < cfg.MaxPerRemote && w.charge < cfg.MaxBufferedPerRemote)
}

// begin starts a message to r now if the window lets it (and nothing
// waits before it), or holds it in r.saved until it does.
// buf is body's pooled buffer, or nil (SendFor).
func (c *Core) begin(r *remote, body []byte, buf *[]byte, bk codec.BodyKind, id MsgID, result Waiter, started time.Time) {
	if r.allowed && r.coat != nil && (len(r.saved) > 0 || !c.opens(r)) {
		r.save(&messenger{r: r, body: body, buf: buf, bk: bk, id: id, result: result,
			started: started, timeout: after(c.now, c.cfg.MessageTimeout)})
		c.wake.touch(r)
		return
	}
	c.launch(r, body, buf, bk, id, result, started)
}

// launch starts a message to r and counts it in r's window.
func (c *Core) launch(r *remote, body []byte, buf *[]byte, bk codec.BodyKind, id MsgID, result Waiter, started time.Time) {
	if m := c.startMessenger(r, body, buf, bk, id, result, started); m.in == r {
		c.began(m)
	}
}

// began counts m, just started, in its remote's window.
func (c *Core) began(m *messenger) {
	r := m.r
	if r.win == nil {
		var ok bool
		if r.win, ok = c.spares.wins.Get(); !ok {
			r.win = &sendWindow{}
		}
	}
	w := r.win
	if w.head > 0 && 2*w.head >= len(w.started) {
		n := copy(w.started, w.started[w.head:])
		clear(w.started[n:])
		w.started, w.head = w.started[:n], 0
	}
	w.started = append(w.started, m.key())
	if !m.bundled && m.count > 1 {
		m.large = true
		w.large++
		w.charge += roomCharge(m)
	}
}

// ended takes m out of its remote's window; it may then let what waits go
// (startHeld, which the caller runs where the remote's transactions are
// not being walked).
func (c *Core) ended(m *messenger) {
	m.r.sendOrder.remove(m)
	w := m.r.win
	if w == nil || !m.large {
		return
	}
	m.large = false
	w.large--
	w.charge -= roomCharge(m)
}

// startHeld starts the messages waiting in r.saved, in order, while the
// window lets them and r is allowed (after an allow, those a new session
// made stale go again); it drops the window once nothing is under way.
func (c *Core) startHeld(r *remote) {
	for len(r.saved) > 0 && r.allowed && r.coat != nil && c.opens(r) {
		m := r.saved[0]
		r.saved[0] = nil
		r.saved = r.saved[1:]
		if len(r.saved) == 0 {
			r.dropSaved()
		}
		c.launch(r, m.body, m.buf, m.bk, m.id, m.result, m.started) // m's successor owns buf
	}
	if w := r.win; w != nil && w.large == 0 {
		if _, ok := w.oldest(r); !ok {
			r.win = nil
			if cap(w.started) <= spareWinRoom {
				*w = sendWindow{started: w.started[:0]}
				c.spares.wins.Put(w)
			}
		}
	}
}
