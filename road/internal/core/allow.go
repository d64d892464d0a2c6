package core

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// Allow (tk=3, §8.3): the CurveCP-style handshake that makes a session's
// short-term keys. Allow packets are signed, not coated; their raw bodies
// hold their own boxes (internal/handshake).
//
//	allower                          allowent
//	  hello(I short pub, box) ──────▶  opens with its long key
//	  ◀────── cookie(box: R short pub, uids, oreo)
//	  initiate(oreo, box: I long pub, vouch, fqdn) ──▶  checks all
//	  ◀────── ack                      allowed, session+1
//	  ack ──────────────────────────▶  (both allowed; saved messages go)

func (c *Core) allowHead(r *remote, pk codec.PacketKind, si, ti uint32, cf bool) codec.Head {
	h := c.outHead(codec.TransactionKindAllow, pk, r.nuid, r.fuid, si, ti, cf)
	h.BodyKind, h.FootKind = codec.BodyKindRaw, codec.FootKindNaCl
	return h
}

// allowed completes an allow on either side: the new short-term keys (kept
// by the transaction until now, so that the session in place is not touched
// by an allow that does not complete) and their crypto_box key (session,
// which the handshake computed for the initiate's box), the session's
// coat, the keylog line,
// the new session id (§9.2) and the events. A remote that joined afresh
// since its last allow has its session id set back here (to rsid; 0: the
// next authenticated packet sets it), the only place where it may go back.
func (c *Core) allowed(r *remote, short keys.Box, peerShort keys.PublicKey, session *handshake.Key, rsid uint32) error {
	if r.sessionReset {
		r.sessionReset = false
		r.rsid = rsid
		c.removeStaleCorrespondents(r)
	}
	r.short, r.peerShort = short, peerShort
	sk := packet.SessionKeyOf(session, (*[32]byte)(&r.short.Public), (*[32]byte)(&r.peerShort))
	r.coat = sk.NaClCoat(nil)
	prof, err := c.negotiate(r, sk)
	r.prof = nil
	if err != nil {
		return err
	}
	if prof != nil {
		r.negotiated = *prof
		r.prof = &r.negotiated
	}
	if r.prof != nil && r.prof.coat != nil {
		r.coat = r.prof.coat
	}
	c.markKeys(r) // the readers open the new session's AEAD coat
	r.allowed = true
	r.unconfirmed = false
	r.mends = 0 // mendAt stays: our hellos of a crossed allow may still be under way
	if c.cfg.KeyLog != nil {
		if _, err := io.WriteString(c.cfg.KeyLog, handshake.FormatKeyLog(r.short.Public, r.short.Private, r.peerShort)); err != nil {
			c.log.Warn("raet: keylog", "err", err)
		}
	}
	alive := true
	c.refresh(r, &alive)
	r.nextSid()
	c.replaceStaleInitiators(r)
	// The new session id is kept, but nothing waits for it: after a restart
	// the sessions start one further on (restore), past this one. The
	// first allow after a join finds it kept already (joined).
	if r.keptSid != r.sid {
		c.saveRemote(r, false)
	}
	c.event(EventAllowed, r)
	c.notifyWaiters(r, nil)
	return nil
}

// fqdnOf is what the reference expects in the fqdn field of our initiate
// to r: its host's name (Config.FQDN), kept with the remote once known.
func (c *Core) fqdnOf(r *remote) string {
	if r.fqdn == "" && c.cfg.FQDN != nil {
		r.fqdn = c.cfg.FQDN(r.ha.Addr())
	}
	return r.fqdn
}

func (c *Core) failAllow(r *remote, err error) {
	c.notifyWaiters(r, &TxnError{Txn: "allow", Remote: r.name, Err: err})
}

// --- allower ---------------------------------------------------------------

// startAllower starts an allow with r (a join first if r is not joined).
func (c *Core) startAllower(r *remote, cascade bool) {
	if len(r.inProcess(codec.TransactionKindJoin)) > 0 || len(r.inProcess(codec.TransactionKindAllow)) > 0 {
		return
	}
	r.allowed = false
	c.allow(r, cascade)
}

