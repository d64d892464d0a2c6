package core

import (
	"net/netip"
	"slices"
	"time"

	"github.com/raet-go/raet/keep"
)

// keeper is the core's side of the keep: the remote roles it knows, its
// writes to the store, and the joins waiting on our operator's decision.
type keeper struct {
	roles   map[string]*keptRole // the keep's remote roles
	queue   keepQueue            // the writes to the store
	evicted bool                 // roles lacks records the store holds (evictRole)
	// pended are the joinents waiting for our operator's decision, oldest
	// first; one timer (pendAt) re-reads the keep for all of them.
	pended []*joinent
	pendAt time.Time
	// strangers counts the joins of strangers accepted and not yet ended
	// (joinent.added), bounded by Config.StrangerJoins.
	strangers int
}

// pend adds j to the joins the pend timer re-reads the keep for.
func (k *keeper) pend(j *joinent, now time.Time) {
	k.pended = append(k.pended, j)
	if k.pendAt.IsZero() {
		k.pendAt = now.Add(pendRedo)
	}
}

func (k *keeper) unpend(j *joinent) {
	if i := slices.Index(k.pended, j); i >= 0 {
		k.pended = slices.Delete(k.pended, i, i+1)
	}
	if len(k.pended) == 0 {
		k.pendAt = time.Time{}
	}
}

// keptRole is a remote role's record as the core knows it, and its last
// write the core made (0: none since start).
type keptRole struct {
	rec keep.RemoteRole
	seq uint64
}

// keepQueue is the core's side of its writes.
type keepQueue struct {
	made    uint64 // the sequence number of the last write made
	durable uint64 // every write up to it is durable
	// backlog holds the writes made while a batch is written (or that
	// found the store's queue full: full), oldest first, and queued the
	// latest of them for each file; they go to the store as one batch once
	// the last is durable, a file written twice in it only once (group
	// commit).
	backlog []*keepWrite
	queued  map[fileID]*keepWrite
	full    bool
	sent    []sentWrite // taken by the store, not yet durable, oldest first
	// holds maps an address to the last write whatever is sent there
	// waits for (once the store failed, for good); held are the datagrams
	// held for their writes, in order.
	holds map[netip.AddrPort]uint64
	held  []heldDatagram
	err   error // the store failed: sticky
}

// pendRedo is how often the core re-reads the keep for the joins waiting
// for an operator's decision, all of them at once (the reference: every 60 s,
// each join on its own). Only a joinent waits for ours: a joiner trusts the
// main it joins on first use (trustMain).
const pendRedo = time.Second

// sentWrite is a write the store took: its sequence number and the
// store's (0: the write was durable as taken, but follows a write that is
// not: it is durable with that one).
type sentWrite struct{ seq, store uint64 }

type heldDatagram struct {
	seq uint64
	d   Datagram
}
