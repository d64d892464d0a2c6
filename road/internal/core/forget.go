package core

import (
	"errors"
	"io/fs"

	"github.com/raet-go/raet/road/internal/shrink"
)

// Bounded state for the departed. A main estate reaps a remote silent for
// Interim (presence.go) and forgets it when it is still silent
// ForgetAfter later (ReasonSilent); any estate holding more than
// MaxRemotes remotes forgets the longest silent (ReasonTooMany). To forget
// is to drop the remote from every map, timer, reassembly slot and budget
// of the core, failing what waits on it with ErrForgotten, and to report
// EventForgotten with the reason; its keep files stay. The core keeps
// nothing of it: a main that ten thousand remotes left holds what it held
// before they came (shrink gives back the room the maps, the timer heap
// and the budgets took at their peak).
//
// When it comes back — a join naming its uid, or a signed packet, as from
// an estate that never noticed — it is loaded again from the keep
// (recall): the store finds the estate of that uid by its uid index
// (keep.Keep.LoadRemoteUID, kept by the keep writer beside the estate
// files, off the owner goroutine, and mended from the estate files at
// start), and it carries on as after a restart: it allows again, joining
// first when the profile needs it. Only an estate kept as joined is
// recalled (one forgotten before its join completed joins afresh), and
// only within the budget of replies to unknown remotes, taken before the
// store is read: a flood of packets naming uids the keep may not hold
// costs at most that many reads. A remote the keep has no estate for
// under its uid joins afresh (vacuously, by name) and its kept keys still
// count. uids are given in order from the local estate's counter (PUID,
// beyond every kept remote's), so a forgotten remote's uid is given again
// only once the counter wraps (2^32 joins later); the newer estate then
// takes the index entry, and the older joins afresh by name.

// forget drops r from memory (see above); its keep files stay.
func (c *Core) forget(r *remote, why Reason) {
	for t := range r.eachTxn {
		switch t := t.(type) {
		case *messenger:
			t.finish(c, ErrForgotten)
		case *messengent:
			c.unwait(t)
			c.reasm.Drop(t.msgKey())
		case *joinent:
			c.unpend(t)
		}
	}
	clear(r.ours)
	clear(r.theirs)
	for _, m := range r.saved {
		m.finish(c, ErrForgotten)
	}
	r.dropSaved()
	c.notifyWaiters(r, ErrForgotten)
	if r.prof != nil && r.prof.aead != nil {
		// What may still hold the coat a while (a datagram a reader is
		// opening with it) does not hold its cipher states too.
		r.prof.aead.Drop()
	}
	c.markKeys(r)
	delete(c.roster.remotes, r.nuid)
	c.tx.answers.trim(answersFor(len(c.roster.remotes))) // the kept dones' memory goes with the remotes
	c.roster.silence.remove(r)
	if c.roster.byName[r.name] == r {
		delete(c.roster.byName, r.name)
	}
	if c.roster.joinees[r.ha] == r {
		delete(c.roster.joinees, r.ha)
	}
	r.added = false
	c.wake.touch(r) // leaves the timer heap at the next flush
	c.evictRole(r.role)
	c.report(EventForgotten, r.name, r.nuid, why, r.ha, "")
	c.shrink()
}

// shrink rebuilds the remotes' maps (and the roles' records and the joins
// in progress, which forgetting empties too) once they hold a quarter of
// their peak (shrink.Peak: Go's maps and slices never give back their
// room), down to the least room a map takes (it stopped at 64 remotes,
// and a main that a fleet left kept the maps' room for up to 63, ~6 KB),
// and has the next flush rebuild the timer heap, the touched list and the
// timers' scratch once the forgotten left them (flushWake): so that a
// main whose remotes all left holds what it held before they came. The
// room of what the fleet's joins and messages queued goes too: the keep
// queue's maps and held datagrams, the datagrams to send (keptOut), the
// deliveries not yet taken and the line of those waiting for room in
// them (a fan-in's backlog: inbox.roomWaits), what the reassembler keeps for reuse
// (packet.Reassembler.Shrink: the chunks of a fan-in of segmented
// messages, 680 KB from 10000 reference remotes), and the budgets of the
// strangers' addresses (a main that thousands joined holds a bucket for
// each until it sweeps them: limits.sweep).
func (c *Core) shrink() {
	if !c.roster.peak.Due(len(c.roster.remotes)) {
		return
	}
	c.roster.remotes, c.roster.byName = shrink.Map(c.roster.remotes), shrink.Map(c.roster.byName)
	c.kept.roles, c.roster.joinees = shrink.Map(c.kept.roles), shrink.Map(c.roster.joinees)
	c.wake.rebuild = true
	q := &c.kept.queue
	q.holds, q.queued = shrink.Map(q.holds), shrink.Map(q.queued)
	q.held = append([]heldDatagram(nil), q.held...)
	c.tx.trim(c.keptOut())
	c.rx.trim()
	c.reasm.Shrink()
	c.spares.drop()
	c.lim.sweep(c.now)
	c.roster.peak.Rebuilt(len(c.roster.remotes))
}

// capRemotes forgets the longest silent remotes (but keep) while there are
// more than MaxRemotes: the heads of the silence list, O(1) each.
func (c *Core) capRemotes(keep *remote) {
	for c.cfg.MaxRemotes > 0 && len(c.roster.remotes) > c.cfg.MaxRemotes {
		oldest := c.roster.silence.head
		if oldest == keep {
			oldest = oldest.heardLinks.next
		}
		if oldest == nil {
			return
		}
		c.forget(oldest, ReasonTooMany)
	}
}

// recall loads the forgotten remote of uid again from the keep, within the
// budget of replies to unknown remotes (taken before the store is read);
// nil when the keep holds no joined remote of that uid, or it cannot be
// loaded.
func (c *Core) recall(uid uint32) *remote {
	if uid == 0 || uid == c.local.uid {
		return nil
	}
	if !c.lim.renews.take(c.now, replyRate, replyBurst) {
		c.stats.drop(dropReplyBudget)
		return nil
	}
	est, err := c.store.loadRemoteUID(uid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // none of that uid: the caller drops what named it, with its reason
	case err != nil:
		c.log.Warn("raet: a forgotten remote came back but its keep cannot be read", "uid", uid, "err", err)
		return nil
	case est.Joined == nil || !*est.Joined:
		return nil // forgotten before it joined: it joins afresh
	}
	r := c.restore(est)
	if r == nil {
		return nil
	}
	c.addRemote(r)
	c.schedulePresence(r, true)
	c.log.Info("raet: a forgotten remote came back; loaded from the keep", "remote", r.name)
	return r
}

// keptOut is the most room for datagrams to send the core keeps between
// flushes: two datagrams' for each remote, from minKeptOut (a segmented
// message's burst) up to maxKeptOut; so that a main that a fleet left
// does not keep the room of their last alives (up to 26 KB).
func (c *Core) keptOut() int { return min(maxKeptOut, max(minKeptOut, 2*len(c.roster.remotes))) }

const (
	minKeptOut = 64
	maxKeptOut = 256
)
