package keep

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// The uid index: uid/<uid>, one small file for each remote estate, holding
// the estate's name (no newline), so that the estate a packet names by
// uid is found without a table in memory (LoadRemoteUID). A road stack
// forgets remotes silent for long (its memory holds none of them), and
// one that comes back names only its uid; a main that forgot ten thousand
// finds each of them here, in two reads, and holds nothing for them.
//
// The index serves the estate files, never the other way round: every
// lookup checks that the estate file it names still has the uid, and an
// entry that does not (the estate deleted, renamed, or given to another
// uid) is as none. Each SaveRemote (of a Keep or a Writer) writes its
// estate's entry after the estate, unless it is there already, and
// without a sync of its own; DeleteRemote leaves the entry, which then
// names nothing. ReindexUIDs makes the index name exactly the estates a
// caller loaded (a road stack's start, which reads them all anyway), so
// an entry a crash lost or the reference never wrote (it knows no index)
// is made again, and the stale ones go. The reference ignores the
// directory: it reads only local, remote and role.

// uidDir is the index's directory in the keep.
const uidDir = "uid"

// uidPath is the index entry of uid.
func (k *Keep) uidPath(uid uint32) string {
	return filepath.Join(k.dir, uidDir, strconv.FormatUint(uint64(uid), 10))
}

// LoadRemoteUID reads the remote estate whose uid is uid, by the uid
// index. When the index has no entry for uid, or its entry names an estate
// that is gone or has another uid now, the error wraps fs.ErrNotExist; an
// entry that is not a name wraps ErrCorrupt (it is left in place: the
// next ReindexUIDs mends it). Otherwise its errors are LoadRemote's.
func (k *Keep) LoadRemoteUID(uid uint32) (RemoteEstate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	path := k.uidPath(uid)
	name, err := readUIDEntry(path)
	if err != nil {
		return RemoteEstate{}, &FileError{Op: "load", Path: path, Err: err}
	}
	e, err := k.loadRemote(name)
	if err != nil {
		return RemoteEstate{}, err
	}
	if e.UID != uid {
		return RemoteEstate{}, &FileError{Op: "load", Path: path,
			Err: fmt.Errorf("names estate %q, whose uid is %d now: %w", name, e.UID, fs.ErrNotExist)}
	}
	return e, nil
}

// readUIDEntry is the name in the index entry at path.
func readUIDEntry(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxNameLen+1))
	if err != nil {
		return "", err
	}
	if err := CheckName(string(b)); err != nil {
		return "", fmt.Errorf("%w: uid index entry: %w", ErrCorrupt, err)
	}
	return string(b), nil
}

// indexUID makes uid's index entry name name, unless it does already; the
// caller holds k.mu. The entry is written atomically but not synced: a
// crash may lose it, and ReindexUIDs makes it again.
func (k *Keep) indexUID(uid uint32, name string) error {
	path := k.uidPath(uid)
	if old, err := readUIDEntry(path); err == nil && old == name {
		return nil
	}
	if err := k.writeAtomic(path, []byte(name), false); err != nil {
		return &FileError{Op: "save", Path: path, Err: err}
	}
	return nil
}

// ReindexUIDs makes the uid index name exactly the estates es: each
// estate's entry is written where it is missing or names another, and the
// entries of uids that none of es has are removed. es are the estates
// LoadRemotes returned; where two have the same uid, the later in es
// keeps the entry. It returns the errors of the entries it could not
// mend, joined; the others are mended even so.
func (k *Keep) ReindexUIDs(es []RemoteEstate) error {
	if k.readOnly {
		return &FileError{Op: "save", Path: filepath.Join(k.dir, uidDir), Err: ErrReadOnly}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	names := make(map[uint32]string, len(es))
	for _, e := range es {
		names[e.UID] = e.Name
	}
	dir := filepath.Join(k.dir, uidDir)
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &FileError{Op: "list", Path: dir, Err: err}
	}
	var errs []error
	for _, ent := range ents {
		uid, perr := strconv.ParseUint(ent.Name(), 10, 32)
		if perr != nil || ent.IsDir() || strconv.FormatUint(uid, 10) != ent.Name() {
			continue // not an entry (a temporary file: Open removes those)
		}
		if _, ok := names[uint32(uid)]; !ok {
			path := filepath.Join(dir, ent.Name())
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, &FileError{Op: "delete", Path: path, Err: err})
			}
		}
	}
	for uid, name := range names {
		if err := k.indexUID(uid, name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
