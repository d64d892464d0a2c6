// Package core is the road's protocol: an estate's state and its
// transactions (join, allow, alive, message), with no sockets, no
// goroutines and no clock, in the sans-IO style of quic-go's ackhandler.
// Package road runs it: one owner goroutine makes every call, readers
// parse and check datagrams with a FootChecker, a writer signs what the
// owner left to sign (Config.SignLater, Datagram.Sign) and sends Out.
//
// The owner feeds the core datagrams (Receive) and commands (Join, Send),
// each with the time, advances the time (Tick, when Deadline says), and
// takes from it the datagrams to send (TakeOut), the delivered messages
// (Deliveries), the events (Events), the bodies left for a decoder
// (Decodes), and after each event brings the key table the readers verify
// with up to date (PublishKeys, KeyTable).
package core

import (
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
)

// Receive handles one received datagram at now (§8.6). Anything malformed
// or unauthenticated is dropped and counted. The core keeps no pointer into
// in or its bytes.
func (c *Core) Receive(in *Inbound, now time.Time) {
	c.now = now
	if in.shed {
		c.stats.drop(dropPresenceShed)
		return
	}
	c.handle(&in.pkt, in.parseErr, &in.foot, &in.aead)
}

// Tick runs the timers due at now.
func (c *Core) Tick(now time.Time) { c.tick(now) }

// Deadline is when Tick must run next; zero when no timer is set.
func (c *Core) Deadline() time.Time {
	c.flushWake()
	c.spares.recycle()
	return earliest(c.kept.pendAt, c.wake.heap.next(), c.tx.answers.expiry())
}

// OutLen is how many datagrams wait to be sent. Like TakeOut, it first
// packs the messages and answers queued for bundles since the last call
// (the bundles of this moment; a call ends the moment).
func (c *Core) OutLen() int {
	c.flushBundles()
	return len(c.tx.out)
}

// Ready is how many datagrams are made and wait to be taken, without the
// bundles of this moment (which OutLen and TakeOut make first).
func (c *Core) Ready() int { return len(c.tx.out) }

// Bundling reports whether messages wait for the bundles of this moment
// (sent by the next OutLen or TakeOut).
func (c *Core) Bundling() bool { return len(c.bundling.queued) > 0 }

// TakeOut returns the datagrams to send, in order, and keeps spare's
// memory (emptied) for the next ones, unless it is more than keptOut.
// Each datagram must be signed (Sign, a no-op unless Config.SignLater left
// its foot) before it is sent, and its Release gives its buffer back once
// it is sent.
func (c *Core) TakeOut(spare []Datagram) []Datagram {
	c.flushBundles()
	return c.tx.take(spare, c.keptOut())
}

// Deliveries are the received messages not yet taken, oldest first.
func (c *Core) Deliveries() []Message { return c.rx.delivery.items() }

// Delivered forgets the first n Deliveries, taken by the caller, and
// delivers, into the room that frees, the whole messages that waited for
// it, oldest first (their dones go to the output).
func (c *Core) Delivered(n int) {
	c.rx.delivery.drop(n)
	c.admitWaiting()
}

// Events are the events since the last ClearEvents, oldest first.
func (c *Core) Events() []Event { return c.events }

// ClearEvents forgets the Events.
func (c *Core) ClearEvents() {
	if cap(c.events) > maxKeptEvents {
		c.events = nil // a burst's room (a fleet forgotten at once) goes
		return
	}
	clear(c.events) // their names and errors go
	c.events = c.events[:0]
}

// maxKeptEvents is the most room for events the core keeps between events.
const maxKeptEvents = 64

// Decodes are the bodies waiting for a decoder, oldest first.
func (c *Core) Decodes() []*Decode { return c.rx.decodes }

// Handed forgets the first n Decodes, handed to a decoder.
func (c *Core) Handed(n int) { c.rx.decodes = dropFirst(c.rx.decodes, n) }

// Decoded takes the outcome of decoding d at now: the message is delivered,
// or nacked when its body does not decode. A message that ended meanwhile
// (a timeout, a nack) is not touched.
func (c *Core) Decoded(d *Decode, body map[string]any, err error, now time.Time) {
	c.now = now
	c.wake.touch(d.m.r)
	d.m.decoded(c, body, err)
}

// Name is the local estate's name.
func (c *Core) Name() string { return c.local.name }

