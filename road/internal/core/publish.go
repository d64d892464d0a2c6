package core

import (
	"cmp"
	"slices"
)

// KeyTable is the table this core publishes its remotes' keys in, for
// the readers (the same table for the core's life).
func (c *Core) KeyTable() *KeyTable { return &c.readers.table }

// markKeys says r's entry in the key table may be out of date (r was
// added or removed, or its keys or session changed). Marks beyond what a
// full rebuild costs make the next PublishKeys rebuild all, so that a core
// nobody publishes for holds a bounded list.
func (c *Core) markKeys(r *remote) { c.readers.mark(r.nuid, len(c.roster.remotes)) }

// PublishKeys brings the key table up to date with the marked remotes (see
// above); the owner calls it after each event, before readers may see
// what the event sent.
func (c *Core) PublishKeys() {
	if c.readers.all {
		c.readers.all, c.readers.dirty = false, c.readers.dirty[:0]
		c.rebuildKeys()
		c.readers.trimFeet()
		return
	}
	d := c.readers.dirty
	if len(d) == 0 {
		return
	}
	defer c.readers.trimFeet()
	slices.SortFunc(d, func(a, b uint32) int { return cmp.Compare(a%keyShards, b%keyShards) })
	for i := 0; i < len(d); {
		s := d[i] % keyShards
		j := i + 1
		for j < len(d) && d[j]%keyShards == s {
			j++
		}
		c.publishShard(s, d[i:j])
		i = j
	}
	if cap(d) > 4*keyShards { // a burst (a restart's load) gives back its room
		d = nil
	}
	c.readers.dirty = d[:0]
}

// publishShard replaces shard s by a copy with the entries of uids
// updated, unless none changed.
func (c *Core) publishShard(s uint32, uids []uint32) {
	var old map[uint32]*peerKeys
	if p := c.readers.table.shards[s].Load(); p != nil {
		old = p.m
	}
	changed := false
	for _, uid := range uids {
		if o := old[uid]; c.keysOf(uid, o) != o {
			changed = true
			break
		}
	}
	if !changed {
		return
	}
	m := make(map[uint32]*peerKeys, len(old)+len(uids))
	for uid, k := range old {
		m[uid] = k
	}
	for _, uid := range uids {
		if k := c.keysOf(uid, m[uid]); k != nil {
			m[uid] = k
		} else {
			delete(m, uid)
		}
	}
	c.storeShard(s, m)
}

// rebuildKeys publishes every shard afresh from the remotes.
func (c *Core) rebuildKeys() {
	var shards [keyShards]map[uint32]*peerKeys
	for uid := range c.roster.remotes {
		if k := c.keysOf(uid, c.readers.table.lookup(uid)); k != nil {
			s := &shards[uid%keyShards]
			if *s == nil {
				*s = map[uint32]*peerKeys{}
			}
			(*s)[uid] = k
		}
	}
	for s, m := range shards {
		c.storeShard(uint32(s), m)
	}
}

func (c *Core) storeShard(s uint32, m map[uint32]*peerKeys) {
	if old := c.readers.table.shards[s].Load(); old != nil {
		c.readers.table.n.Add(-int64(len(old.m)))
	}
	c.readers.table.n.Add(int64(len(m)))
	if len(m) == 0 {
		c.readers.table.shards[s].Store(nil)
		return
	}
	c.readers.table.shards[s].Store(&keyShard{m})
}

// keysOf is the entry the readers should hold for uid: old while it still
// says what the remote's keys are (so that the readers' memory of checked
// feet, keyed by entry, stays good), nil when there is no remote or it has
// no keys.
func (c *Core) keysOf(uid uint32, old *peerKeys) *peerKeys {
	r := c.roster.remotes[uid]
	if r == nil || (r.verify.IsZero() && r.aead() == nil) {
		return nil
	}
	v, a := [32]byte(r.verify), r.aead()
	if old != nil && old.verify == v && old.aead == a {
		return old
	}
	return newPeerKeys(v, a)
}

// OwnFeet has c size f's memory of checked feet (its twins share it) to
// the remotes c publishes: the room gained for remotes that are gone goes
// back as the key table lets them go (PublishKeys), not when a reader next
// parses a datagram, which a main that its remotes left may wait long for.
// Call it before the readers start.
func (c *Core) OwnFeet(f *FootChecker) { c.readers.feet = f.mem }