// rekey allows r again, for new short-term keys, while its session stays
// up until the new one is made: its AEAD coat has little left to seal
// (rekeyAt). The messages under way then go again in the new session, as
// after any allow.
func (c *Core) rekey(r *remote) {
	if len(r.inProcess(codec.TransactionKindJoin)) > 0 || len(r.inProcess(codec.TransactionKindAllow)) > 0 {
		return
	}
	c.log.Info("raet: the session's AEAD coat nears its limit; allowing again for new keys", "remote", r.name)
	c.allow(r, false)
}

// allow starts the allower (a join first when r is not joined, or was
// joined in an earlier run).
func (c *Core) allow(r *remote, cascade bool) {
	if !r.joined || (c.ourCaps() != nil && !r.capsFresh) {
		// Not joined, or joined in an earlier run, whose advertisements
		// the allow could not authenticate: join (again) first.
		c.startJoiner(r, cascade, false)
		return
	}
	short, err := keys.GenerateBox()
	if err != nil {
		c.failAllow(r, err)
		return
	}
	a := &allower{r: r, si: r.sid, ti: r.nextTid(), cascade: cascade, short: short,
		timeout: after(c.now, c.cfg.AllowTimeout), redo: newRedo(250*time.Millisecond, time.Second)}
	var hello []byte
	var helloKey *handshake.Key
	if ours := c.ourCaps(); ours != nil {
		hello, helloKey, err = handshake.MakeHelloPlain(nil, a.short, r.pub, [handshake.HelloPlainSize]byte([]byte(capsSum(ours, r.peerCaps))))
	} else {
		hello, helloKey, err = handshake.MakeHello(nil, a.short, r.pub)
	}
	if err != nil {
		c.failAllow(r, err)
		return
	}
	a.helloKey = helloKey
	c.addTxn(r, a)
	a.send(c, codec.PacketKindHello, hello)
}

func (a *allower) send(c *Core, pk codec.PacketKind, body []byte) {
	h := c.allowHead(a.r, pk, a.si, a.ti, false)
	if b := c.sendNew(a.r, &h, body, a.r.ha); b != nil {
		if pk == codec.PacketKindInitiate {
			// A second initiate answers the cookie sent again: the same
			// request again, whose ack may be the first one's.
			c.timeRequest(&a.asked, a.r.ha, a.lastKind == pk)
		}
		a.last, a.lastKind = b, pk
		a.redo.restart(c.now)
		c.wake.retime(a)
	}
}

func (a *allower) nack(c *Core, pk codec.PacketKind) {
	c.removeTxn(a.r, a)
	a.send(c, pk, nil)
}

func (a *allower) abort(c *Core, pk codec.PacketKind) {
	a.nack(c, pk)
	c.failAllow(a.r, ErrSessionChanged)
}

func (a *allower) receive(c *Core, p *rxPacket) {
	r := a.r
	switch p.Head.PacketKind {
	case codec.PacketKindCookie:
		ck, err := handshake.OpenCookie(p.Coat, a.helloKey, r.fuid, r.nuid)
		if err != nil {
			c.stats.drop(dropAllowCookie)
			a.nack(c, codec.PacketKindReject)
			c.failAllow(r, fmt.Errorf("%w: bad cookie: %v", ErrRejected, err))
			return
		}
		a.peerShort, a.oreo = ck.RShortPub, ck.Oreo
		fqdn := c.fqdnOf(r)
		if ours := c.ourCaps(); ours != nil && r.peerCaps != nil {
			fqdn = capsDigest(ours, r.peerCaps) // for a raet-go allowent of an earlier release
		}
		initiate, session, err := handshake.MakeInitiate(nil, a.short, c.local.box, a.peerShort, r.pub, a.oreo, fqdn)
		if err != nil {
			c.removeTxn(r, a)
			c.failAllow(r, err)
			return
		}
		a.session = session
		a.send(c, codec.PacketKindInitiate, initiate)
	case codec.PacketKindAck:
		if a.lastKind != codec.PacketKindInitiate && a.lastKind != codec.PacketKindAck {
			return // an ack before our initiate is not the allowent's
		}
		c.timedAnswer(r, &a.asked, true)
		c.removeTxn(r, a)
		a.send(c, codec.PacketKindAck, nil) // the final ack, in the old session
		if err := c.allowed(r, a.short, a.peerShort, a.session, 0); err != nil {
			c.failAllow(r, err)
			return
		}
		c.startHeld(r)
		if a.cascade {
			c.startAliver(r, true)
		}
	case codec.PacketKindNack, codec.PacketKindRefuse:
		c.removeTxn(r, a)
		c.mendLater(r)
		c.failAllow(r, ErrRefused)
	case codec.PacketKindReject:
		r.allowed = false
		c.removeTxn(r, a)
		c.event(EventRejected, r)
		c.failAllow(r, ErrRejected)
	case codec.PacketKindUnjoined:
		r.joined = false
		c.removeTxn(r, a)
		c.startJoiner(r, a.cascade, false)
	}
}

