package core

import "encoding/binary"

// Bounded state for the departed. A main estate reaps a remote silent for
// Interim (presence.go) and forgets it when it is still silent
// ForgetAfter later (ReasonSilent); any estate holding more than
// MaxRemotes remotes forgets the longest silent (ReasonTooMany). To forget
// is to drop the remote from every map, timer, reassembly slot and budget
// of the core, failing what waits on it with ErrForgotten, and to report
// EventForgotten with the reason; its keep files stay. The core keeps only
// its uid and name (a tombstone, at most MaxRemotes of them), so that when
// it comes back — a join naming its uid, or a signed packet, as from an
// estate that never noticed — it is loaded again from the keep (recall)
// and carries on as after a restart: it allows again, joining first when
// the profile needs it. A remote with no tombstone left joins afresh
// (vacuously, by name) and its kept keys still count.

// tombstones are the forgotten remotes' names by uid, oldest first, the
// names in one buffer: a tombstone costs its name and about two dozen bytes
// (an index entry, a length, a place in the order), not a string and a map
// entry of its own.
type tombstones struct {
	at    map[uint32]uint32 // uid → where its name starts in names
	names []byte            // each name after its length (uvarint); dead bytes name no tombstone
	order []uint32          // the uids, oldest first; some taken since, or twice
	dead  int               // the bytes of names no tombstone names
}

func (t *tombstones) add(uid uint32, name string, limit int) {
	if t.at == nil {
		t.at = map[uint32]uint32{}
	}
	t.drop(uid)
	t.at[uid] = uint32(len(t.names))
	t.names = binary.AppendUvarint(t.names, uint64(len(name)))
	t.names = append(t.names, name...)
	t.order = append(t.order, uid)
	for len(t.at) > limit && len(t.order) > 0 {
		t.drop(t.order[0])
		t.order = t.order[1:]
	}
	if len(t.order) > 2*limit || (t.dead > minCompact && t.dead > len(t.names)/2) {
		t.compact() // uids recalled meanwhile, names dropped
	}
}

// minCompact is the fewest dead bytes of names worth a compaction.
const minCompact = 4096

// name is the name that starts at off in names, and its length there.
func (t *tombstones) name(off uint32) (string, int) {
	n, k := binary.Uvarint(t.names[off:])
	start := int(off) + k
	return string(t.names[start : start+int(n)]), k + int(n)
}

// drop removes uid's tombstone, if it has one.
func (t *tombstones) drop(uid uint32) {
	if off, ok := t.at[uid]; ok {
		_, size := t.name(off)
		t.dead += size
		delete(t.at, uid)
	}
}

// compact keeps in order only the uids that still name a tombstone, once,
// and in names only their names, in new room.
func (t *tombstones) compact() {
	order := make([]uint32, 0, len(t.at))
	at := make(map[uint32]uint32, len(t.at))
	var names []byte
	for _, uid := range t.order {
		off, ok := t.at[uid]
		if _, done := at[uid]; !ok || done {
			continue
		}
		name, _ := t.name(off)
		at[uid] = uint32(len(names))
		names = binary.AppendUvarint(names, uint64(len(name)))
		names = append(names, name...)
		order = append(order, uid)
	}
	t.at, t.names, t.order, t.dead = at, names, order, 0
}

func (t *tombstones) has(uid uint32) bool { _, ok := t.at[uid]; return ok }

// take removes and returns the tombstone of uid.
func (t *tombstones) take(uid uint32) (string, bool) {
	off, ok := t.at[uid]
	if !ok {
		return "", false
	}
	name, _ := t.name(off)
	t.drop(uid)
	return name, true
}

func (t *tombstones) len() int { return len(t.at) }

