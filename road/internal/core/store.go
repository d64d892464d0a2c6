package core

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"sync"

	"github.com/raet-go/raet/keep"
)

// Store is where a core keeps its estates: the on-disk keep, written on
// the owner goroutine (DiskStore) or behind it by a keep.Writer
// (WriterStore), or memory (MemStore).
//
// The core reads a store whole when it starts and then decides from its own
// table (keeptab.go); it reads a role's record again only where an operator
// may have changed it (a pended join, a rejected role, an allow). Its writes
// go to write, which never blocks: a store that writes behind returns the
// write's sequence number, and the core holds back what depends on the
// write until the owner reports it durable (Core.KeepDurable).
type Store interface {
	loadLocal() (keep.LocalEstate, keep.LocalRole, bool, error)
	// loadRemotes returns every kept remote estate; those whose files are
	// unusable come back as errors. It mends the uid index to name them
	// (keep.Keep.ReindexUIDs), reporting what it could not mend as errors
	// too.
	loadRemotes() ([]keep.RemoteEstate, error)
	// loadRemoteUID returns the kept remote estate whose uid is uid, from
	// the store's uid index (keep.Keep.LoadRemoteUID), which loadRemotes
	// brings up to date; an error wrapping fs.ErrNotExist says it holds
	// none. It is what recalls a forgotten remote (forget.go): the core
	// holds nothing for it.
	loadRemoteUID(uid uint32) (keep.RemoteEstate, error)
	// loadRoles returns every kept remote role.
	loadRoles() ([]keep.RemoteRole, error)
	// readRole re-reads role's record (an operator may have changed it);
	// ok is false when there is none.
	readRole(role string) (r keep.RemoteRole, ok bool, err error)
	// write makes w, or queues it: seq 0 says it is durable already; else
	// it is durable once KeepDurable reports seq or a later one. It fails
	// with errKeepFull, queuing nothing, when the store's queue is full.
	write(w *keepWrite) (seq uint64, err error)
}

// errKeepFull: a store's write queue is full; the core tries again later.
var errKeepFull = keep.ErrQueueFull

// keepOp is what a keepWrite does.
type keepOp uint8

const (
	opSaveLocal keepOp = iota // the local estate and its role
	opSaveRemote
	opDeleteRemote
	opSaveRole
	opDeleteRole
)

// keepWrite is one write the core makes to its store.
type keepWrite struct {
	op        keepOp
	seq       uint64 // the core's: 1 for its first write, then one more each
	local     keep.LocalEstate
	localRole keep.LocalRole
	remote    keep.RemoteEstate // opSaveRemote
	role      keep.RemoteRole   // opSaveRole
	name      string            // opDeleteRemote: the estate; opDeleteRole: the role
	at        netip.AddrPort    // what is sent there waits for this write (if valid)
	dropped   bool              // replaced by a later write of its file before it went
}

// fileID names a keep file.
type fileID struct {
	kind uint8 // 0 the local estate, 1 a remote estate, 2 a remote role
	name string
}

// file names the file w writes: writes of one file replace each other.
func (w *keepWrite) file() fileID {
	switch w.op {
	case opSaveLocal:
		return fileID{0, ""}
	case opSaveRemote:
		return fileID{1, w.remote.Name}
	case opDeleteRemote:
		return fileID{1, w.name}
	case opSaveRole:
		return fileID{2, w.role.Role}
	}
	return fileID{2, w.name}
}

