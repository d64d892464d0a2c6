package keep

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// File and directory names of the layout, as the reference names them.
const (
	localDir      = "local"
	remoteDir     = "remote"
	roleDir       = "role"
	estatePrefix  = "estate" // the reference RoadKeep's file prefix
	rolePrefix    = "role"
	ext           = ".json"
	tempPrefix    = ".raet-keep-"
	tempSuffix    = ".tmp"
	asideInfix    = ".corrupt."
	dirPerm       = 0o700
	filePerm      = 0o600
	maxAsideTries = 1000
)

// Config holds the options of Open. The zero value, and a nil *Config, give
// the reference's defaults.
type Config struct {
	// Auto is the acceptance mode of StatusRole. The zero value is
	// AutoNever: keys of a new role wait as pending for an operator.
	Auto AutoMode
	// MustExist makes Open fail, with an error wrapping fs.ErrNotExist,
	// when dir does not exist, instead of creating it: for commands that
	// only read or change a keep a stack made, where a typing error in the
	// directory should not make an empty keep.
	MustExist bool
	// UnjoinedTTL is how long, under AutoAlways, an accepted role record
	// that no remote estate names (a join that never completed, such as
	// one from a spoofed address) stays on disk; 0 means
	// DefaultUnjoinedTTL, a negative value keeps them for good (as before
	// it existed). See ExpireUnjoined.
	UnjoinedTTL time.Duration
	// MaxUnjoined bounds those records on disk, the oldest removed beyond
	// it; 0 means DefaultMaxUnjoined.
	MaxUnjoined int
}

// Keep is a keep directory opened by Open. Its methods are safe for
// concurrent use.
type Keep struct {
	dir      string
	auto     AutoMode
	readOnly bool // OpenReadOnly: nothing is written, created or moved
	// unjoined tracks the role records of joins never completed under
	// AutoAlways (unjoined.go); nil when not tracked.
	unjoined *unjoined

	mu sync.Mutex

	// afterTempWrite, if set (by tests), runs after the temporary file is
	// written and synced and before it is renamed over the target; a non-nil
	// error aborts the write as a crash at that point would, except that the
	// temporary file is removed.
	afterTempWrite func(tmp, target string) error
}

