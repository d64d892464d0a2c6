package keep

import (
	"errors"
	"os"
	"slices"
	"sync"
	"time"
)

// Role records of remotes that never joined.
//
// Under AutoAlways a road writes an accepted role record for the keys of
// every join request it answers (StatusRole, or the road's own table), before
// the joiner has proved it holds them: a join from a spoofed address writes
// one that no join ever completes. Such records carry no decision (AutoAlways
// accepts any keys, and replaces the stored ones), so the keep removes them:
// a record written under AutoAlways that no remote estate names yet is
// unjoined; it is removed once it is older than Config.UnjoinedTTL, and the
// oldest are removed beyond Config.MaxUnjoined, so that a flood of spoofed
// joins leaves at most MaxUnjoined of them on disk, and none once they
// expire. A record becomes a joined remote's when an estate naming its role
// is saved (the road saves it when the join completes), and is then kept as
// before. A removed record is remembered in memory (up to rememberedPer
// times MaxUnjoined of them: joins of a fleet under way at once may be many
// more than MaxUnjoined), so that a join completing after its record was removed (the road's
// table still holds the keys, so it does not write them again) writes the
// record back before its estate. Records an operator decided (Accept, Reject,
// Pend) and records not accepted are never removed.

// Defaults of Config.UnjoinedTTL and Config.MaxUnjoined.
const (
	DefaultUnjoinedTTL = 5 * time.Minute
	// DefaultMaxUnjoined is the road's default bound on the strangers'
	// joins under way (road.Config.StrangerJoins): as many records as
	// joins that may still complete.
	DefaultMaxUnjoined = 256
)

// unjoined tracks the accepted role records no estate names, under
// AutoAlways. Its own lock: the Writer's goroutine takes it outside the
// Keep's.
// rememberedPer is how many removed records are remembered for a late
// join, per record kept on disk.
const rememberedPer = 16

type unjoined struct {
	ttl time.Duration
	max int

	mu      sync.Mutex
	joined  map[string]struct{}   // roles some saved estate names
	recs    map[string]unjoinedAt // on disk, not joined
	order   []unjoinedAge         // recs by age, oldest first; stale entries skipped
	removed map[string]RemoteRole // removed from disk, remembered for a late join
	rmOrder []string              // removed, oldest first
}

type unjoinedAt struct {
	rec RemoteRole
	at  time.Time
}

type unjoinedAge struct {
	role string
	at   time.Time
}

// newUnjoined returns the tracker for cfg, nil when nothing is tracked (not
// AutoAlways, or a negative UnjoinedTTL).
func newUnjoined(cfg *Config) *unjoined {
	if cfg.Auto != AutoAlways || cfg.UnjoinedTTL < 0 {
		return nil
	}
	u := &unjoined{ttl: cfg.UnjoinedTTL, max: cfg.MaxUnjoined,
		joined: map[string]struct{}{}, recs: map[string]unjoinedAt{}, removed: map[string]RemoteRole{}}
	if u.ttl == 0 {
		u.ttl = DefaultUnjoinedTTL
	}
	if u.max <= 0 {
		u.max = DefaultMaxUnjoined
	}
	return u
}

// load takes the keep's records at Open: an accepted record no estate
// names is unjoined since its file was last written.
func (u *unjoined) load(k *Keep) error {
	estates, err := k.LoadRemotes()
	if err != nil && estates == nil {
		return err
	}
	for _, e := range estates {
		u.joined[e.Role] = struct{}{}
	}
	roles, _ := k.LoadRemoteRoles() // a corrupt one is moved aside and not ours to count
	var ages []unjoinedAge
	for _, r := range roles {
		if _, ok := u.joined[r.Role]; ok || r.Acceptance != Accepted {
			continue
		}
		path, err := k.RemoteRolePath(r.Role)
		if err != nil {
			continue
		}
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		at := fi.ModTime()
		if now := time.Now(); at.After(now) {
			at = now
		}
		u.recs[r.Role] = unjoinedAt{rec: r, at: at}
		ages = append(ages, unjoinedAge{r.Role, at})
	}
	slices.SortFunc(ages, func(a, b unjoinedAge) int { return a.at.Compare(b.at) })
	u.order = ages
	return nil
}

