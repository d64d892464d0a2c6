package core

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

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

func (unsignedFoot) Size() int { return packet.NaClFootSize }

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
// again unchanged should the message come again (outbox.go).
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

// openCoat returns the body inside coat, of kind ck, received from r: a
// packet's whole coat, or a reassembled message's. The session's coat
// opens it; an AEAD coat was opened when the packet was received (handle,
// per packet), so coat is the body already. Anything but the session's
// coat kind is refused (a downgrade, ck=0, or any other). It is the one
// way in for every body a session's packets carry.
func openCoat(r *remote, ck codec.CoatKind, coat []byte) ([]byte, error) {
	if a := r.aead(); a != nil || packet.IsAEAD(ck) {
		if a == nil || a.Kind() != ck {
			return nil, errCoatKind
		}
		return coat, nil
	}
	if r.coat == nil || ck != r.coat.Kind() {
		return nil, errCoatKind
	}
	return r.coat.Open(nil, coat)
}

// openControl opens and decodes the coated body of a control packet of
// r's session (a resend, an alive ack).
func openControl(p *rxPacket, r *remote) (map[string]any, error) {
	plain, err := openCoat(r, p.Head.CoatKind, p.Coat)
	if err != nil {
		return nil, err
	}
	ser, err := packet.Builtin(p.Head.BodyKind)
	if err != nil {
		return nil, err
	}
	var body map[string]any
	if err := ser.Unmarshal(plain, &body); err != nil {
		return nil, err
	}
	return body, nil
}