// Open opens the keep in dir, creating dir and its subdirectories (local,
// remote, role/local, role/remote, and uid for the uid index) with mode 0700 where they are missing;
// existing directories keep their mode. It removes temporary files left by an
// interrupted write, unless a stack holds the keep (Lock): then they may be
// its writes under way (Config.MustExist refuses a missing dir). Unlike the reference it never falls back to another
// directory: dir is used or Open fails.
func Open(dir string, cfg *Config) (*Keep, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if !cfg.Auto.Valid() {
		return nil, fmt.Errorf("keep: open %s: %w: auto mode %d", dir, ErrInvalid, uint8(cfg.Auto))
	}
	if dir == "" {
		return nil, fmt.Errorf("keep: open: %w: empty directory", ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("keep: open %s: %w", dir, err)
	}
	if cfg.MustExist {
		if err := existingDir(abs); err != nil {
			return nil, err
		}
	}
	k := &Keep{dir: abs, auto: cfg.Auto}
	for _, d := range k.dirs() {
		if err := os.MkdirAll(d, dirPerm); err != nil {
			return nil, fmt.Errorf("keep: open %s: %w", abs, err)
		}
	}
	if k.inUse() {
		return k, nil // another holds it: its records are its to expire
	}
	for _, d := range k.dirs() {
		if err := removeTemps(d); err != nil {
			return nil, fmt.Errorf("keep: open %s: %w", abs, err)
		}
	}
	if u := newUnjoined(cfg); u != nil {
		if err := u.load(k); err != nil {
			return nil, fmt.Errorf("keep: open %s: %w", abs, err)
		}
		k.unjoined = u
	}
	return k, nil
}

// OpenReadOnly opens the keep in dir, which must exist, to read it only:
// it creates nothing, removes no temporary file, and a corrupt file is
// reported (a *FileError wrapping ErrCorrupt, Aside empty) but left where
// it is. A missing subdirectory lists as empty. Every method that would
// write (Save*, Delete*, StatusRole, Accept, Reject, Pend) fails with
// ErrReadOnly. For tools that inspect a keep another process may own,
// such as a dissector.
func OpenReadOnly(dir string) (*Keep, error) {
	if dir == "" {
		return nil, fmt.Errorf("keep: open %s: %w: empty directory", dir, ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("keep: open %s: %w", dir, err)
	}
	if err := existingDir(abs); err != nil {
		return nil, err
	}
	return &Keep{dir: abs, readOnly: true}, nil
}

// existingDir checks that the keep directory abs exists: an error wrapping
// fs.ErrNotExist if it does not, ErrInvalid if it is not a directory.
func existingDir(abs string) error {
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("keep: open %s: %w", abs, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("keep: open %s: %w: not a directory", abs, ErrInvalid)
	}
	return nil
}

// ReadOnly reports whether the keep was opened by OpenReadOnly.
func (k *Keep) ReadOnly() bool { return k.readOnly }

// Dir returns the keep's absolute directory.
func (k *Keep) Dir() string { return k.dir }

// Auto returns the acceptance mode StatusRole uses.
func (k *Keep) Auto() AutoMode { return k.auto }

func (k *Keep) dirs() []string {
	return []string{
		k.dir,
		filepath.Join(k.dir, localDir),
		filepath.Join(k.dir, remoteDir),
		filepath.Join(k.dir, roleDir),
		filepath.Join(k.dir, roleDir, localDir),
		filepath.Join(k.dir, roleDir, remoteDir),
		filepath.Join(k.dir, uidDir),
	}
}

// LocalEstatePath returns the path of local/estate.json.
func (k *Keep) LocalEstatePath() string {
	return filepath.Join(k.dir, localDir, estatePrefix+ext)
}

// LocalRolePath returns the path of role/local/role.json.
func (k *Keep) LocalRolePath() string {
	return filepath.Join(k.dir, roleDir, localDir, rolePrefix+ext)
}

// RemoteEstatePath returns the path of remote/estate.<name>.json, or an
// error wrapping ErrInvalidName.
func (k *Keep) RemoteEstatePath(name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", fmt.Errorf("keep: remote estate: %w", err)
	}
	return filepath.Join(k.dir, remoteDir, estatePrefix+"."+name+ext), nil
}

// RemoteRolePath returns the path of role/remote/role.<role>.json, or an
// error wrapping ErrInvalidName.
func (k *Keep) RemoteRolePath(role string) (string, error) {
	if err := CheckName(role); err != nil {
		return "", fmt.Errorf("keep: remote role: %w", err)
	}
	return filepath.Join(k.dir, roleDir, remoteDir, rolePrefix+"."+role+ext), nil
}

// LoadLocal reads local/estate.json. A missing file gives a *FileError
// wrapping fs.ErrNotExist; a corrupt one is moved aside and gives a
// *FileError wrapping ErrCorrupt.
func (k *Keep) LoadLocal() (LocalEstate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var e LocalEstate
	err := k.load(k.LocalEstatePath(), e.UnmarshalJSON, nil)
	return e, err
}

// SaveLocal writes e to local/estate.json atomically. It fails with an error
// wrapping ErrInvalid if e does not pass Validate.
func (k *Keep) SaveLocal(e LocalEstate) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.save(k.LocalEstatePath(), e.MarshalJSON)
}

// DeleteLocal removes local/estate.json; a missing file is not an error.
func (k *Keep) DeleteLocal() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.remove(k.LocalEstatePath())
}

// LoadLocalRole reads role/local/role.json (the local secret keys). Errors
// are as for LoadLocal.
func (k *Keep) LoadLocalRole() (LocalRole, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var r LocalRole
	err := k.load(k.LocalRolePath(), r.UnmarshalJSON, nil)
	return r, err
}

// SaveLocalRole writes r to role/local/role.json atomically, mode 0600.
func (k *Keep) SaveLocalRole(r LocalRole) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.save(k.LocalRolePath(), r.MarshalJSON)
}

// DeleteLocalRole removes role/local/role.json; a missing file is not an
// error.
func (k *Keep) DeleteLocalRole() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.remove(k.LocalRolePath())
}

// LoadRemote reads remote/estate.<name>.json. Besides the errors of
// LoadLocal, a file whose "name" field differs from name is corrupt.
func (k *Keep) LoadRemote(name string) (RemoteEstate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loadRemote(name)
}

func (k *Keep) loadRemote(name string) (RemoteEstate, error) {
	var e RemoteEstate
	path, err := k.RemoteEstatePath(name)
	if err != nil {
		return e, err
	}
	err = k.load(path, e.UnmarshalJSON, func() error {
		if e.Name != name {
			return corruptf("field \"name\" is %q but the file is named for %q", e.Name, name)
		}
		return nil
	})
	if err != nil {
		return RemoteEstate{}, err
	}
	return e, nil
}

