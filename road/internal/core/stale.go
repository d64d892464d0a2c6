package core

import (
	"net/netip"

	"github.com/raet-go/raet/codec"
)

// ignoredStale are the packet kinds never answered with a stale nack.
func ignoredStale(pk codec.PacketKind) bool {
	switch pk {
	case codec.PacketKindNack, codec.PacketKindUnjoined, codec.PacketKindUnallowed,
		codec.PacketKindRenew, codec.PacketKindRefuse, codec.PacketKindReject:
		return true
	}
	return false
}

// stale answers a correspondent's packet for a transaction we do not have
// (the reference's Staler): a nack from us as initiator.
func (c *Core) stale(p *rxPacket, r *remote) {
	h := &p.Head
	if ignoredStale(h.PacketKind) {
		c.stats.drop(dropStaleReply)
		return
	}
	if !r.added {
		c.stats.drop(dropStaleUnknown)
		return
	}
	if !r.replies.take(c.now, replyRate, replyBurst) {
		c.stats.drop(dropReplyBudget)
		return
	}
	if h.TransactionKind == codec.TransactionKindJoin && h.PacketKind == codec.PacketKindResponse &&
		r.joinAck != nil && h.TransactionID == r.joinAckTi && p.from == r.ha {
		// Our ack of a join we finished was lost and the joinent asks
		// again: ack again (the reference nacks, which undoes the join).
		c.retransmit(r.joinAck, p.from)
		return
	}
	c.stats.drop(dropStaleCorrespondent)
	out := c.outHead(h.TransactionKind, codec.PacketKindNack, r.nuid, h.SourceID, h.SessionID, h.TransactionID, false)
	out.BodyKind, out.CoatKind, out.FootKind = c.cfg.BodyKind, h.CoatKind, h.FootKind
	c.sendNew(r, &out, nil, p.from)
}

// replyStale answers an initiator's packet that cannot be served (the
// reference's Stalent): a nack, a done for a finished message, an ack for a
// repeated alive, or a renew for a join to a forgotten uid. These replies
// are budgeted, per remote r or, with r nil, for the whole stack.
func (c *Core) replyStale(p *rxPacket, r *remote, pk codec.PacketKind) {
	c.replyStaleTo(&p.Head, p.from, r, pk)
}

// replyStaleTo is replyStale of a packet of head h from `from` (a bundle's
// entry has a head of its own, bundle.go). A done to a session that
// bundles goes in the answers of this moment.
func (c *Core) replyStaleTo(h *codec.Head, from netip.AddrPort, r *remote, pk codec.PacketKind) {
	c.replyStaleWait(h, from, r, pk, false)
}

// refuseMessage answers a message packet that is not delivered with a
// nack that has wf: a refusal, which its sender reports as one, not the
// stale nack of a finished transaction (see messenger.receive).
func (c *Core) refuseMessage(p *rxPacket, r *remote) {
	c.replyStaleWait(&p.Head, p.from, r, codec.PacketKindNack, true)
}

// replyStaleWait is replyStaleTo, with wf on the reply when wait.
func (c *Core) replyStaleWait(h *codec.Head, from netip.AddrPort, r *remote, pk codec.PacketKind, wait bool) {
	if ignoredStale(h.PacketKind) {
		return
	}
	b := &c.lim.renews
	if r != nil {
		b = &r.replies
	}
	if !sealedFresh(h, r) && !b.take(c.now, replyRate, replyBurst) {
		c.stats.drop(dropReplyBudget)
		return
	}
	if pk == codec.PacketKindDone && h.TransactionKind == codec.TransactionKindMessage && r != nil {
		if c.bundles(r) {
			c.answer(r, h.SessionID, h.TransactionID)
			return
		}
		if c.answerAgain(h, from) {
			return
		}
	}
	out := c.outHead(h.TransactionKind, pk, h.DestinationID, h.SourceID, h.SessionID, h.TransactionID, true)
	out.BodyKind, out.CoatKind, out.FootKind = c.cfg.BodyKind, h.CoatKind, h.FootKind
	out.SetWait(wait)
	c.sendNew(r, &out, nil, from)
}

// sealedFresh says whether a packet of head h that reached the core from
// r was sealed with r's AEAD coat: it opened, under a counter never seen
// before (openAEAD), so it is no replay but a packet r sent just now (a
// message sent again after our done was lost, say). A reply to it needs no
// budget: r could as well send a new message for each.
func sealedFresh(h *codec.Head, r *remote) bool {
	if r == nil || !sessionSealed(h) {
		return false
	}
	a := r.aead()
	return a != nil && a.Kind() == h.CoatKind
}
