package keep

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Writer writes a keep's files on a goroutine of its own, so that the
// goroutine that decides what to write (a road stack's owner) never waits
// for the disk. Writes are queued in order and written in batches: the
// writer takes whatever has queued up (up to WriterConfig.MaxBatch), writes
// each file to a temporary file as Keep does, makes all their data durable
// with one sync, renames them over their targets in the order they were
// queued, and then syncs each directory the batch touched once. A batch of
// n files costs 1 + (directories touched) syncs instead of Keep's 2n.
//
// Order: the renames (and deletions) happen in queue order, one batch after
// another, so a process killed at any point leaves on disk the outcome of a
// prefix of the writes: every write queued before some point, none after,
// and never a partial file. Two writes to the same file queued one right
// after the other are written once, as the later. After a power loss the
// prefix property holds on file systems that journal renames in order
// (ext4, xfs); where the order across directories matters on others, put a
// Barrier between the writes.
//
// Durability: each write returns a *Queued that is done once the write is
// durable or has failed. A caller that holds back an acknowledgement until
// the keep holds what it must waits on that write, or on a Barrier queued
// after its writes; WriterConfig.OnDurable reports progress by sequence
// number, for callers that track many writes at once.
//
// Failure: the first write that fails (a full disk, say) fails every write
// not yet renamed and every later one, with an error wrapping
// ErrWriterFailed and the cause; the keep then holds a prefix of the writes.
// A new Writer may be started once the cause is dealt with.
//
// The queue is bounded: a write that finds it full fails at once with
// ErrQueueFull, so a caller on an event loop is never blocked. Close writes
// what is queued and stops the goroutine.
//
// A Writer and the Keep's own Save and Delete methods must not write the
// same files at the same time; reads through the Keep see each file as it
// was before or after a rename, never in between.
type Writer struct {
	k   *Keep
	cfg WriterConfig
	ops chan *writeOp

	mu     sync.Mutex
	seq    uint64 // the last sequence number given
	closed bool
	failed error // the sticky failure, set by the writer goroutine

	stopped chan struct{}
	batch   []*writeOp // the writer goroutine's, reused
}

// WriterConfig holds the options of StartWriter. The zero value, and a nil
// *WriterConfig, give the defaults.
type WriterConfig struct {
	// Queue bounds the writes waiting for the writer goroutine; 0 means
	// 1024. A write that finds the queue full fails with ErrQueueFull.
	Queue int
	// MaxBatch bounds the writes of one batch; 0 means 256.
	MaxBatch int
	// OnDurable, when set, is called on the writer goroutine after each
	// batch with the sequence number of the batch's last write (see
	// Queued.Seq): every write up to it is durable or has failed. It must
	// not block.
	OnDurable func(seq uint64)

	// sync makes data and renames durable; tests count its calls.
	sync syncer
}

// Errors of Writer.
var (
	// ErrQueueFull: a write found the writer's queue full; nothing was
	// queued.
	ErrQueueFull = errors.New("keep: writer queue full")
	// ErrWriterClosed: a write came after Close.
	ErrWriterClosed = errors.New("keep: writer closed")
	// ErrWriterFailed: an earlier write failed, so this one was not made
	// (see Writer).
	ErrWriterFailed = errors.New("keep: writer failed")
)

// Queued is a queued write (or barrier); it is done once durable or
// failed.
type Queued struct {
	seq  uint64
	done chan struct{}
	err  error
}

// Seq is the write's sequence number: 1 for the writer's first write, then
// one more for each.
func (p *Queued) Seq() uint64 { return p.seq }

// Done is closed once the write is durable or has failed.
func (p *Queued) Done() <-chan struct{} { return p.done }

// Err is the write's outcome once Done is closed (nil: durable); before,
// it is nil.
func (p *Queued) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Wait waits until the write is done and returns its outcome, or returns
// ctx's error first.
func (p *Queued) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// opKind is what a queued write does.
type opKind uint8

const (
	opSave opKind = iota
	opDelete
	opBarrier
)

type writeOp struct {
	kind opKind
	path string
	data []byte
	uid  uint32 // a remote estate's, for its uid index entry
	name string // the remote estate's name; "": no index entry
	p    *Queued
}

// syncer makes a batch durable.
type syncer interface {
	// data makes the contents of files, all open for writing in the keep
	// at dir, durable.
	data(dir string, files []*os.File) error
	// dir makes the renames and removals in dir durable.
	dir(dir string) error
}

// fileSyncer syncs each file, then each directory.
type fileSyncer struct{}

func (fileSyncer) data(_ string, files []*os.File) error {
	for _, f := range files {
		if err := f.Sync(); err != nil {
			return err
		}
	}
	return nil
}