// SaveRemote writes e to remote/estate.<e.Name>.json atomically, and then
// its uid index entry (see LoadRemoteUID) unless it is there already.
func (k *Keep) SaveRemote(e RemoteEstate) error {
	if err := k.saveRemote(e); err != nil {
		return err
	}
	_, err := k.ExpireUnjoined()
	return err
}

func (k *Keep) saveRemote(e RemoteEstate) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	path, err := k.RemoteEstatePath(e.Name)
	if err != nil {
		return err
	}
	if k.unjoined != nil {
		if r, ok := k.unjoined.estate(e.Role); ok {
			if err := k.saveRemoteRole(r); err != nil {
				k.unjoined.unestate(r)
				return err
			}
		}
	}
	if err := k.save(path, e.MarshalJSON); err != nil {
		return err
	}
	return k.indexUID(e.UID, e.Name)
}

// DeleteRemote removes remote/estate.<name>.json; a missing file is not an
// error. Its uid index entry stays, naming nothing (see LoadRemoteUID).
func (k *Keep) DeleteRemote(name string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	path, err := k.RemoteEstatePath(name)
	if err != nil {
		return err
	}
	return k.remove(path)
}

// RemoteNames lists the names of the remote estate files, sorted. Files that
// do not match estate.<name>.json with a valid name (temporary files, files
// moved aside, .msgpack files) are skipped.
func (k *Keep) RemoteNames() ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.listNames(filepath.Join(k.dir, remoteDir), estatePrefix)
}