// saved notes a write of role record r at now.
func (u *unjoined) saved(r RemoteRole, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.removed, r.Role)
	if _, ok := u.joined[r.Role]; ok || r.Acceptance != Accepted {
		delete(u.recs, r.Role)
		return
	}
	u.recs[r.Role] = unjoinedAt{rec: r, at: now}
	u.order = append(u.order, unjoinedAge{r.Role, now})
	if len(u.order) > 2*len(u.recs)+64 {
		u.order = slices.DeleteFunc(u.order, func(a unjoinedAge) bool { return !u.current(a) })
	}
}

// decided notes an operator's decision on role, or its record's removal:
// it is not ours to remove.
func (u *unjoined) decided(role string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.recs, role)
	delete(u.removed, role)
}

// estate notes a save of an estate naming role: its record is a joined
// remote's from now on. It returns the record to write back first, if the
// record was removed as unjoined.
func (u *unjoined) estate(role string) (RemoteRole, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.joined[role] = struct{}{}
	delete(u.recs, role)
	r, ok := u.removed[role]
	delete(u.removed, role)
	return r, ok
}

func (u *unjoined) current(a unjoinedAge) bool {
	r, ok := u.recs[a.role]
	return ok && r.at.Equal(a.at)
}

// due returns the roles to remove at now: the expired and those beyond the
// bound, oldest first, and forgets them as on disk (they are remembered as
// removed). next is when the oldest left expires (zero: none left).
func (u *unjoined) due(now time.Time) (roles []string, next time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	i := 0
	for ; i < len(u.order); i++ {
		a := u.order[i]
		if !u.current(a) {
			continue
		}
		if len(u.recs) <= u.max && now.Sub(a.at) < u.ttl {
			next = a.at.Add(u.ttl)
			break
		}
		roles = append(roles, a.role)
		u.remember(u.recs[a.role].rec)
		delete(u.recs, a.role)
	}
	u.order = dropFirst(u.order, i)
	return roles, next
}

// remember keeps removed record r for a late join, the oldest forgotten
// beyond the bound.
func (u *unjoined) remember(r RemoteRole) {
	if _, ok := u.removed[r.Role]; !ok {
		u.rmOrder = append(u.rmOrder, r.Role)
	}
	u.removed[r.Role] = r
	for len(u.removed) > rememberedPer*u.max && len(u.rmOrder) > 0 {
		delete(u.removed, u.rmOrder[0])
		u.rmOrder = dropFirst(u.rmOrder, 1)
	}
	if len(u.rmOrder) > 2*len(u.removed)+64 {
		u.rmOrder = slices.DeleteFunc(u.rmOrder, func(role string) bool { _, ok := u.removed[role]; return !ok })
	}
}

// Unjoined returns the number of role records on disk that the keep
// removes as unjoined when they expire (see Config.UnjoinedTTL); 0 unless
// the keep's mode is AutoAlways.
func (k *Keep) Unjoined() int {
	if k.unjoined == nil {
		return 0
	}
	k.unjoined.mu.Lock()
	defer k.unjoined.mu.Unlock()
	return len(k.unjoined.recs)
}

// ExpireUnjoined removes the unjoined role records that are due (expired,
// or the oldest beyond Config.MaxUnjoined) and returns when the next one
// expires (zero: none). A Writer does it on its goroutine; a keep written
// without one does it at each role or estate save, and whoever holds it
// may call it on a timer.
func (k *Keep) ExpireUnjoined() (next time.Time, err error) {
	if k.unjoined == nil {
		return time.Time{}, nil
	}
	roles, next := k.unjoined.due(time.Now())
	var errs []error
	for _, role := range roles {
		if err := k.removeRole(role); err != nil {
			errs = append(errs, err)
		}
	}
	return next, errors.Join(errs...)
}

// removeRole removes role's record (a missing file is not an error).
func (k *Keep) removeRole(role string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	path, err := k.RemoteRolePath(role)
	if err != nil {
		return err
	}
	return k.remove(path)
}

// unestate undoes estate(role) that returned r, whose write back could not
// be queued: the estate's save fails and will be made again.
func (u *unjoined) unestate(r RemoteRole) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.joined, r.Role)
	u.removed[r.Role] = r
	u.rmOrder = append(u.rmOrder, r.Role)
}

// dropFirst removes the first n elements of s in place.
func dropFirst[T any](s []T, n int) []T {
	if n == 0 {
		return s
	}
	m := copy(s, s[n:])
	clear(s[m:])
	return s[:m]
}