// forget drops r from memory (see above); its keep files stay.
func (c *Core) forget(r *remote, why Reason) {
	for _, t := range r.txns {
		switch t := t.(type) {
		case *messenger:
			t.finish(c, ErrForgotten)
		case *messengent:
			c.reasm.Drop(t.msgKey())
		case *joinent:
			c.unpend(t)
		}
	}
	clear(r.txns)
	for _, m := range r.saved {
		m.finish(c, ErrForgotten)
	}
	r.saved = nil
	c.notifyWaiters(r, ErrForgotten)
	if r.prof != nil && r.prof.aead != nil {
		// What may still hold the coat a while (a datagram a reader is
		// opening with it) does not hold its cipher states too.
		r.prof.aead.Drop()
	}
	c.markKeys(r)
	delete(c.remotes, r.nuid)
	c.silence.remove(r)
	if c.byName[r.name] == r {
		delete(c.byName, r.name)
	}
	if c.joinees[r.ha] == r {
		delete(c.joinees, r.ha)
	}
	wasAdded := r.added
	r.added = false
	c.touch(r) // leaves the timer heap at the next flush
	if wasAdded && r.joined {
		c.forgotten.add(r.nuid, r.name, c.tombstoneLimit())
	}
	c.evictRole(r.role)
	c.report(EventForgotten, r.name, r.nuid, why, r.ha, "")
	c.shrink()
}

// shrink rebuilds the remotes' maps (and the roles' records and the joins
// in progress, which forgetting empties too) and the timer heap once they
// hold a quarter of their peak (Go's maps never give back their memory),
// so that a main whose remotes all left holds what it held before they
// came.
func (c *Core) shrink() {
	if c.peak < 64 || len(c.remotes) > c.peak/4 {
		return
	}
	c.remotes, c.byName = rebuilt(c.remotes), rebuilt(c.byName)
	c.roles, c.joinees = rebuilt(c.roles), rebuilt(c.joinees)
	c.timers = append(timerHeap(nil), c.timers...)
	c.touched = append([]*remote(nil), c.touched...)
	c.due = nil
	c.peak = len(c.remotes)
}

// rebuilt is a new map, of the room its entries need, with m's entries
// (maps.Clone keeps the room of m).
func rebuilt[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (c *Core) tombstoneLimit() int {
	if c.cfg.MaxRemotes > 0 {
		return c.cfg.MaxRemotes
	}
	return DefaultMaxRemotes
}

// capRemotes forgets the longest silent remotes (but keep) while there are
// more than MaxRemotes: the heads of the silence list, O(1) each.
func (c *Core) capRemotes(keep *remote) {
	for c.cfg.MaxRemotes > 0 && len(c.remotes) > c.cfg.MaxRemotes {
		oldest := c.silence.head
		if oldest == keep {
			oldest = oldest.newer
		}
		if oldest == nil {
			return
		}
		c.forget(oldest, ReasonTooMany)
	}
}

// silenceList holds the added remotes in the order they were last heard,
// the longest silent at head: a list through remote.older and newer, so
// that hearing a remote (it goes last) and finding the longest silent
// cost O(1), whatever the number of remotes.
type silenceList struct{ head, tail *remote }

func (l *silenceList) has(r *remote) bool { return r.older != nil || l.head == r }

// last puts r at the tail: just heard.
func (l *silenceList) last(r *remote) {
	if l.tail == r {
		return
	}
	l.remove(r)
	r.older = l.tail
	if l.tail != nil {
		l.tail.newer = r
	} else {
		l.head = r
	}
	l.tail = r
}

// remove takes r out of the list, if it is in it.
func (l *silenceList) remove(r *remote) {
	if !l.has(r) {
		return
	}
	if r.older != nil {
		r.older.newer = r.newer
	} else {
		l.head = r.newer
	}
	if r.newer != nil {
		r.newer.older = r.older
	} else {
		l.tail = r.older
	}
	r.older, r.newer = nil, nil
}

// recall loads the forgotten remote of uid again from the keep, within the
// budget of replies to unknown remotes; nil when there is none, or it
// cannot be loaded.
func (c *Core) recall(uid uint32) *remote {
	if !c.forgotten.has(uid) {
		return nil
	}
	if !c.lim.renews.take(c.now, replyRate, replyBurst) {
		c.stats.drop(dropReplyBudget)
		return nil
	}
	name, _ := c.forgotten.take(uid)
	est, err := c.store.loadRemote(name)
	if err != nil {
		c.log.Warn("raet: a forgotten remote came back but its keep cannot be read", "remote", name, "err", err)
		return nil
	}
	if est.UID != uid {
		return nil // the name was given to another estate since
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