// LoadRemotes loads every remote estate listed by RemoteNames, sorted by
// name. The estates that load are returned even when others fail; the error
// then joins one *FileError per failed file (corrupt ones are moved aside).
func (k *Keep) LoadRemotes() ([]RemoteEstate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	names, err := k.listNames(filepath.Join(k.dir, remoteDir), estatePrefix)
	if err != nil {
		return nil, err
	}
	var out []RemoteEstate
	var errs []error
	for _, n := range names {
		e, err := k.loadRemote(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// LoadRemoteRole reads role/remote/role.<role>.json. Besides the errors of
// LoadLocal, a file whose "role" field differs from role is corrupt.
func (k *Keep) LoadRemoteRole(role string) (RemoteRole, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.loadRemoteRole(role)
}

func (k *Keep) loadRemoteRole(role string) (RemoteRole, error) {
	var r RemoteRole
	path, err := k.RemoteRolePath(role)
	if err != nil {
		return r, err
	}
	err = k.load(path, r.UnmarshalJSON, func() error {
		if r.Role != role {
			return corruptf("field \"role\" is %q but the file is named for %q", r.Role, role)
		}
		return nil
	})
	if err != nil {
		return RemoteRole{}, err
	}
	return r, nil
}

// SaveRemoteRole writes r to role/remote/role.<r.Role>.json atomically.
// Under AutoAlways an accepted record no estate names is unjoined (see
// Config.UnjoinedTTL): this save removes those that are due.
func (k *Keep) SaveRemoteRole(r RemoteRole) error {
	k.mu.Lock()
	err := k.saveRemoteRole(r)
	k.mu.Unlock()
	if err != nil {
		return err
	}
	if k.unjoined != nil {
		k.unjoined.saved(r, time.Now())
	}
	_, err = k.ExpireUnjoined()
	return err
}

func (k *Keep) saveRemoteRole(r RemoteRole) error {
	path, err := k.RemoteRolePath(r.Role)
	if err != nil {
		return err
	}
	return k.save(path, r.MarshalJSON)
}

// DeleteRemoteRole removes role/remote/role.<role>.json; a missing file is
// not an error.
func (k *Keep) DeleteRemoteRole(role string) error {
	if k.unjoined != nil {
		k.unjoined.decided(role)
	}
	return k.removeRole(role)
}

// RoleNames lists the roles of the remote role files, sorted, skipping files
// that do not match role.<role>.json with a valid role.
func (k *Keep) RoleNames() ([]string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.listNames(filepath.Join(k.dir, roleDir, remoteDir), rolePrefix)
}

// LoadRemoteRoles loads every remote role listed by RoleNames, sorted by
// role, with errors as for LoadRemotes.
func (k *Keep) LoadRemoteRoles() ([]RemoteRole, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	roles, err := k.listNames(filepath.Join(k.dir, roleDir, remoteDir), rolePrefix)
	if err != nil {
		return nil, err
	}
	var out []RemoteRole
	var errs []error
	for _, role := range roles {
		r, err := k.loadRemoteRole(role)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

// load reads path and decodes it with decode, then runs check (if any). A
// decode or check failure moves the file aside and returns a *FileError
// wrapping ErrCorrupt.
func (k *Keep) load(path string, decode func([]byte) error, check func() error) error {
	data, err := readFile(path)
	if err != nil {
		return &FileError{Op: "load", Path: path, Err: err}
	}
	err = decode(data)
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrCorrupt) {
		err = fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	fe := &FileError{Op: "load", Path: path, Err: err}
	if k.readOnly {
		return fe
	}
	aside, merr := moveAside(path)
	if merr != nil {
		fe.Err = errors.Join(err, fmt.Errorf("could not move it aside: %w", merr))
	} else {
		fe.Aside = aside
	}
	return fe
}

// readFile reads at most maxFileSize+1 bytes of path, so that an oversized
// file is refused without being read whole.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxFileSize+1))
}

// moveAside renames path to path.corrupt.<n> for the smallest n >= 1 not in
// use, and syncs the directory.
func moveAside(path string) (string, error) {
	for n := 1; n <= maxAsideTries; n++ {
		aside := path + asideInfix + strconv.Itoa(n)
		if _, err := os.Lstat(aside); err == nil {
			continue
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if err := os.Rename(path, aside); err != nil {
			return "", err
		}
		return aside, syncDir(filepath.Dir(path))
	}
	return "", fmt.Errorf("%d files already moved aside", maxAsideTries)
}

// save encodes with marshal and writes the result to path atomically.
func (k *Keep) save(path string, marshal func() ([]byte, error)) error {
	if k.readOnly {
		return &FileError{Op: "save", Path: path, Err: ErrReadOnly}
	}
	data, err := marshal()
	if err != nil {
		return fmt.Errorf("keep: save %s: %w", path, err)
	}
	if err := k.writeAtomic(path, data, true); err != nil {
		return &FileError{Op: "save", Path: path, Err: err}
	}
	return nil
}

// writeAtomic writes data to a temporary file beside path, syncs it (if
// durable), renames it over path and syncs the directory (if durable). On
// failure the temporary file is removed and path is untouched.
func (k *Keep) writeAtomic(path string, data []byte, durable bool) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, tempPrefix+"*"+tempSuffix)
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(filePerm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if durable {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if k.afterTempWrite != nil {
		if err = k.afterTempWrite(tmp, path); err != nil {
			return err
		}
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return syncDir(dir)
}

// remove deletes path if it exists and syncs its directory.
func (k *Keep) remove(path string) error {
	if k.readOnly {
		return &FileError{Op: "delete", Path: path, Err: ErrReadOnly}
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return &FileError{Op: "delete", Path: path, Err: err}
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return &FileError{Op: "delete", Path: path, Err: err}
	}
	return nil
}

// syncDir fsyncs a directory so that a rename or removal in it is durable.
// Platforms that cannot sync a directory (EINVAL) are tolerated.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	cerr := d.Close()
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return cerr
}

// isTemp reports whether a file name is one of our temporary files.
func isTemp(name string) bool {
	return strings.HasPrefix(name, tempPrefix) && strings.HasSuffix(name, tempSuffix)
}

// removeTemps deletes leftover temporary files in dir.
func removeTemps(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, ent := range ents {
		if ent.Type().IsRegular() && isTemp(ent.Name()) {
			if err := os.Remove(filepath.Join(dir, ent.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// listNames returns the sorted names <n> of the files <prefix>.<n>.json in
// dir whose <n> passes CheckName.
func (k *Keep) listNames(dir, prefix string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if k.readOnly && errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &FileError{Op: "list", Path: dir, Err: err}
	}
	var names []string
	for _, ent := range ents {
		if ent.IsDir() {
			continue
		}
		fn := ent.Name()
		if !strings.HasPrefix(fn, prefix+".") || !strings.HasSuffix(fn, ext) {
			continue
		}
		n := strings.TrimSuffix(strings.TrimPrefix(fn, prefix+"."), ext)
		if len(fn) < len(prefix)+1+len(ext) || CheckName(n) != nil {
			continue
		}
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}