// apply makes w in k, on the caller's goroutine.
func (w *keepWrite) apply(k *keep.Keep) error {
	switch w.op {
	case opSaveLocal:
		if err := k.SaveLocalRole(w.localRole); err != nil {
			return err
		}
		return k.SaveLocal(w.local)
	case opSaveRemote:
		return k.SaveRemote(w.remote)
	case opDeleteRemote:
		if err := k.DeleteRemote(w.name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	case opSaveRole:
		return k.SaveRemoteRole(w.role)
	}
	return k.DeleteRemoteRole(w.name)
}

// queue queues w with kw and returns the sequence number of its last
// write.
func (w *keepWrite) queue(kw *keep.Writer) (uint64, error) {
	var q *keep.Queued
	var err error
	switch w.op {
	case opSaveLocal:
		if _, err = kw.SaveLocalRole(w.localRole); err != nil {
			return 0, err
		}
		q, err = kw.SaveLocal(w.local)
	case opSaveRemote:
		q, err = kw.SaveRemote(w.remote)
	case opDeleteRemote:
		q, err = kw.DeleteRemote(w.name)
	case opSaveRole:
		q, err = kw.SaveRemoteRole(w.role)
	default:
		q, err = kw.DeleteRemoteRole(w.name)
	}
	if err != nil {
		return 0, err
	}
	return q.Seq(), nil
}

// diskStore is the reference-compatible keep, written behind by w once it
// is set, else on the caller's goroutine.
type diskStore struct {
	k *keep.Keep
	w *keep.Writer
}

// DiskStore is the reference-compatible keep k, written on the goroutine
// that makes the core's calls: each write is durable when the call returns.
func DiskStore(k *keep.Keep) Store { return &diskStore{k: k} }

func (d *diskStore) loadLocal() (keep.LocalEstate, keep.LocalRole, bool, error) {
	e, err := d.k.LoadLocal()
	if errors.Is(err, fs.ErrNotExist) {
		return e, keep.LocalRole{}, false, nil
	}
	if err != nil {
		return e, keep.LocalRole{}, false, err
	}
	r, err := d.k.LoadLocalRole()
	if err != nil {
		return e, r, false, fmt.Errorf("local estate without its role keys: %w", err)
	}
	return e, r, true, nil
}

func (d *diskStore) loadRemotes() ([]keep.RemoteEstate, error) {
	es, err := d.k.LoadRemotes()
	if es == nil && err != nil {
		return nil, err // none read (the listing failed?): the index stays as it is
	}
	return es, errors.Join(err, d.k.ReindexUIDs(es))
}

func (d *diskStore) loadRoles() ([]keep.RemoteRole, error) { return d.k.LoadRemoteRoles() }

func (d *diskStore) loadRemoteUID(uid uint32) (keep.RemoteEstate, error) {
	return d.k.LoadRemoteUID(uid)
}

func (d *diskStore) readRole(role string) (keep.RemoteRole, bool, error) {
	r, err := d.k.LoadRemoteRole(role)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	return r, err == nil, err
}

func (d *diskStore) write(w *keepWrite) (uint64, error) {
	if d.w == nil {
		return 0, w.apply(d.k)
	}
	return w.queue(d.w)
}

// memStore keeps everything in memory.
type memStore struct {
	mu      sync.Mutex
	local   *keep.LocalEstate
	role    keep.LocalRole
	remotes map[string]keep.RemoteEstate
	uids    map[uint32]string // the uid index: the name last saved with each uid
	roles   map[string]keep.RemoteRole
}

// MemStore keeps everything in memory; the core decides acceptance with
// policy auto as a keep does (Config.Auto).
func MemStore() Store { return newMemStore() }

func newMemStore() *memStore {
	return &memStore{remotes: map[string]keep.RemoteEstate{}, uids: map[uint32]string{}, roles: map[string]keep.RemoteRole{}}
}

func (m *memStore) loadLocal() (keep.LocalEstate, keep.LocalRole, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.local == nil {
		return keep.LocalEstate{}, keep.LocalRole{}, false, nil
	}
	return *m.local, m.role, true, nil
}

func (m *memStore) loadRemotes() ([]keep.RemoteEstate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]keep.RemoteEstate, 0, len(m.remotes))
	for _, e := range m.remotes {
		out = append(out, e)
	}
	return out, nil
}

func (m *memStore) loadRemoteUID(uid uint32) (keep.RemoteEstate, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.remotes[m.uids[uid]]
	if !ok || e.UID != uid {
		return keep.RemoteEstate{}, fmt.Errorf("remote of uid %d: %w", uid, fs.ErrNotExist)
	}
	return e, nil
}

func (m *memStore) loadRoles() ([]keep.RemoteRole, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]keep.RemoteRole, 0, len(m.roles))
	for _, r := range m.roles {
		out = append(out, r)
	}
	return out, nil
}

func (m *memStore) readRole(role string) (keep.RemoteRole, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.roles[role]
	return r, ok, nil
}

func (m *memStore) write(w *keepWrite) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch w.op {
	case opSaveLocal:
		e := w.local
		m.local, m.role = &e, w.localRole
	case opSaveRemote:
		m.remotes[w.remote.Name] = w.remote
		m.uids[w.remote.UID] = w.remote.Name
	case opDeleteRemote:
		if e, ok := m.remotes[w.name]; ok && m.uids[e.UID] == w.name {
			delete(m.uids, e.UID)
		}
		delete(m.remotes, w.name)
	case opSaveRole:
		m.roles[w.role.Role] = w.role
	case opDeleteRole:
		delete(m.roles, w.name)
	}
	return 0, nil
}