func (a *allower) tick(c *Core) {
	if a.timeout.due(c.now) {
		c.removeTxn(a.r, a)
		c.mendLater(a.r)
		c.failAllow(a.r, ErrTimeout)
		return
	}
	if a.redo.due(c.now) {
		a.redo.backoff(c.now)
		c.wake.retime(a)
		if a.last != nil {
			c.retransmit(a.last, a.r.ha)
			c.timeRequest(&a.asked, a.r.ha, true)
		}
	}
}

// --- allowent --------------------------------------------------------------

// What a hello's plain says of the advertisements (allowent.caps).
const (
	capsNone  = iota // the reference's plain: no digest
	capsSame         // the digest of what we sent and received
	capsOther        // another digest: an advertisement changed in transit
)

func (c *Core) startAllowent(p *rxPacket, r *remote) {
	a := &allowent{r: r, si: p.Head.SessionID, ti: p.Head.TransactionID,
		timeout: after(c.now, c.cfg.AllowTimeout), redo: newRedo(250*time.Millisecond, time.Second)}
	a.hello(c, p)
}

func (a *allowent) send(c *Core, pk codec.PacketKind, body []byte) {
	h := c.allowHead(a.r, pk, a.si, a.ti, true)
	if b := c.sendNew(a.r, &h, body, a.r.ha); b != nil {
		if pk == codec.PacketKindCookie || pk == codec.PacketKindAck {
			c.timeRequest(&a.asked, a.r.ha, a.lastKind == pk)
		}
		a.last, a.lastKind = b, pk
		a.redo.restart(c.now)
		c.wake.retime(a)
	}
}

func (a *allowent) nack(c *Core, pk codec.PacketKind) {
	a.remove(c)
	a.send(c, pk, nil)
}

// remove ends the allowent; its id is used.
func (a *allowent) remove(c *Core) {
	c.removeTxn(a.r, a)
	c.used(a.r, a.si, a.ti, false)
}

func (a *allowent) abort(c *Core, pk codec.PacketKind) { a.nack(c, pk) }

// contend settles a against the transactions of its remote under way: a
// joinent waiting for its ack completes (the hello shows the join is done),
// a join still under way refuses a, and of two allows the lower name's
// refuses the remote's. It reports false when a is refused (or a
// duplicate).
func (a *allowent) contend(c *Core) bool {
	r := a.r
	for _, t := range r.inProcess(codec.TransactionKindJoin) {
		// A joinent that answered and waits for the joiner's ack: a
		// signed hello from the joiner shows the join is done on its
		// side, so the lost ack is taken as given.
		if j, ok := t.(*joinent); ok && j.lastKind == codec.PacketKindResponse {
			j.complete(c)
		}
	}
	c.completeAnswered(r) // or one that ended so, a nack after our response

	if len(r.inProcess(codec.TransactionKindJoin)) > 0 {
		a.nack(c, codec.PacketKindRefuse)
		return false
	}
	for _, t := range r.inProcess(codec.TransactionKindAllow) {
		if t == txn(a) {
			return false // a duplicate hello
		}
		other, ok := t.(*allower)
		if !ok {
			a.nack(c, codec.PacketKindRefuse) // another allowent already
			return false
		}
		// Both sides started an allow: the lower name refuses the remote's.
		if c.local.name < r.name {
			a.nack(c, codec.PacketKindRefuse)
			return false
		}
		other.nack(c, codec.PacketKindRefuse)
		c.mendLater(r) // its hellos under way may yet reach it after this allow
	}
	return true
}