func (fileSyncer) dir(dir string) error { return syncDir(dir) }

// StartWriter starts a Writer for k and its goroutine; Close stops it.
func (k *Keep) StartWriter(cfg *WriterConfig) *Writer {
	c := WriterConfig{}
	if cfg != nil {
		c = *cfg
	}
	if c.Queue <= 0 {
		c.Queue = 1024
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 256
	}
	if c.sync == nil {
		c.sync = defaultSyncer()
	}
	w := &Writer{k: k, cfg: c, ops: make(chan *writeOp, c.Queue), stopped: make(chan struct{})}
	go w.loop()
	return w
}

// SaveLocal queues a write of local/estate.json. It fails at once if e
// does not pass Validate, or with ErrQueueFull, ErrWriterClosed,
// ErrWriterFailed or (a keep from OpenReadOnly) ErrReadOnly.
func (w *Writer) SaveLocal(e LocalEstate) (*Queued, error) {
	return w.save(w.k.LocalEstatePath(), e.MarshalJSON, 0, "")
}

// SaveLocalRole queues a write of role/local/role.json, as SaveLocal.
func (w *Writer) SaveLocalRole(r LocalRole) (*Queued, error) {
	return w.save(w.k.LocalRolePath(), r.MarshalJSON, 0, "")
}

// SaveRemote queues a write of remote/estate.<e.Name>.json, as SaveLocal,
// and of its uid index entry, as Keep.SaveRemote: the writer goroutine
// makes the entries of a batch's estates once they are durable, before it
// reports them so.
func (w *Writer) SaveRemote(e RemoteEstate) (*Queued, error) {
	path, err := w.k.RemoteEstatePath(e.Name)
	if err != nil {
		return nil, err
	}
	if u := w.k.unjoined; u != nil {
		if r, ok := u.estate(e.Role); ok {
			// Its record was removed as unjoined: written back first.
			if _, err := w.saveRole(r); err != nil {
				u.unestate(r)
				return nil, err
			}
		}
	}
	return w.save(path, e.MarshalJSON, e.UID, e.Name)
}

// SaveRemoteRole queues a write of role/remote/role.<r.Role>.json, as
// SaveLocal. Under AutoAlways the writer's goroutine removes the unjoined
// records that are due after each batch and when they expire (see
// Config.UnjoinedTTL).
func (w *Writer) SaveRemoteRole(r RemoteRole) (*Queued, error) {
	q, err := w.saveRole(r)
	if err == nil && w.k.unjoined != nil {
		w.k.unjoined.saved(r, time.Now())
	}
	return q, err
}

func (w *Writer) saveRole(r RemoteRole) (*Queued, error) {
	path, err := w.k.RemoteRolePath(r.Role)
	if err != nil {
		return nil, err
	}
	return w.save(path, r.MarshalJSON, 0, "")
}

// DeleteRemote queues the removal of remote/estate.<name>.json (a missing
// file is not an error).
func (w *Writer) DeleteRemote(name string) (*Queued, error) {
	path, err := w.k.RemoteEstatePath(name)
	if err != nil {
		return nil, err
	}
	return w.delete(path)
}

// DeleteRemoteRole queues the removal of role/remote/role.<role>.json.
func (w *Writer) DeleteRemoteRole(role string) (*Queued, error) {
	path, err := w.k.RemoteRolePath(role)
	if err != nil {
		return nil, err
	}
	if w.k.unjoined != nil {
		w.k.unjoined.decided(role)
	}
	return w.delete(path)
}

// Barrier queues a mark that ends a batch: it is done once every write
// queued before it is durable, and no write queued after it is renamed
// before then.
func (w *Writer) Barrier() (*Queued, error) {
	return w.queue(&writeOp{kind: opBarrier})
}

// Close writes what is queued, stops the writer goroutine and returns the
// writer's failure, if any. Writes after Close fail with ErrWriterClosed.
func (w *Writer) Close() error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.ops)
	}
	w.mu.Unlock()
	<-w.stopped
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// Err returns the writer's failure (see Writer), nil while it writes.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// save queues a write of path; a name other than "" is a remote estate's,
// whose uid index entry (uid → name) follows it.
func (w *Writer) save(path string, marshal func() ([]byte, error), uid uint32, name string) (*Queued, error) {
	if w.k.readOnly {
		return nil, &FileError{Op: "save", Path: path, Err: ErrReadOnly}
	}
	data, err := marshal()
	if err != nil {
		return nil, fmt.Errorf("keep: save %s: %w", path, err)
	}
	return w.queue(&writeOp{kind: opSave, path: path, data: data, uid: uid, name: name})
}

func (w *Writer) delete(path string) (*Queued, error) {
	if w.k.readOnly {
		return nil, &FileError{Op: "delete", Path: path, Err: ErrReadOnly}
	}
	return w.queue(&writeOp{kind: opDelete, path: path})
}

