package core

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
)

// Store is where a core persists its estates and decides key acceptance:
// the on-disk keep (DiskStore), or memory (MemStore).
type Store interface {
	loadLocal() (keep.LocalEstate, keep.LocalRole, bool, error)
	saveLocal(keep.LocalEstate, keep.LocalRole) error
	// loadRemotes returns every kept remote with its role's keys and
	// acceptance; remotes whose files are unusable come back as errors.
	loadRemotes() ([]keptRemote, error)
	// loadRemote returns the kept remote named name with its role's keys
	// and acceptance.
	loadRemote(name string) (keptRemote, error)
	saveRemote(keep.RemoteEstate) error
	deleteRemote(name string) error
	// statusRole applies the acceptance policy to keys offered for role.
	statusRole(role string, ver keys.VerifyKey, pub keys.PublicKey) (keep.Acceptance, error)
	// statusRoleAs is statusRole under the acceptance mode auto.
	statusRoleAs(auto keep.AutoMode, role string, ver keys.VerifyKey, pub keys.PublicKey) (keep.Acceptance, error)
	// roleStatus re-reads the stored acceptance of role (an operator may
	// have changed it).
	roleStatus(role string) (keep.Acceptance, bool, error)
	// forgetPending deletes role's record if its keys are still pending.
	forgetPending(role string) error
}

type keptRemote struct {
	est  keep.RemoteEstate
	role keep.RemoteRole
}

// diskStore is the reference-compatible keep.
type diskStore struct{ k *keep.Keep }

// DiskStore is the reference-compatible keep k.
func DiskStore(k *keep.Keep) Store { return diskStore{k} }

// MemStore keeps everything in memory, deciding acceptance with policy
// auto as a keep does.
func MemStore(auto keep.AutoMode) Store { return newMemStore(auto) }

func (d diskStore) loadLocal() (keep.LocalEstate, keep.LocalRole, bool, error) {
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

func (d diskStore) saveLocal(e keep.LocalEstate, r keep.LocalRole) error {
	if err := d.k.SaveLocalRole(r); err != nil {
		return err
	}
	return d.k.SaveLocal(e)
}

func (d diskStore) loadRemotes() ([]keptRemote, error) {
	ests, err := d.k.LoadRemotes()
	var out []keptRemote
	for _, e := range ests {
		r, rerr := d.k.LoadRemoteRole(e.Role)
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("remote %q: %w", e.Name, rerr))
			continue
		}
		out = append(out, keptRemote{est: e, role: r})
	}
	return out, err
}

func (d diskStore) loadRemote(name string) (keptRemote, error) {
	e, err := d.k.LoadRemote(name)
	if err != nil {
		return keptRemote{}, err
	}
	r, err := d.k.LoadRemoteRole(e.Role)
	if err != nil {
		return keptRemote{}, fmt.Errorf("remote %q: %w", name, err)
	}
	return keptRemote{est: e, role: r}, nil
}

func (d diskStore) saveRemote(e keep.RemoteEstate) error { return d.k.SaveRemote(e) }
func (d diskStore) deleteRemote(name string) error {
	err := d.k.DeleteRemote(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (d diskStore) statusRole(role string, ver keys.VerifyKey, pub keys.PublicKey) (keep.Acceptance, error) {
	return d.k.StatusRole(role, ver, pub)
}

func (d diskStore) statusRoleAs(auto keep.AutoMode, role string, ver keys.VerifyKey, pub keys.PublicKey) (keep.Acceptance, error) {
	return d.k.StatusRoleAs(auto, role, ver, pub)
}

func (d diskStore) roleStatus(role string) (keep.Acceptance, bool, error) {
	r, err := d.k.LoadRemoteRole(role)
	if errors.Is(err, fs.ErrNotExist) {
		return keep.Pending, false, nil
	}
	if err != nil {
		return keep.Rejected, false, err
	}
	return r.Acceptance, true, nil
}

func (d diskStore) forgetPending(role string) error {
	r, err := d.k.LoadRemoteRole(role)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || r.Acceptance != keep.Pending {
		return err
	}
	return d.k.DeleteRemoteRole(role)
}

// memStore keeps everything in memory, deciding acceptance with the same
// policy as the keep.
type memStore struct {
	mu      sync.Mutex
	auto    keep.AutoMode
	local   *keep.LocalEstate
	role    keep.LocalRole
	remotes map[string]keep.RemoteEstate
	roles   map[string]keep.RemoteRole
}

func newMemStore(auto keep.AutoMode) *memStore {
	return &memStore{auto: auto, remotes: map[string]keep.RemoteEstate{}, roles: map[string]keep.RemoteRole{}}
}

func (m *memStore) loadLocal() (keep.LocalEstate, keep.LocalRole, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.local == nil {
		return keep.LocalEstate{}, keep.LocalRole{}, false, nil
	}
	return *m.local, m.role, true, nil
}

func (m *memStore) saveLocal(e keep.LocalEstate, r keep.LocalRole) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.local, m.role = &e, r
	return nil
}

func (m *memStore) loadRemotes() ([]keptRemote, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []keptRemote
	for _, e := range m.remotes {
		if r, ok := m.roles[e.Role]; ok {
			out = append(out, keptRemote{est: e, role: r})
		}
	}
	return out, nil
}

func (m *memStore) loadRemote(name string) (keptRemote, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.remotes[name]
	r, rok := m.roles[e.Role]
	if !ok || !rok {
		return keptRemote{}, fmt.Errorf("remote %q: %w", name, fs.ErrNotExist)
	}
	return keptRemote{est: e, role: r}, nil
}

func (m *memStore) saveRemote(e keep.RemoteEstate) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remotes[e.Name] = e
	return nil
}

func (m *memStore) deleteRemote(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.remotes, name)
	return nil
}

func (m *memStore) statusRole(role string, ver keys.VerifyKey, pub keys.PublicKey) (keep.Acceptance, error) {
	return m.statusRoleAs(m.auto, role, ver, pub)
}

func (m *memStore) statusRoleAs(auto keep.AutoMode, role string, ver keys.VerifyKey, pub keys.PublicKey) (keep.Acceptance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var stored *keep.RemoteRole
	if r, ok := m.roles[role]; ok {
		stored = &r
	}
	status, write, err := keep.Decide(auto, stored, ver, pub)
	if err != nil {
		return keep.Rejected, err
	}
	if write {
		m.roles[role] = keep.RemoteRole{Role: role, Acceptance: status, Verify: ver, Public: pub}
	}
	return status, nil
}

func (m *memStore) roleStatus(role string) (keep.Acceptance, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.roles[role]
	if !ok {
		return keep.Pending, false, nil
	}
	return r.Acceptance, true, nil
}

func (m *memStore) forgetPending(role string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.roles[role]; ok && r.Acceptance == keep.Pending {
		delete(m.roles, role)
	}
	return nil
}