func (a *allowent) hello(c *Core, p *rxPacket) {
	r := a.r
	if !a.contend(c) {
		return
	}
	if status, _, err := c.roleStatus(r.role); !r.joined || err != nil || status != keep.Accepted {
		// Only a remote joined with accepted keys allows, whatever a keep
		// or a forged ack once said.
		r.joined = false
		a.nack(c, codec.PacketKindUnjoined)
		return
	}
	short, err := keys.GenerateBox()
	if err != nil {
		a.nack(c, codec.PacketKindRefuse)
		return
	}
	a.short = short
	c.addTxn(r, a)
	ishort, helloKey, err := handshake.OpenHello(p.Coat, c.local.box.Private)
	if err != nil {
		c.stats.drop(dropAllowHello)
		a.nack(c, codec.PacketKindReject)
		return
	}
	a.peerShort = ishort
	if plain := handshake.HelloPlain(p.Coat); !handshake.IsZeroPlain(plain) {
		a.caps = capsOther
		if ours := c.ourCaps(); ours != nil && string(plain[:]) == capsSum(r.peerCaps, ours) {
			a.caps = capsSame
		}
	}
	cookie, oreo, err := handshake.MakeCookie(nil, helloKey, a.short.Public, r.nuid, r.fuid)
	if err != nil {
		a.nack(c, codec.PacketKindReject)
		return
	}
	a.oreo = oreo
	a.send(c, codec.PacketKindCookie, cookie)
}

func (a *allowent) receive(c *Core, p *rxPacket) {
	r := a.r
	switch p.Head.PacketKind {
	case codec.PacketKindHello:
		a.hello(c, p)
	case codec.PacketKindInitiate:
		if a.lastKind != codec.PacketKindCookie {
			return // a repeated initiate after our ack: do not allow twice (§13)
		}
		c.timedAnswer(r, &a.asked, true)
		init, session, err := handshake.OpenInitiate(p.Coat, a.short.Private, c.local.box.Private,
			handshake.InitiateWant{IShortPub: a.peerShort, Oreo: a.oreo, ILongPub: r.pub, FQDN: c.local.fqdn})
		if err != nil {
			c.stats.drop(dropAllowInitiate)
			a.nack(c, codec.PacketKindReject)
			return
		}
		if ours := c.ourCaps(); ours != nil {
			// The digest comes in the hello's plain, in the fqdn field (a
			// raet-go allower of an earlier release), or both.
			digest := strings.HasPrefix(init.FQDN, capsPrefix)
			if (digest && init.FQDN != capsDigest(r.peerCaps, ours)) || a.caps == capsOther ||
				(!digest && a.caps == capsNone && r.peerCaps != nil) {
				c.stats.drop(dropCapsMismatch)
				if r.capsFresh {
					// Both sides joined in this run and still saw different
					// advertisements: they were changed in transit.
					c.log.Warn("raet: advertisements changed in transit; rejecting the allow", "remote", r.name)
					c.event(EventRejected, r)
					a.nack(c, codec.PacketKindReject)
					return
				}
				// Ours were lost in a restart: join again to exchange them.
				a.nack(c, codec.PacketKindUnjoined)
				return
			}
		}
		a.send(c, codec.PacketKindAck, nil)
		if err := c.allowed(r, a.short, a.peerShort, session, a.si); err != nil {
			a.nack(c, codec.PacketKindRefuse)
		}
	case codec.PacketKindAck:
		c.timedAnswer(r, &a.asked, true)
		a.remove(c)
		c.startHeld(r)
	case codec.PacketKindNack, codec.PacketKindRefuse:
		a.remove(c)
	case codec.PacketKindReject:
		if a.lastKind == codec.PacketKindAck {
			r.allowed = false // it refuses the session we just made
		}
		a.remove(c)
	}
}

func (a *allowent) tick(c *Core) {
	if a.timeout.due(c.now) {
		if a.r.allowed && a.lastKind == codec.PacketKindAck {
			// Allowed, but the final ack was lost: the session is up all
			// the same, so the saved messages go now.
			a.remove(c)
			c.startHeld(a.r)
			return
		}
		a.nack(c, codec.PacketKindRefuse)
		return
	}
	if a.redo.due(c.now) {
		a.redo.backoff(c.now)
		c.wake.retime(a)
		if a.last != nil {
			c.retransmit(a.last, a.r.ha)
			c.timeRequest(&a.asked, a.r.ha, true)
		}
	}
}
