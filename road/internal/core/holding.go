package core

import (
	"net/netip"
	"time"
)

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

func (c *Core) notifyWaiters(r *remote, err error) {
	for _, w := range r.waiters {
		w <- err
	}
	r.waiters = nil
}

// remoteAt finds the remote at address a.
func (c *Core) remoteAt(a netip.AddrPort) *remote {
	for _, r := range c.roster.remotes {
		if r.ha == a {
			return r
		}
	}
	return nil
}

// report records an event about the remote named name and, for the
// changes an operator cares about (joined, pending, rejected, removed),
// logs it at Info with the reason and hint, the command that resolves it.
func (c *Core) report(k EventKind, name string, uid uint32, why Reason, addr netip.AddrPort, hint string) {
	c.events = append(c.events, Event{Kind: k, Remote: name, UID: uid, Time: c.now, Reason: why})
	c.stats.event(k, why)
	switch k {
	case EventJoined, EventPending, EventRejected, EventRemoved, EventForgotten:
	default:
		return
	}
	suppressed, ok := c.joinLogs.take(c.now)
	if !ok {
		return
	}
	attrs := []any{"remote", name}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed_before", suppressed)
	}
	if addr.IsValid() && addr.String() != name {
		attrs = append(attrs, "addr", addr.String())
	}
	if why != ReasonNone {
		attrs = append(attrs, "reason", why.String(), "why", why.Describe())
	}
	if hint != "" {
		attrs = append(attrs, "resolve", hint)
	}
	c.log.Info("raet: "+k.String(), attrs...)
}

// nameOf names r in events, logs and errors: by its address until it
// answered a join (before that its name is a placeholder).
func (c *Core) nameOf(r *remote) string {
	if r.fuid == 0 && !r.joined {
		return r.ha.String()
	}
	return r.name
}
