package keep

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrLocked means a keep directory is in use by a running stack (see
// Keep.Lock).
var ErrLocked = errors.New("keep: in use by another stack")

// lockName is the lock file in the keep directory. The reference ignores
// it: it reads only the files of the layout.
const lockName = ".raet-lock"

// Lock is a keep held by one stack; Unlock releases it.
type Lock struct {
	f *os.File
}

// Lock takes the keep for one stack: a second Lock of the same directory,
// from this process or another, fails with an error wrapping ErrLocked
// that names the holder's process id, until Unlock or the holder's exit
// (the operating system drops the lock of a process that dies). The
// operator's commands (reading keys, accepting them) need no lock and may
// run beside the stack. Where the system has no advisory file locks
// (not Unix), Lock always succeeds.
func (k *Keep) Lock() (*Lock, error) {
	path := filepath.Join(k.dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("keep: lock %s: %w", k.dir, err)
	}
	if err := lockFile(f); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		pid := strings.TrimSpace(string(holder))
		if pid == "" {
			pid = "?"
		}
		return nil, fmt.Errorf("%w: %s is held by process %s (stop that stack, or give this one another keep): %v",
			ErrLocked, k.dir, pid, err)
	}
	// The holder's pid, for the message of the next one to try.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// inUse reports whether a stack holds the keep (Lock), probing its lock
// without keeping it. (A Lock taken at the very moment of the probe fails
// as if the keep were in use.)
func (k *Keep) inUse() bool {
	f, err := os.OpenFile(filepath.Join(k.dir, lockName), os.O_RDWR, 0)
	if err != nil {
		return false // no lock file: never locked
	}
	defer f.Close() // closing drops the probe's lock
	return lockFile(f) != nil
}

// Unlock releases the keep. It is safe to call more than once.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	f.Truncate(0)
	return f.Close() // closing drops the lock
}
