package core

import (
	"fmt"

	"github.com/raet-go/raet/codec"
)

// removeStaleCorrespondents ends r's correspondent transactions of older
// sessions once it started a newer one, whose ids start a new window.
func (c *Core) removeStaleCorrespondents(r *remote) {
	held := false
	for t := range r.eachTxn {
		if k := t.key(); k.rf && !validSid(k.si, r.rsid) {
			if a, ok := t.(*allowent); ok && r.allowed && a.lastKind == codec.PacketKindAck {
				// Allowed, and its final ack lost: the remote's packet of the
				// new session says it has the session, so what waits for the
				// allow goes now (as when the allowent times out).
				held = true
			}
			t.abort(c, codec.PacketKindNack)
			c.removeTxn(r, t)
		}
	}
	r.window.reset()
	if held {
		c.startHeld(r)
	}
}

// replaceStaleInitiators ends our transactions of older sessions after our
// session changed, saving their messages to send after the next allow.
func (c *Core) replaceStaleInitiators(r *remote) {
	for t := range r.eachTxn {
		k := t.key()
		if k.rf || validSid(k.si, r.sid) {
			continue
		}
		if m, ok := t.(*messenger); ok {
			c.ended(m)
			r.save(m)
			m.abort(c, codec.PacketKindNack)
			c.removeTxn(r, t)
			continue
		}
		t.abort(c, codec.PacketKindNack)
		c.removeTxn(r, t)
	}
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
