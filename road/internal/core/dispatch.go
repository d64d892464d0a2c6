package core

import (
	"errors"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Inbound dispatch: handle authenticates a packet (its foot, or its AEAD
// coat), route finds its remote, dispatch hands it to its transaction, and
// correspond starts the transaction it asks for (starters) or stale and
// replyStale answer what cannot be served.

// handle takes a datagram that was parsed (parseErr) and, when it has an
// Ed25519 foot, checked (fc; the reader goroutine checks them, so that no
// packet is verified twice nor on the owner goroutine).
//
// The rule it enforces: no state changes from a packet that is not
// authenticated. Every packet but a join must carry a foot that verifies
// with the keys of the remote it names (its long-term Ed25519 key, or the
// session's MAC key); anything else is dropped here. Join packets are
// unauthenticated by design (§8.2) and reach only join transactions, which
// never touch an established session (join.go).
func (c *Core) handle(p *rxPacket, parseErr error, fc *footCheck, ac *aeadCheck) {
	if parseErr != nil {
		c.stats.drop(errDrop(parseErr))
		return
	}
	h := &p.Head
	c.stats.in(h, len(p.Raw))
	if !c.authentic(p, fc, ac) {
		return
	}
	if h.Broadcast() {
		c.stats.drop(dropBroadcast)
		return
	}
	r := c.route(p)
	if r == nil {
		return
	}
	c.wake.touch(r)
	c.dispatch(p, r)
}

// authentic says whether p's foot (or its AEAD coat) authenticates it, as
// handle's rule asks; it drops p when not.
func (c *Core) authentic(p *rxPacket, fc *footCheck, ac *aeadCheck) bool {
	h := &p.Head
	if packet.IsAEAD(h.CoatKind) && h.FootKind != codec.FootKindNada {
		c.stats.drop(dropFootKind) // an AEAD coat is its own authentication
		return false
	}
	switch h.FootKind {
	case codec.FootKindNaCl:
		return c.signedBy(h, fc)
	case codec.FootKindMAC:
		return c.macedBy(p)
	case codec.FootKindNada:
		switch {
		case sessionSealed(h):
			return c.openAEAD(p, ac)
		case h.TransactionKind != codec.TransactionKindJoin:
			// The reference refuses unsigned messages (veritive) but takes
			// other unsigned kinds (§13); we take none: it sends none.
			c.stats.drop(dropUnsigned)
			return false
		}
		return true
	}
	c.stats.drop(dropFootKind)
	return false
}

// signedBy says whether the reader's check of h's Ed25519 foot (fc) holds
// with the key of the remote h names.
func (c *Core) signedBy(h *codec.Head, fc *footCheck) bool {
	r := c.roster.remotes[h.DestinationID]
	switch {
	case fc == nil || fc.key == nil || r == nil:
		c.stats.drop(dropVerifyUnknownKey)
		if r == nil {
			c.recall(h.DestinationID) // a forgotten remote: its next packet verifies
		}
		return false
	case !fc.ok:
		c.stats.drop(dropVerifyFailed)
		return false
	case [32]byte(r.verify) != *fc.key:
		c.stats.drop(dropVerifyStaleKey) // checked with keys replaced since
		return false
	}
	return true
}

// macedBy says whether p's MAC foot verifies with the session of the
// remote it names.
func (c *Core) macedBy(p *rxPacket) bool {
	r := c.roster.remotes[p.Head.DestinationID]
	if r == nil || r.prof == nil || r.prof.mac == nil {
		c.stats.drop(dropVerifyUnknownKey)
		if r == nil {
			c.recall(p.Head.DestinationID)
		}
		return false
	}
	if err := p.Verify(r.prof.mac); err != nil {
		c.stats.drop(errDrop(err))
		return false
	}
	return true
}

// dispatch hands an authenticated packet of r to its transaction, to the
// bundles, to stale (a correspondent's packet of a transaction we do not
// have) or to correspond (an initiator's of one we start).
func (c *Core) dispatch(p *rxPacket, r *remote) {
	h := &p.Head
	if h.PacketKind == codec.PacketKindBundle || h.PacketKind == codec.PacketKindAnswers {
		c.receiveBundled(p, r)
		return
	}
	if t := r.txn(txnKey{rf: !h.Correspondent(), si: h.SessionID, ti: h.TransactionID}); t != nil {
		if h.TransactionKind != codec.TransactionKindJoin {
			c.heard(r)
		}
		t.receive(c, p)
		return
	}
	if h.Correspondent() {
		c.stale(p, r)
		return
	}
	if !r.added && h.TransactionKind != codec.TransactionKindJoin {
		c.stats.drop(dropUnknownDestination)
		return
	}
	c.correspond(p, r)
}

// openAEAD authenticates and opens a packet's AEAD coat with the session
// coat of the remote its de names, and leaves the body in p.Coat. The
// reader goroutine opened it already when it had that coat (ac); it is
// opened here only when the reader had none or another (the table it read
// was older than the session: the first packets of a new session that
// came in the batch of the allow's last packet). A reader that tried an
// older session's coat in place (no room after the datagram) left the
// coat unreadable: that packet is dropped and sent again. The coat's
// replay window moves only for a packet that opens, under its lock. It
// reports false after dropping the packet.
func (c *Core) openAEAD(p *rxPacket, ac *aeadCheck) bool {
	h := &p.Head
	var a *packet.AEADCoat
	r := c.roster.remotes[h.DestinationID]
	if r != nil {
		a = r.aead()
	}
	switch {
	case a == nil:
		c.stats.drop(dropVerifyUnknownKey)
		if r == nil {
			c.recall(h.DestinationID)
		}
		return false
	case a.Kind() != h.CoatKind:
		c.stats.drop(dropCoatDowngrade)
		return false
	}
	plain, err := ac.plain, ac.err
	if ac.coat != a {
		if ac.coat != nil && ac.err == nil {
			c.stats.drop(dropVerifyStaleKey) // a packet of the session before
			return false
		}
		plain, err = p.OpenAEADInBuffer(a)
	}
	if err != nil {
		c.stats.drop(aeadDrop(err))
		c.usedAEAD(r, false)
		return false
	}
	p.Coat = plain
	c.usedAEAD(r, true)
	return true
}

// aeadDrop is the drop reason of an AEAD coat that did not open.
func aeadDrop(err error) dropReason {
	switch {
	case errors.Is(err, packet.ErrReplayed):
		return dropAEADReplayed
	case errors.Is(err, packet.ErrTooOld):
		return dropAEADTooOld
	}
	return dropAEADOpenFailed
}

// route finds the remote a packet belongs to, or nil after dropping or
// answering it.
func (c *Core) route(p *rxPacket) *remote {
	h := &p.Head
	switch {
	case h.TransactionKind != codec.TransactionKindJoin:
		return c.routeSession(p)
	case h.SessionID != 0:
		c.stats.drop(dropJoinNonzeroSID)
		return nil
	case h.Correspondent(): // from a joinent to us, the joiner
		return c.routeJoinReply(p)
	}
	return c.routeJoinRequest(p)
}

// routeJoinReply finds the remote of a joinent's packet to us, the
// joiner: a vacuous join's by address, or a remote we hold.
func (c *Core) routeJoinReply(p *rxPacket) *remote {
	se, de := p.Head.SourceID, p.Head.DestinationID
	if de == 0 {
		c.stats.drop(dropJoinZeroNUID)
		return nil
	}
	if se == 0 {
		r := c.roster.joinees[p.from]
		if r == nil || r.nuid != de {
			c.stats.drop(dropJoinUnknownJoinee)
			return nil
		}
		return r
	}
	if r := c.roster.remotes[de]; r != nil {
		return r
	}
	c.stats.drop(dropUnknownDestination)
	return nil
}

// routeJoinRequest finds the remote of a joiner's packet to us, the
// joinent: a vacuous join's by address (a new remote for a request), or
// the remote it names, recalled if forgotten.
func (c *Core) routeJoinRequest(p *rxPacket) *remote {
	h := &p.Head
	se, de := h.SourceID, h.DestinationID
	if se == 0 {
		c.stats.drop(dropJoinZeroFUID)
		return nil
	}
	if de == 0 {
		r := c.roster.joinees[p.from]
		if r != nil && r.fuid != se && r.fuid != 0 {
			delete(c.roster.joinees, p.from) // a stale vacuous join from there
			r = nil
		}
		if r == nil {
			if h.PacketKind != codec.PacketKindRequest {
				c.stats.drop(dropJoinStale)
				return nil
			}
			r = c.newRemote(p.from, 0, h.SessionID)
		}
		return r
	}
	r := c.roster.remotes[de]
	if r == nil {
		r = c.recall(de) // forgotten, its keep kept
	}
	if r == nil {
		// We lost it (a new keep?): tell the joiner to join afresh.
		c.stats.drop(dropJoinStaleNUID)
		c.replyStale(p, nil, codec.PacketKindRenew)
		return nil
	}
	return r
}

// routeSession finds the remote of a packet of a session (not a join),
// moving its session forward when the packet starts a newer one.
func (c *Core) routeSession(p *rxPacket) *remote {
	h := &p.Head
	si := h.SessionID
	if si == 0 {
		c.stats.drop(dropZeroSID)
		return nil
	}
	if h.SourceID == 0 || h.DestinationID == 0 {
		c.stats.drop(dropZeroUID)
		return nil
	}
	r := c.roster.remotes[h.DestinationID]
	if r == nil {
		c.stats.drop(dropUnknownDestination)
		return nil
	}
	// The packet is authenticated (handle): it may move the remote's
	// session forward, never back.
	if !h.Correspondent() {
		switch {
		case validSid(si, r.rsid):
			if si != r.rsid {
				r.rsid = si
				c.removeStaleCorrespondents(r)
			}
		case r.sessionReset && h.TransactionKind == codec.TransactionKindAllow:
			// The remote joined afresh (a vacuous join: it may have lost its
			// keep and counts its sessions from 1 again). Only an allow may
			// set its session back, once it completes (allowent.initiate).
		default:
			c.stats.drop(dropStaleSID)
			c.replyStale(p, r, codec.PacketKindNack)
			return nil
		}
	}
	if r.reaped {
		c.unreap(r)
	}
	return r
}

// correspond starts the correspondent transaction a packet asks for,
// unless its transaction id was used in this session already (a replay, or
// a repeat whose answer was lost: answered again within the reply budget,
// without any other effect).
func (c *Core) correspond(p *rxPacket, r *remote) {
	h := &p.Head
	if h.TransactionKind != codec.TransactionKindJoin {
		if c.replayed(p, r) {
			return
		}
		// Signed and new (not a replay, which could hide a remote gone):
		// it is there.
		c.heard(r)
	}
	for _, s := range starters {
		if s.tk == h.TransactionKind && s.pk == h.PacketKind {
			s.start(c, p, r)
			return
		}
	}
	c.stats.drop(dropStalePacket)
}

// starters are the correspondent transactions a packet starts, by its
// transaction and packet kinds: a kind of packet that starts one is added
// here.
var starters = [...]struct {
	tk    codec.TransactionKind
	pk    codec.PacketKind
	start func(*Core, *rxPacket, *remote)
}{
	{codec.TransactionKindJoin, codec.PacketKindRequest, (*Core).startJoinent},
	{codec.TransactionKindAllow, codec.PacketKindHello, (*Core).startAllowent},
	{codec.TransactionKindAlive, codec.PacketKindRequest, (*Core).startAlivent},
	{codec.TransactionKindMessage, codec.PacketKindMessage, (*Core).startMessage},
}

// replayed says whether p's transaction id was used in r's session
// already, after dropping p and answering it as its state asks.
func (c *Core) replayed(p *rxPacket, r *remote) bool {
	h := &p.Head
	isMessage := h.TransactionKind == codec.TransactionKindMessage && h.PacketKind == codec.PacketKindMessage
	switch st := r.window.state(h.TransactionID); st {
	case replayUsed, replayRefused:
		c.stats.drop(dropReplayed)
		switch {
		case isMessage && st == replayRefused:
			// Refused in this session, and the nack was lost: refused
			// again (done would tell its sender it was delivered).
			c.refuseMessage(p, r)
		case isMessage:
			// Delivered in this session: its done was lost. The
			// reference answers nack; done tells the sender the truth.
			c.replyStale(p, r, codec.PacketKindDone)
		case h.TransactionKind == codec.TransactionKindAlive && h.PacketKind == codec.PacketKindRequest:
			c.replyStale(p, r, codec.PacketKindAck)
		}
		return true
	case replayTooOld:
		c.stats.drop(dropReplayTooOld)
		if h.TransactionKind == codec.TransactionKindMessage {
			c.refuseMessage(p, r) // too old to tell: its sender hears it failed, as before
			return true
		}
		c.replyStale(p, r, codec.PacketKindNack)
		return true
	}
	return false
}

// startMessage starts the messengent of a message packet, unless it was
// sent again (its start unseen) or in a coat the session did not agree on.
func (c *Core) startMessage(p *rxPacket, r *remote) {
	h := &p.Head
	if h.Again() {
		// Sent again, of a transaction this session never saw start:
		// not delivered.
		c.stats.drop(dropStaleMessage)
		c.refuseMessage(p, r)
		return
	}
	if h.CoatKind != r.coatKind() {
		// A plaintext (or other) coat in a session that agreed on one:
		// a downgrade, refused.
		c.stats.drop(dropCoatDowngrade)
		c.refuseMessage(p, r)
		return
	}
	c.startMessengent(p, r)
}