func (w *Writer) queue(op *writeOp) (*Queued, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return nil, ErrWriterClosed
	case w.failed != nil:
		return nil, w.failed
	}
	op.p = &Queued{seq: w.seq + 1, done: make(chan struct{})}
	select {
	case w.ops <- op:
		w.seq++
		return op.p, nil
	default:
		return nil, ErrQueueFull
	}
}

// loop is the writer goroutine.
func (w *Writer) loop() {
	defer close(w.stopped)
	var expiry *time.Timer // the next unjoined record's (unjoined.go)
	var expired <-chan time.Time
	defer func() {
		if expiry != nil {
			expiry.Stop()
		}
	}()
	for {
		var next time.Time
		select {
		case op, ok := <-w.ops:
			if !ok {
				return
			}
			next = w.batchFrom(op)
		case <-expired:
			next = w.expireUnjoined()
		}
		switch {
		case next.IsZero():
			expired = nil
		case expiry == nil:
			expiry = time.NewTimer(time.Until(next))
			expired = expiry.C
		default:
			expiry.Reset(time.Until(next))
			expired = expiry.C
		}
	}
}

// appendDue appends to batch the removals of the unjoined role records
// that are due (unjoined.go), as writes no caller waits for (no Queued),
// and returns when the next is due: removed with the batch that may have
// written them, one sync of the directory for both. Nothing once the
// writer failed.
func (w *Writer) appendDue(batch []*writeOp) ([]*writeOp, time.Time) {
	if w.k.unjoined == nil || w.Err() != nil {
		return batch, time.Time{}
	}
	roles, next := w.k.unjoined.due(time.Now())
	for _, role := range roles {
		if path, err := w.k.RemoteRolePath(role); err == nil {
			batch = append(batch, &writeOp{kind: opDelete, path: path})
		}
	}
	return batch, next
}

// expireUnjoined removes the unjoined role records that are due when the
// first of them expires, and returns when the next is due. A removal that
// fails leaves the file, which the keep's next Open finds.
func (w *Writer) expireUnjoined() time.Time {
	ops, next := w.appendDue(nil)
	if len(ops) > 0 {
		_, _ = w.write(ops)
	}
	return next
}

// batchFrom writes op and what has queued up behind it, as one batch, and
// returns when the next unjoined role record is due.
func (w *Writer) batchFrom(op *writeOp) time.Time {
	batch := append(w.batch[:0], op)
more:
	for len(batch) < w.cfg.MaxBatch && op.kind != opBarrier {
		select {
		case next, ok := <-w.ops:
			if !ok {
				break more
			}
			op = next
			batch = append(batch, op)
		default:
			break more
		}
	}
	batch, next := w.appendDue(batch)
	w.commit(batch)
	clear(batch)
	w.batch = batch[:0]
	return next
}

// commit writes one batch and completes its writes.
func (w *Writer) commit(batch []*writeOp) {
	w.mu.Lock()
	failed := w.failed
	w.mu.Unlock()
	done := 0 // batch[:done] are durable
	var err error
	if failed == nil {
		done, err = w.write(batch)
		if err != nil {
			failed = fmt.Errorf("%w: %w", ErrWriterFailed, err)
			w.mu.Lock()
			w.failed = failed
			w.mu.Unlock()
		}
	}
	var last uint64
	for i, op := range batch {
		if op.p == nil {
			continue // a removal of the writer's own (appendDue)
		}
		if i >= done {
			op.p.err = failed
		}
		close(op.p.done)
		last = op.p.seq
	}
	if w.cfg.OnDurable != nil {
		w.cfg.OnDurable(last)
	}
}

// staged is a save of a batch, written to its temporary file; or, with
// entry, the uid index entry of a remote estate's save op.
type staged struct {
	op    *writeOp
	f     *os.File
	tmp   string
	entry bool // op's uid index entry (op.uid → op.name), not op's file
	at    int  // entry: op's place in the batch
	same  bool // entry: it names op.name already, nothing to write
}

// stagers bounds the goroutines that write a batch's temporary files. Each
// is a new inode and a write, independent of the others (their renames,
// in queue order, come after the data is durable), and a new inode may
// cost the kernel a millisecond (ext4 without a journal looks past the
// inodes freed in the last half minute): a few at once keep both cores and
// the waits of one file's system calls busy with another's.
const stagers = 4

