package core

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
)

// The core's table of its keep, and the writes it makes to it.
//
// The core decides joins from memory: the remotes (core.remotes) and the
// roles' records (core.roles), read from the store when it starts. It
// re-reads a role's record only where an operator may have changed it:
// for the joins that wait for the operator (the pend timer), for a role it
// holds pending or rejected (an operator may have accepted it since), and
// at each allow (an operator may have rejected it since) — never while a
// write of its own of that record is not yet durable, since then its table
// is the newer.
//
// Writes go to the store in the order they are made (keepWrite). A store
// that writes behind (WriterStore) makes them durable later, and whatever
// the core would send to the address of a remote whose writes are not yet
// durable (a join's response that accepts it, the ack of a join, the
// allow after it) is held (kq.held) until the owner reports them durable
// (KeepDurable): nothing is acknowledged to a remote that the keep does
// not hold yet. A full store queue holds the writes in the core
// (kq.backlog), in order, and answers new joins keep_busy (keepBusy), so
// the owner never waits for the disk. A failed write fails the keep for
// good: nothing more is written, what was held is dropped (keep_failed),
// and joins are answered keep_busy; the owner logs it and the stack's Err
// reports it after Close.

// KeepDurable takes the owner's report that every write the store took, up
// to the store's sequence number seq, is durable, or, with err, that the
// store failed. The datagrams held for the writes now durable are queued
// to send (Out), and the writes waiting for room are given to the store.
func (c *Core) KeepDurable(seq uint64, err error, now time.Time) {
	c.now = now
	q := &c.kept.queue
	i := 0
	for i < len(q.sent) && q.sent[i].store <= seq {
		q.durable = q.sent[i].seq
		i++
	}
	q.sent = append(q.sent[:0], q.sent[i:]...)
	if err != nil {
		c.keepFailed(err)
		return
	}
	c.submitBacklog()
	c.releaseHeld()
}

// KeepPending reports whether some write made is not yet durable (nor
// failed).
func (c *Core) KeepPending() bool {
	return c.kept.queue.err == nil && c.kept.queue.made > c.kept.queue.durable
}

// keepWrite makes w, the next write, and holds what is sent to at (if
// valid) until it is durable.
func (c *Core) keepWrite(w *keepWrite, at netip.AddrPort) {
	q := &c.kept.queue
	if q.err != nil {
		return // failed: nothing more is written (logged when it failed)
	}
	q.made++
	w.seq = q.made
	if at.IsValid() {
		if q.holds == nil {
			q.holds = make(map[netip.AddrPort]uint64)
		}
		q.holds[at] = w.seq
	}
	w.at = at
	if len(q.backlog) > 0 || len(q.sent) > 0 {
		c.backlogAdd(w) // the next batch: after the one being written
		return
	}
	if !c.submit(w) {
		q.full = true
		c.backlogAdd(w)
	}
}

// backlogAdd queues w for the next batch, in place of a write of the same
// file queued there before (a remote's estate when it joins, and again when
// it allows): what waited on that write to the address it was made for
// waits for w now.
func (c *Core) backlogAdd(w *keepWrite) {
	q := &c.kept.queue
	id := w.file()
	if old := q.queued[id]; old != nil {
		old.dropped = true
		if old.at.IsValid() {
			if q.holds[old.at] < w.seq {
				q.holds[old.at] = w.seq
			}
			for i := range q.held {
				if h := &q.held[i]; h.seq >= old.seq && h.seq < w.seq && h.d.To == old.at {
					h.seq = w.seq
				}
			}
		}
	}
	if q.queued == nil {
		q.queued = make(map[fileID]*keepWrite)
	}
	q.queued[id] = w
	q.backlog = append(q.backlog, w)
}

// submit gives w to the store; false when its queue is full.
func (c *Core) submit(w *keepWrite) bool {
	q := &c.kept.queue
	s, err := c.store.write(w)
	switch {
	case errors.Is(err, errKeepFull):
		return false
	case errors.Is(err, keep.ErrWriterFailed), errors.Is(err, keep.ErrWriterClosed):
		c.keepFailed(err)
		return true
	case err != nil:
		// A record the keep refuses (it cannot be written as it is): as
		// the keep did before writing behind, log it and go on.
		c.log.Error("raet: keep write", "err", err)
		s = 0
	}
	switch {
	case s != 0:
		q.sent = append(q.sent, sentWrite{seq: w.seq, store: s})
	case len(q.sent) > 0:
		q.sent = append(q.sent, sentWrite{seq: w.seq, store: q.sent[len(q.sent)-1].store})
	default:
		q.durable = w.seq
	}
	return true
}