// Join starts joining and allowing the estate at ap, unless its session is
// up already; res receives the outcome once (nil: allowed). When the
// session is up it returns the remote and true, and res receives nil at
// once.
func (c *Core) Join(ap netip.AddrPort, res chan error, now time.Time) (Remote, bool) {
	c.now = now
	r := c.remoteAt(ap)
	if r == nil {
		r = c.newRemote(ap, 0, 0)
		c.addRemote(r)
		c.schedulePresence(r, true)
	}
	if r.allowed {
		res <- nil
		return c.info(r), true
	}
	r.waiters = append(r.waiters, res)
	if len(r.inProcess(codec.TransactionKindAllow)) == 0 {
		c.startJoiner(r, true, false) // then allow (cascade)
	}
	return Remote{}, false
}

// RemoteAt describes the remote at address a.
func (c *Core) RemoteAt(a netip.AddrPort) (Remote, bool) {
	if r := c.remoteAt(a); r != nil {
		return c.info(r), true
	}
	return Remote{}, false
}

// RemoteNamed describes the remote named name.
func (c *Core) RemoteNamed(name string) (Remote, bool) {
	if r := c.roster.byName[name]; r != nil {
		return c.info(r), true
	}
	return Remote{}, false
}

// Remotes describes every remote.
func (c *Core) Remotes() []Remote {
	var out []Remote
	for _, r := range c.roster.remotes {
		out = append(out, c.info(r))
	}
	return out
}

// Send is SendFor with a channel that has room for the outcome (nil: no
// one waits).
func (c *Core) Send(to string, body []byte, bk codec.BodyKind, id MsgID, res chan<- error, started, now time.Time) {
	var w Waiter
	if res != nil {
		w = errChan(res)
	}
	c.SendFor(to, body, nil, bk, id, w, started, now)
}

// SendFor starts sending a serialized body of kind bk with its id (to
// peers that negotiated message ids) to the remote named to; w takes the
// outcome once (nil: no one waits). started is when the caller's send
// began (the RTT counters measure from it). The core keeps body until the
// outcome. buf, when not nil, is the BodyBuffer that holds body: the core
// owns it from now on and gives it back to the pool once the outcome is
// known, so the caller must not touch body again.
func (c *Core) SendFor(to string, body []byte, buf *[]byte, bk codec.BodyKind, id MsgID, w Waiter, started, now time.Time) {
	c.now = now
	r := c.roster.byName[to]
	if r == nil {
		bodies.put(buf)
		if w != nil {
			w.MessageDone(ErrUnknownRemote)
		}
		return
	}
	c.begin(r, body, buf, bk, id, w, started)
}

// Counters returns a snapshot of the core's statistics.
func (c *Core) Counters() Counters {
	out := c.stats.snapshot()
	out.Reassembling, out.ReassemblyMemory = c.reasm.Pending(), c.reasm.Memory()
	out.ReceiveQueue = c.rx.delivery.len()
	return out
}

// Shutdown fails every message and Join still waiting with ErrClosed: the
// owner calls it when it stops.
func (c *Core) Shutdown() {
	for _, r := range c.roster.remotes {
		for t := range r.eachTxn {
			if m, ok := t.(*messenger); ok {
				m.finish(c, ErrClosed)
			}
		}
		for _, m := range r.saved {
			m.finish(c, ErrClosed)
		}
		c.notifyWaiters(r, ErrClosed)
	}
	for _, r := range c.roster.joinees {
		c.notifyWaiters(r, ErrClosed)
	}
}

func (c *Core) info(r *remote) Remote {
	out := Remote{Name: r.name, UID: r.nuid, FUID: r.fuid, Addr: r.ha, Role: r.role, Kind: r.kind, Main: r.main,
		Joined: r.joined, Allowed: r.allowed, Alive: r.alived, Reaped: r.reaped, SID: r.sid, RSID: r.rsid,
		HeadKind: c.cfg.HeadKind, FootKind: codec.FootKindNaCl, CoatKind: r.coatKind(), MaxPacketSize: c.cfg.MaxPacketSize,
		SRTT: time.Duration(r.srtt) * time.Microsecond, RTTVar: time.Duration(r.rttvar) * time.Microsecond, LastHeard: r.heard,
		Retransmits: uint64(r.retransmits), Transactions: r.numTxns(), Waiting: len(r.saved)}
	if p := r.prof; p != nil {
		out.HeadKind, out.MaxPacketSize = p.codec.Kind(), p.mps
		if p.mac != nil {
			out.FootKind = codec.FootKindMAC
		}
		if p.aead != nil {
			out.FootKind = codec.FootKindNada
		}
	}
	return out
}