// stageFiles writes each save of stage to a new temporary file beside its
// target, on up to stagers goroutines, and returns the error of the first
// (in queue order) that failed. What it made is in stage (to close and
// remove on failure).
func stageFiles(k *Keep, stage []staged) error {
	errs := make([]error, len(stage))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(stagers, len(stage)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(stage) {
					return
				}
				errs[i] = stage[i].write(k)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// write makes s's temporary file and writes the data into it; an index
// entry that names its estate already is left as it is.
func (s *staged) write(k *Keep) error {
	path, data := s.op.path, s.op.data
	if s.entry {
		path, data = k.uidPath(s.op.uid), []byte(s.op.name)
		if old, err := readUIDEntry(path); err == nil && old == s.op.name {
			s.same = true
			return nil
		}
	}
	f, err := os.CreateTemp(filepath.Dir(path), tempPrefix+"*"+tempSuffix)
	if err != nil {
		return &FileError{Op: "save", Path: path, Err: err}
	}
	s.f, s.tmp = f, f.Name()
	if err := f.Chmod(filePerm); err != nil {
		return &FileError{Op: "save", Path: path, Err: err}
	}
	if _, err := f.Write(data); err != nil {
		return &FileError{Op: "save", Path: path, Err: err}
	}
	return nil
}

// write makes the batch's writes and returns how many of them, from the
// first, are durable, and the error that stopped it.
func (w *Writer) write(batch []*writeOp) (done int, err error) {
	// A write followed at once by another to the same file is replaced by
	// it: only the last of such a run is made.
	var stage []staged
	defer func() {
		for _, s := range stage {
			if s.f != nil {
				_ = s.f.Close()
			}
			if s.tmp != "" {
				_ = os.Remove(s.tmp)
			}
		}
	}()
	for i, op := range batch {
		if op.kind == opSave && (i+1 == len(batch) || batch[i+1].path != op.path) {
			stage = append(stage, staged{op: op})
		}
	}
	// Then the uid index entries of the batch's estates, staged with them
	// (a new file is a new inode, which may cost more than its write) but
	// not synced: the last of each uid's.
	files := len(stage)
	for i := len(batch) - 1; i >= 0; i-- {
		op := batch[i]
		if op.name != "" && !slices.ContainsFunc(stage[files:], func(s staged) bool { return s.op.uid == op.uid }) {
			stage = append(stage, staged{op: op, entry: true, at: i})
		}
	}
	if err := stageFiles(w.k, stage); err != nil {
		return 0, err
	}
	if files > 0 {
		datas := make([]*os.File, files)
		for i, s := range stage[:files] {
			datas[i] = s.f
		}
		if err := w.cfg.sync.data(w.k.dir, datas); err != nil {
			return 0, &FileError{Op: "save", Path: w.k.dir, Err: err}
		}
	}
	for i := range stage {
		if stage[i].f == nil {
			continue // an index entry that stays
		}
		err := stage[i].f.Close()
		stage[i].f = nil
		if err != nil {
			return 0, &FileError{Op: "save", Path: stage[i].op.path, Err: err}
		}
	}
	estates, entries := stage[:files:files], stage[files:]
	// Rename and remove in queue order; on a failure, what was done before
	// it is still made durable.
	var dirs []string
	next := 0 // the next staged file
	made := 0
	for i, op := range batch {
		if op.kind != opBarrier {
			if err = w.apply(op, estates, &next); err != nil {
				break
			}
			if d := filepath.Dir(op.path); !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
		made = i + 1
	}
	for _, d := range dirs {
		if serr := w.cfg.sync.dir(d); serr != nil {
			return 0, &FileError{Op: "sync", Path: d, Err: serr}
		}
	}
	// The uid index entries of the estates made durable, unsynced (see
	// LoadRemoteUID).
	w.k.mu.Lock()
	defer w.k.mu.Unlock()
	for i := range entries {
		e := &entries[i]
		if e.same || e.at >= made {
			continue
		}
		if rerr := os.Rename(e.tmp, w.k.uidPath(e.op.uid)); rerr != nil {
			return made, cmp.Or(err, error(&FileError{Op: "save", Path: w.k.uidPath(e.op.uid), Err: rerr}))
		}
		e.tmp = ""
	}
	return made, err
}

// apply renames op's staged file over its target, or removes the target,
// under the Keep's lock so that its reads see either state.
func (w *Writer) apply(op *writeOp, stage []staged, next *int) error {
	w.k.mu.Lock()
	defer w.k.mu.Unlock()
	if op.kind == opDelete {
		if err := os.Remove(op.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return &FileError{Op: "delete", Path: op.path, Err: err}
		}
		return nil
	}
	if *next >= len(stage) || stage[*next].op != op {
		return nil // replaced by the write right after it
	}
	s := &stage[*next]
	*next++
	if err := os.Rename(s.tmp, op.path); err != nil {
		return &FileError{Op: "save", Path: op.path, Err: err}
	}
	s.tmp = "" // renamed: nothing to remove
	return nil
}