// submitBacklog gives the store the writes made while the last batch was
// written (or that found no room), in order, once that batch is durable.
func (c *Core) submitBacklog() {
	q := &c.kept.queue
	if len(q.sent) > 0 {
		return
	}
	n := 0
	for _, w := range q.backlog {
		if q.err != nil {
			return
		}
		if !w.dropped {
			if !c.submit(w) {
				q.full = true
				break
			}
		}
		if q.queued[w.file()] == w {
			delete(q.queued, w.file())
		}
		n++
	}
	q.backlog = dropFirst(q.backlog, n)
	if len(q.backlog) == 0 {
		q.full = false
	}
}

// releaseHeld queues the held datagrams whose writes are durable.
func (c *Core) releaseHeld() {
	q := &c.kept.queue
	kept := q.held[:0]
	for _, h := range q.held {
		if h.seq <= q.durable {
			c.tx.push(h.d)
		} else {
			kept = append(kept, h)
		}
	}
	clear(q.held[len(kept):])
	q.held = kept
	for a, s := range q.holds {
		if s <= q.durable {
			delete(q.holds, a)
		}
	}
}

// heldFor says whether what is sent to `to` waits for a write, and which;
// once the keep failed, what waited on it never goes.
func (c *Core) heldFor(to netip.AddrPort) (uint64, bool) {
	if len(c.kept.queue.holds) == 0 {
		return 0, false
	}
	s, ok := c.kept.queue.holds[to]
	return s, ok && (s > c.kept.queue.durable || c.kept.queue.err != nil)
}

// hold holds d until write seq is durable; it drops it if the keep failed.
func (c *Core) hold(seq uint64, d Datagram) {
	if c.kept.queue.err != nil {
		d.Release()
		c.stats.drop(dropKeepFailed)
		return
	}
	c.kept.queue.held = append(c.kept.queue.held, heldDatagram{seq: seq, d: d})
}

// keepFailed fails the keep for good with err.
func (c *Core) keepFailed(err error) {
	q := &c.kept.queue
	if q.err != nil {
		return
	}
	q.err = err
	c.log.Error("raet: the keep cannot be written: joins are refused (keep_busy), and what waited on the keep is dropped",
		"err", err, "held", len(q.held), "unwritten", q.made-q.durable)
	for i := range q.held {
		q.held[i].d.Release()
		c.stats.drop(dropKeepFailed)
	}
	q.held, q.backlog, q.queued, q.sent = nil, nil, nil, nil // q.holds stay: nothing goes where they are
}

// KeepErr is the store's failure, nil while it writes.
func (c *Core) KeepErr() error { return c.kept.queue.err }

// keepBusy says whether a join must wait for the keep: it failed, its queue
// is full, or the writes not yet durable reach Config.KeepQueue (half of it
// for a stranger's join, so that known remotes still find room).
func (c *Core) keepBusy(stranger bool) bool {
	q := &c.kept.queue
	if q.err != nil || q.full {
		return true
	}
	limit := uint64(c.cfg.KeepQueue)
	if stranger {
		limit /= 2
	}
	return q.made-q.durable >= limit
}

// keepBusyHint is what an operator can do about a busy keep.
func (c *Core) keepBusyHint() string {
	if err := c.kept.queue.err; err != nil {
		return fmt.Sprintf("the keep cannot be written (%v): mend it and restart this estate", err)
	}
	return "the keep is writing what came before: the joiner asks again; if it lasts, the keep's disk is too slow for the joins (Config.KeepQueue)"
}

// --- the table --------------------------------------------------------------

func (c *Core) loadRoles() {
	roles, err := c.store.loadRoles()
	if err != nil {
		c.log.Warn("raet: some kept roles were not loaded", "err", err)
	}
	for _, r := range roles {
		c.kept.roles[r.Role] = &keptRole{rec: r}
	}
}

// keptRoleOf is role's record in the table; once the table lost records of
// forgotten remotes (rolesEvicted, evictRole) a role it does not hold is
// read from the store, so that the table still decides as if it held all.
func (c *Core) keptRoleOf(role string) (*keptRole, error) {
	if kr := c.kept.roles[role]; kr != nil || !c.kept.evicted {
		return kr, nil
	}
	if err := c.rereadRole(role); err != nil {
		return nil, err
	}
	return c.kept.roles[role], nil
}

// evictRole drops role's record from the table, for a remote forgotten:
// the store holds it (its last write is durable), and keptRoleOf reads it
// again when it is needed, so that a main whose remotes all left holds
// none of their records.
func (c *Core) evictRole(role string) {
	if kr := c.kept.roles[role]; kr != nil && kr.seq <= c.kept.queue.durable && c.kept.queue.err == nil {
		delete(c.kept.roles, role)
		c.kept.evicted = true
	}
}

