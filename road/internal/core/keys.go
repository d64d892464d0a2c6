package core

import (
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

// entries is how many remotes the table holds keys of.
func (t *KeyTable) entries() int { return int(t.n.Load()) }
