package core

import (
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Alive (tk=4, §8.4): presence. A request, signed and coated (empty), is
// answered by ack, or by unjoined / unallowed, which make the aliver join or
// allow again.

func (c *Core) aliveHead(r *remote, pk codec.PacketKind, si, ti uint32, cf bool) codec.Head {
	h := c.outHead(codec.TransactionKindAlive, pk, r.nuid, r.fuid, si, ti, cf)
	h.BodyKind, h.CoatKind, h.FootKind = c.cfg.BodyKind, r.coatKind(), codec.FootKindNaCl
	return h
}

// startAliver checks that r is present, joining or allowing first when it
// is not joined or allowed.
func (c *Core) startAliver(r *remote, cascade bool) {
	if !r.joined {
		c.startJoiner(r, cascade, false)
		return
	}
	if !r.allowed {
		c.startAllower(r, cascade)
		return
	}
	if len(r.inProcess(codec.TransactionKindAlive)) > 0 {
		return // still waiting for the last one
	}
	c.refresh(r, nil)
	a := &aliver{r: r, si: r.sid, ti: r.nextTid(), cascade: cascade,
		timeout: after(c.now, c.cfg.AliveTimeout), redo: newRedo(250*time.Millisecond, time.Second)}
	h := c.aliveHead(r, codec.PacketKindRequest, a.si, a.ti, false)
	if r.aead() != nil {
		if !c.send(r, &h, nil, r.ha) {
			return
		}
	} else if a.last = c.sendNew(r, &h, nil, r.ha); a.last == nil {
		return // else a.last is sent again as it is
	}
	a.redo.restart(c.now)
	c.addTxn(r, a)
}

func (a *aliver) receive(c *Core, p *rxPacket) {
	r := a.r
	switch p.Head.PacketKind {
	case codec.PacketKindAck:
		c.removeTxn(r, a)
		if len(p.Coat) > 0 && c.pairPeriod(r) > 0 {
			c.takePeriod(p, r)
		}
		c.refresh(r, yes)
		c.idleExchange(r)
	case codec.PacketKindNack, codec.PacketKindRefuse:
		c.removeTxn(r, a)
		c.refresh(r, nil)
	case codec.PacketKindReject:
		c.removeTxn(r, a)
		c.refresh(r, no)
	case codec.PacketKindUnjoined:
		c.removeTxn(r, a)
		c.refresh(r, nil)
		r.joined = false
		c.startJoiner(r, a.cascade, false)
	case codec.PacketKindUnallowed:
		c.removeTxn(r, a)
		c.refresh(r, nil)
		r.allowed = false
		if c.now.UnixNano() >= r.mendAt { // else it allows us, or we later (mendLater)
			c.startAllower(r, a.cascade)
		}
	}
}

func (a *aliver) tick(c *Core) {
	if a.timeout.due(c.now) {
		c.removeTxn(a.r, a)
		c.refresh(a.r, no)
		return
	}
	if a.redo.due(c.now) {
		a.redo.backoff(c.now)
		c.wake.retime(a)
		if a.r.aead() != nil {
			// Sealed again: the same datagram twice is a replay.
			h := c.aliveHead(a.r, codec.PacketKindRequest, a.si, a.ti, false)
			if c.send(a.r, &h, nil, a.r.ha) {
				c.stats.retransmit()
				a.r.retransmits++
			}
			return
		}
		if c.retransmit(a.last, a.r.ha) {
			a.r.retransmits++
		}
	}
}

func (a *aliver) abort(c *Core, pk codec.PacketKind) {
	h := c.aliveHead(a.r, pk, a.si, a.ti, false)
	c.sendNew(a.r, &h, nil, a.r.ha)
}

// startAlivent answers an alive request at once; it keeps no state.
func (c *Core) startAlivent(p *rxPacket, r *remote) {
	pk := codec.PacketKindAck
	switch {
	case !r.joined:
		pk = codec.PacketKindUnjoined
	case !r.allowed:
		pk = codec.PacketKindUnallowed
	}
	h := c.aliveHead(r, pk, p.Head.SessionID, p.Head.TransactionID, true)
	var body []byte
	if pk == codec.PacketKindAck && c.pairPeriod(r) > 0 && !c.drives(r) {
		// The driver learns our period now (it moves with our remotes).
		body = c.periodBody()
	}
	c.sendNew(r, &h, body, r.ha)
	c.used(r, p.Head.SessionID, p.Head.TransactionID, false)
	if pk == codec.PacketKindAck {
		c.refresh(r, yes)
		c.idleExchange(r)
	} else {
		c.refresh(r, nil)
	}
}

// periodBody is the body of an answerer's alive ack: its presence period
// in ms (presence.go).
func (c *Core) periodBody() []byte {
	body, err := c.marshal(packet.OrderedMap{{Key: "ap", Value: c.alivePeriod().Milliseconds()}})
	if err != nil {
		return nil
	}
	return body
}

// takePeriod takes the period in the body of an answerer's alive ack; a
// body that does not open or read is dropped and counted, the ack stands.
func (c *Core) takePeriod(p *rxPacket, r *remote) {
	body, err := openControl(p, r)
	if err != nil {
		c.stats.drop(errDrop(err))
		return
	}
	if ap := parseAlivePeriod(body["ap"]); ap > 0 {
		r.prof.alive = ap
	}
}