// rereadRole takes role's record from the store again (an operator may
// have changed it), unless a write of it is not yet durable.
func (c *Core) rereadRole(role string) error {
	kr := c.kept.roles[role]
	if kr != nil && kr.seq > c.kept.queue.durable {
		return nil
	}
	rec, ok, err := c.store.readRole(role)
	switch {
	case err != nil:
		return err
	case !ok:
		delete(c.kept.roles, role)
	case kr != nil:
		kr.rec = rec
	default:
		c.kept.roles[role] = &keptRole{rec: rec}
	}
	return nil
}

// statusRole applies the acceptance policy auto to the keys offered for
// role (keep.Decide), from the table, re-reading a record that is not
// accepted; a new record is written, and what is sent to at waits for it.
func (c *Core) statusRole(auto keep.AutoMode, role string, ver keys.VerifyKey, pub keys.PublicKey, at netip.AddrPort) (keep.Acceptance, error) {
	if kr := c.kept.roles[role]; kr != nil && kr.rec.Acceptance != keep.Accepted {
		if err := c.rereadRole(role); err != nil {
			return keep.Rejected, err
		}
	}
	var stored *keep.RemoteRole
	kr, err := c.keptRoleOf(role)
	if err != nil {
		return keep.Rejected, err
	}
	if kr != nil {
		stored = &kr.rec
	}
	status, write, err := keep.Decide(auto, stored, ver, pub)
	if err != nil {
		return keep.Rejected, fmt.Errorf("keep: status of role %q: %w", role, err)
	}
	if write {
		kr := &keptRole{rec: keep.RemoteRole{Role: role, Acceptance: status, Verify: ver, Public: pub}}
		c.kept.roles[role] = kr
		w := &keepWrite{op: opSaveRole, role: kr.rec}
		c.keepWrite(w, at)
		kr.seq = w.seq
	}
	return status, nil
}

// roleStatus is role's acceptance, re-read (an operator may have changed
// it); known is false when it has no record.
func (c *Core) roleStatus(role string) (status keep.Acceptance, known bool, err error) {
	if err := c.rereadRole(role); err != nil {
		return keep.Rejected, false, err
	}
	kr := c.kept.roles[role]
	if kr == nil {
		return keep.Pending, false, nil
	}
	return kr.rec.Acceptance, true, nil
}

// forgetPending deletes role's record if its keys are still pending.
func (c *Core) forgetPending(role string) {
	if kr := c.kept.roles[role]; kr != nil && kr.rec.Acceptance == keep.Pending {
		delete(c.kept.roles, role)
		c.keepWrite(&keepWrite{op: opDeleteRole, name: role}, netip.AddrPort{})
	}
}

// saveRemote writes r's estate; with hold, what is sent to r waits for it.
func (c *Core) saveRemote(r *remote, hold bool) {
	if !r.added {
		return
	}
	var at netip.AddrPort
	if hold {
		at = r.ha
	}
	e := r.estate()
	r.keptSid = e.SID
	c.keepWrite(&keepWrite{op: opSaveRemote, remote: e}, at)
}

// deleteRemote deletes the estate of the remote named name.
func (c *Core) deleteRemote(name string) {
	c.keepWrite(&keepWrite{op: opDeleteRemote, name: name}, netip.AddrPort{})
}

// saveLocal writes the local estate and its role keys, at Start: the
// uids given since are the kept remotes' (see loadRemotes).
func (c *Core) saveLocal() {
	c.keepWrite(&keepWrite{op: opSaveLocal,
		local:     keep.LocalEstate{Name: c.local.name, UID: c.local.uid, HA: c.local.aha, FQDN: c.local.fqdn, SID: c.local.sid, PUID: c.local.puid, AHA: c.local.aha, Role: c.local.role},
		localRole: keep.LocalRole{Role: c.local.role, Seed: c.local.signing.Seed, Private: c.local.box.Private}}, netip.AddrPort{})
}

// WriteBehind has the core's writes to its DiskStore go to w (a
// keep.Writer of that keep) from now on: the core queues them with w, and
// the owner reports them durable with KeepDurable (w's
// WriterConfig.OnDurable). w must be the only writer of the keep while the
// core runs; its Queue must hold at least 2 writes (a local estate's).
func (c *Core) WriteBehind(w *keep.Writer) error {
	d, ok := c.store.(*diskStore)
	if !ok {
		return errors.New("raet: only a keep on disk is written behind")
	}
	d.w = w
	return nil
}
