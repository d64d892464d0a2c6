package core

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
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

// addRemote adds r, forgetting the longest silent remote when there are
// more than MaxRemotes (forget.go).
func (c *Core) addRemote(r *remote) {
	c.markKeys(r)
	r.added = true
	r.heard = c.now
	c.roster.silence.last(r)
	c.roster.remotes[r.nuid] = r
	c.roster.byName[r.name] = r
	c.roster.peak.Note(len(c.roster.remotes))
	if r.role == "" {
		r.role = r.name
	}
	c.wake.touch(r)
	c.capRemotes(r)
}

func (c *Core) renameRemote(r *remote, name string) error {
	if o := c.roster.byName[name]; o != nil && o != r {
		return fmt.Errorf("raet: name %q is taken", name)
	}
	if r.added {
		old := r.name
		delete(c.roster.byName, old)
		c.roster.byName[name] = r
		c.deleteRemote(old)
	}
	r.name = name
	return nil
}

// removeRemote forgets r (and its kept file), ending its transactions.
func (c *Core) removeRemote(r *remote, reason error) {
	for t := range r.eachTxn {
		t.abort(c, codec.PacketKindNack)
	}
	for _, m := range r.saved {
		m.finish(c, reason)
	}
	r.dropSaved()
	c.notifyWaiters(r, reason)
	c.markKeys(r)
	c.wake.touch(r)
	if r.added {
		delete(c.roster.remotes, r.nuid)
		c.roster.silence.remove(r)
		if c.roster.byName[r.name] == r {
			delete(c.roster.byName, r.name)
		}
		c.deleteRemote(r.name)
		c.event(EventRemoved, r)
	}
	r.added = false
	for ha, j := range c.roster.joinees {
		if j == r {
			delete(c.roster.joinees, ha)
		}
	}
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
