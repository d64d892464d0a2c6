package core

import (
	"cmp"
	"slices"
	"sync/atomic"

	"github.com/raet-go/raet/packet"
)

// The key table: what the reader goroutines check received datagrams with
// (FootChecker), off the owner goroutine. It is split by uid into
// keyShards shards, each an immutable map behind an atomic pointer. The
// owner marks the remotes whose keys, session or membership changed
// (markKeys) and, after each event, PublishKeys replaces each shard that
// holds one of them by a copy with their entries updated: one copy per
// shard per event, so a join costs O(remotes/keyShards), not O(remotes).
// Entries are immutable too (a change makes a new one), so a reader sees
// a remote's old keys or its new ones, never half of each, and a remote
// removed or forgotten is gone from the readers' view once its event is
// published: its next packets fail as of an unknown key. A lookup is an
// atomic load and a map read: no lock, no allocation.

// keyShards is the number of shards of a KeyTable.
const keyShards = 256

// KeyTable is a uid → keys table for checking the Ed25519 feet and
// opening the AEAD coats of received datagrams off the owner goroutine
// (see above). Its zero value is an empty table. Readers only read it; the
// core that owns it (Core.KeyTable) changes it in PublishKeys.
type KeyTable struct {
	shards [keyShards]atomic.Pointer[keyShard]
	n      atomic.Int64 // the entries in all shards
}

type keyShard struct{ m map[uint32]*peerKeys }

// peerKeys are what a reader checks one remote's datagrams with.
type peerKeys struct {
	verify [32]byte         // its Ed25519 verify key; zero: none known
	aead   *packet.AEADCoat // its session's AEAD coat; nil: none
	// serial names this entry among all entries made (newPeerKeys): what
	// the readers remember of the feet they checked holds it, not a
	// pointer, so that an entry replaced or removed is garbage at once.
	serial uint64
}

// peerKeySerials numbers the entries of every key table, from 1.
var peerKeySerials atomic.Uint64

func newPeerKeys(verify [32]byte, aead *packet.AEADCoat) *peerKeys {
	return &peerKeys{verify: verify, aead: aead, serial: peerKeySerials.Add(1)}
}

// lookup is uid's entry, or nil.
func (t *KeyTable) lookup(uid uint32) *peerKeys {
	s := t.shards[uid%keyShards].Load()
	if s == nil {
		return nil
	}
	return s.m[uid]
}

// KeyTable is the table this core publishes its remotes' keys in, for
// the readers (the same table for the core's life).
func (c *Core) KeyTable() *KeyTable { return &c.readers.table }

// markKeys says r's entry in the key table may be out of date (r was
// added or removed, or its keys or session changed). Marks beyond what a
// full rebuild costs make the next PublishKeys rebuild all, so that a core
// nobody publishes for holds a bounded list.
func (c *Core) markKeys(r *remote) { c.readers.mark(r.nuid, len(c.roster.remotes)) }

// readerKeys is what the readers check with: the table the core publishes
// its remotes' keys in and the readers' memory of checked feet, with the
// marks of what the next PublishKeys brings up to date.
type readerKeys struct {
	table KeyTable
	// dirty are the uids whose entries may be out of date, all says all
	// may be.
	dirty []uint32
	all   bool
	// feet is the readers' memory of checked feet, sized to the table's
	// remotes as it is published (OwnFeet); nil: none given.
	feet *seenFeet
}

// mark marks uid's entry, or all once the marks of a core of n remotes
// cost more than a full rebuild.
func (k *readerKeys) mark(uid uint32, n int) {
	if k.all {
		return
	}
	if len(k.dirty) >= n+keyShards {
		k.all, k.dirty = true, k.dirty[:0]
		return
	}
	k.dirty = append(k.dirty, uid)
}

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

// trimFeet gives back the slots of the readers' memory of checked feet
// beyond what the remotes of the table published need (OwnFeet).
func (k *readerKeys) trimFeet() {
	if k.feet != nil {
		k.feet.trim(seenFeetFor(k.table.entries()))
	}
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

// entries is how many remotes the table holds keys of.
func (t *KeyTable) entries() int { return int(t.n.Load()) }

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
