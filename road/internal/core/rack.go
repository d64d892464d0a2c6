package core

import (
	"net/netip"
	"time"
)

// Loss recovery within about one round trip (RFC 8985's RACK, RFC 9002's
// thresholds), on timers of the sender's own: the wire is the reference's.
//
// Each remote keeps its messages under way in the order of their last
// transmission (remote.sendOrder, a list through the messengers), each
// datagram numbered (messenger.seq; a bundle's entries share theirs). When a done ends a message, the
// newest transmission answered so far (remote.rackSeq) says that what
// went before it had time to come: an earlier message still under way is
// taken for lost (and sent again at once, its timer not backed off) when
// it went lossDelay (9/8 of the round trip) before now, or packetThreshold
// transmissions before the one answered; else a timer of its own
// (messenger.lostAt) looks again when lossDelay has passed. So a message
// whose packet or done was lost goes again about a round trip after it
// went, as soon as anything sent after it is answered; only the last of a
// burst, with nothing after it, waits for its retransmission timer, the
// probe (messageRedo, without a floor of its own: srtt + 4·rttvar + the
// receiver's answer delay). A path that only reorders (no loss) can make
// a message go twice; a link that keeps order never does. Only messages
// of one packet are in the order: a segmented one's receiver lists what
// it misses at each burst's last packet (resend), and its timers keep a
// floor (minSegmentedRedo).
//
// Each step of the walk either sends a message again (moving it to the
// tail) or stops, so a done costs O(1) amortized, whatever is in flight.

// seqBefore says whether transmission a went before b (numbers wrap).
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

// nextSeq numbers a datagram of messages to r: a bundle's entries share
// one, so that the packet threshold counts datagrams, as a path reorders
// them.
func (r *remote) nextSeq() uint32 {
	r.sendSeq++
	return r.sendSeq
}

// transmitted notes that m's packet went now, in datagram seq: it moves to
// the tail of its remote's send order, and its loss timer stops.
func (c *Core) transmitted(m *messenger, seq uint32) {
	r := m.r
	m.seq, m.xmit, m.lostAt = seq, c.now, time.Time{}
	if m.count > 1 {
		r.sendOrder.remove(m)
		return // a segmented message: its receiver's resends find its losses
	}
	r.sendOrder.last(m)
}

// answeredSend takes m's done, before m ends: it counts a retransmission
// of m that the done shows needless, and looks for the messages lost
// before m.
func (c *Core) answeredSend(m *messenger) {
	r := m.r
	if !r.sendOrder.has(m) {
		return // never sent (ended before its bundle went), or segmented
	}
	// A done that comes sooner after the copy than any round trip took
	// answers an earlier copy: the copy was not needed.
	if m.resent && r.rttMin > 0 && c.now.Sub(m.xmit) < time.Duration(r.rttMin)*time.Microsecond {
		c.stats.c.SpuriousRetransmits++
	}
	if seqBefore(r.rackSeq, m.seq) || r.rackSeq == 0 {
		r.rackSeq = m.seq
	}
	r.sendOrder.remove(m)
	c.detectLost(r)
}

// detectLost sends again, from the oldest, r's messages that went before
// the newest transmission answered and are lost by time or by count, and
// arms the loss timer of the first that is not yet.
func (c *Core) detectLost(r *remote) {
	delay := r.lossDelay()
	if delay == 0 {
		return
	}
	for m := r.sendOrder.head; m != nil && seqBefore(m.seq, r.rackSeq); m = r.sendOrder.head {
		at := m.xmit.Add(delay)
		if r.rackSeq-m.seq < packetThreshold && c.now.Before(at) {
			if !m.lostAt.Equal(at) {
				m.lostAt = at
				c.wake.retime(m)
			}
			return
		}
		if seq := m.seq; !m.lost(c) || m.seq == seq {
			// Nothing went now (it waits for this moment's bundles, or
			// had nothing to send): out of the order until it goes.
			r.sendOrder.remove(m)
		}
	}
}

// lossDelay is how long after a message went a later one's done makes it
// lost: 9/8 of the round trip (RFC 9002 §6.1.2), the larger of the
// smoothed and the latest; zero while the remote has no estimate.
func (r *remote) lossDelay() time.Duration {
	if r.srtt == 0 {
		return 0
	}
	rtt := time.Duration(max(r.srtt, r.rttLast)) * time.Microsecond
	return max(rtt*9/8, timerGranularity)
}

// lost sends m again now, found lost by detectLost: as its retransmission
// timer would, but not backed off (the path works: a later message was
// answered). It reports whether anything went (or waits for this
// moment's bundles).
func (m *messenger) lost(c *Core) bool {
	m.lostAt = time.Time{}
	c.wake.retime(m)
	if m.bundled {
		if m.queued {
			return false
		}
		m.retry = true
		c.queue(m)
		return true
	}
	if m.lastSeg < 0 {
		return false
	}
	m.sendAgain(c)
	return true
}

// used records that r's transaction ti of session si is over, done or (with
// refused) refused: the window remembers which while si is the remote's
// session.
func (c *Core) used(r *remote, si, ti uint32, refused bool) {
	if si == r.rsid {
		r.window.mark(ti, c.now, c.replayHold, refused)
	}
}

// timeRequest starts timing in *sent a request that goes to `to` now, or
// stops it (zero) when it went again or waits for the keep.
func (c *Core) timeRequest(sent *time.Time, to netip.AddrPort, again bool) {
	*sent = time.Time{}
	if _, held := c.heldFor(to); !again && !held {
		*sent = c.now
	}
}

// timedAnswer gives r's estimate the time since *sent, the request an answer
// came to, when it was timed (a request of the handshake's: seed), and
// stops timing it.
func (c *Core) timedAnswer(r *remote, sent *time.Time, seed bool) {
	if !sent.IsZero() {
		r.observeRTT(c.now.Sub(*sent), seed)
		*sent = time.Time{}
	}
}
