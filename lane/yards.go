package lane

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
)

// yard is what a stack knows of a remote yard.
type yard struct {
	name string
	path string    // socket path: where we send, and where its pages come from
	to   *sockAddr // path as a socket address; used under sem only
	sid  string    // our session id towards it, chosen when the record is made
	sem  chan struct{}
	bid  uint32 // last book id sent; guarded by sem
	gone atomic.Bool
	used atomic.Uint64 // the table's clock when last used, for eviction

	rsid string // last session id received from it; reader goroutine only
}

// lock takes the yard's send lock, which keeps the pages of concurrent
// Sends to one yard in order (a book is written whole before the next).
func (y *yard) lock(ctx context.Context, closing <-chan struct{}) error {
	select {
	case y.sem <- struct{}{}:
		return nil
	default:
	}
	select {
	case y.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closing:
		return ErrClosed
	}
}

func (y *yard) unlock() { <-y.sem }

// nextBid returns the book id after the last one: 1..0xffffffff, wrapping
// to 1 as the reference does.
func (y *yard) nextBid() uint32 {
	if y.bid == 0xffffffff {
		return 1
	}
	return y.bid + 1
}

// yardTable holds the remote yards by name. Senders and the reader share it.
type yardTable struct {
	mu     sync.Mutex
	clock  atomic.Uint64 // counts uses, to find the least recently used yard
	m      map[string]*yard
	max    int
	self   string // our own socket path
	dir    string
	lane   string
	ctr    *counters
	log    *slog.Logger
	newSID func() string
}

// addLocked makes a record; when the table is full it first evicts the
// least recently used yard.
func (t *yardTable) addLocked(name, path string) *yard {
	if len(t.m) >= t.max {
		t.evictLocked()
	}
	y := &yard{
		name: name,
		path: path,
		to:   newSockAddr(path),
		sid:  t.newSID(),
		sem:  make(chan struct{}, 1),
	}
	y.used.Store(t.clock.Add(1))
	t.m[name] = y
	t.ctr.yardsAdded.Add(1)
	if t.log.Enabled(context.Background(), slog.LevelDebug) {
		t.log.Debug("lane yard added", "yard", name, "path", path, "si", y.sid)
	}
	return y
}

// forSend returns the yard name, making a record for it in our directory
// and lane if there is none.
func (t *yardTable) forSend(name string) (*yard, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if y := t.m[name]; y != nil {
		y.used.Store(t.clock.Add(1))
		return y, nil
	}
	if err := checkYardName(name); err != nil {
		return nil, fmt.Errorf("%w: yard %q", err, name)
	}
	path := SocketPath(t.dir, t.lane, name)
	if path == t.self {
		return nil, fmt.Errorf("%w: %q is this yard", ErrBadName, name)
	}
	return t.addLocked(name, path), nil
}

// source returns the yard that sent a page with source name sn from the
// socket address addr, making a record when sn is new and addr names it.
func (t *yardTable) source(sn, addr string) (*yard, DropReason, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if y := t.m[sn]; y != nil {
		if y.path != addr {
			return nil, DropBadSource, false
		}
		y.used.Store(t.clock.Add(1))
		return y, 0, true
	}
	if _, name, ok := namesFromPath(addr); !ok || name != sn || addr == t.self {
		return nil, DropBadSource, false
	}
	return t.addLocked(sn, addr), 0, true
}

// evictLocked forgets the least recently used yard. A later Send to it,
// or a page from it, makes a new record (and a new session towards it).
func (t *yardTable) evictLocked() {
	var old *yard
	for _, y := range t.m {
		if old == nil || y.used.Load() < old.used.Load() {
			old = y
		}
	}
	if old == nil {
		return
	}
	old.gone.Store(true)
	delete(t.m, old.name)
	t.ctr.yardsEvicted.Add(1)
	if t.log.Enabled(context.Background(), slog.LevelDebug) {
		t.log.Debug("lane yard evicted (least recently used)", "yard", old.name, "max", t.max)
	}
}

// remove forgets y (its socket vanished).
func (t *yardTable) remove(y *yard) {
	y.gone.Store(true)
	t.mu.Lock()
	if t.m[y.name] == y {
		delete(t.m, y.name)
		t.ctr.yardsRemoved.Add(1)
	}
	t.mu.Unlock()
	t.log.Info("lane yard removed: its socket is gone", "yard", y.name, "path", y.path)
}

// names returns the known yard names.
func (t *yardTable) names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.m))
	for n := range t.m {
		out = append(out, n)
	}
	return out
}
