package bus

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/protocol"
)

// Retained is a published message kept for replay.
type Retained struct {
	Seq     uint64
	Subject string
	Time    int64 // Unix nanoseconds
	Origin  string
	Body    any
}

// Query selects retained messages for a new subscription.
type Query struct {
	Filters []string
	Replay  protocol.BusReplay
	Arg     uint64 // N, S or T (Unix nanoseconds), as Replay says
	// Max, when above 0, bounds the messages selected: the newest Max, and
	// lost is set when older ones were selected too (Config.MaxReplay).
	Max int
}

// History retains published messages for late joiners. Its methods are
// called with the publisher's lock held, so they need no locking of their
// own and should be quick.
type History interface {
	// Epoch names this history; a durable one keeps it across restarts, so
	// that a subscriber resuming "since S" knows S means the same messages.
	Epoch() uint64
	// LastSeq is the highest sequence number retained or ever appended;
	// publishing continues after it.
	LastSeq() uint64
	// Append retains m (m.Seq is above every earlier one).
	Append(m Retained) error
	// Select returns the retained messages q selects, in sequence order,
	// and lost: whether messages that q would select are no longer
	// retained (since_seq and since_time only).
	Select(q Query) (msgs []Retained, lost bool, err error)
	// Close releases the history.
	Close() error
}

// MemoryHistory keeps the last N messages of each subject, and none older
// than MaxAge when it is set, for at most MaxSubjects subjects (the subject
// published least recently is forgotten first).
type MemoryHistory struct {
	last        int
	maxAge      time.Duration
	maxSubjects int
	epoch       uint64
	seq         uint64
	subjects    map[string]*subjectRing
	store       *boltCommitter // BoltHistory: every change is written through
	now         func() time.Time
}

type subjectRing struct {
	msgs    []Retained // oldest first, at most last
	trimmed uint64     // the highest sequence number dropped
}

// DefaultMaxSubjects bounds the subjects a history keeps.
const DefaultMaxSubjects = 4096

// NewMemoryHistory keeps last messages per subject (at least 1) and, when
// maxAge > 0, none older than maxAge.
func NewMemoryHistory(last int, maxAge time.Duration) *MemoryHistory {
	return &MemoryHistory{last: max(last, 1), maxAge: maxAge, maxSubjects: DefaultMaxSubjects,
		epoch: rand.Uint64() | 1, subjects: map[string]*subjectRing{}, now: time.Now}
}

// Epoch names the history.
func (h *MemoryHistory) Epoch() uint64 { return h.epoch }

// LastSeq is the highest sequence number appended.
func (h *MemoryHistory) LastSeq() uint64 { return h.seq }

// Len is the number of messages retained.
func (h *MemoryHistory) Len() int {
	n := 0
	for _, r := range h.subjects {
		n += len(r.msgs)
	}
	return n
}

// Append retains m, dropping what the limits no longer allow.
func (h *MemoryHistory) Append(m Retained) error {
	if err := h.persist(m); err != nil {
		return err
	}
	h.seq = max(h.seq, m.Seq)
	r := h.subjects[m.Subject]
	if r == nil {
		if len(h.subjects) >= h.maxSubjects {
			if err := h.forgetStalest(); err != nil {
				return err
			}
		}
		r = &subjectRing{}
		h.subjects[m.Subject] = r
	}
	r.msgs = append(r.msgs, m)
	if len(r.msgs) > h.last {
		if err := h.drop(r, len(r.msgs)-h.last); err != nil {
			return err
		}
	}
	return h.expire(r)
}

// forgetStalest drops the subject whose last message is oldest.
func (h *MemoryHistory) forgetStalest() error {
	var stalest string
	var seq uint64 = 1<<64 - 1
	for s, r := range h.subjects {
		if len(r.msgs) == 0 {
			stalest = s
			break
		}
		if last := r.msgs[len(r.msgs)-1].Seq; last < seq {
			stalest, seq = s, last
		}
	}
	if err := h.drop(h.subjects[stalest], len(h.subjects[stalest].msgs)); err != nil {
		return err
	}
	delete(h.subjects, stalest)
	return nil
}

// drop removes the k oldest messages of r.
func (h *MemoryHistory) drop(r *subjectRing, k int) error {
	if k <= 0 {
		return nil
	}
	if err := h.unpersist(r.msgs[:k]); err != nil {
		return err
	}
	r.trimmed = max(r.trimmed, r.msgs[k-1].Seq)
	r.msgs = slices.Delete(r.msgs, 0, k)
	return nil
}

func (h *MemoryHistory) expire(r *subjectRing) error {
	if h.maxAge <= 0 {
		return nil
	}
	cut := h.now().Add(-h.maxAge).UnixNano()
	k := 0
	for k < len(r.msgs) && r.msgs[k].Time < cut {
		k++
	}
	return h.drop(r, k)
}

// Select returns what q selects, in sequence order.
func (h *MemoryHistory) Select(q Query) ([]Retained, bool, error) {
	if q.Replay == protocol.BusReplayNone {
		return nil, false, nil
	}
	var out []Retained
	lost := false
	for s, r := range h.subjects {
		if !matchAny(q.Filters, s) {
			continue
		}
		if err := h.expire(r); err != nil {
			return nil, false, err
		}
		for _, m := range r.msgs {
			switch q.Replay {
			case protocol.BusReplaySinceSeq:
				if m.Seq <= q.Arg {
					continue
				}
			case protocol.BusReplaySinceTime:
				if m.Time < int64(q.Arg) {
					continue
				}
			}
			out = append(out, m)
		}
		if q.Replay == protocol.BusReplaySinceSeq && r.trimmed > q.Arg {
			lost = true
		}
		if q.Replay == protocol.BusReplaySinceTime && r.trimmed != 0 && (len(r.msgs) == 0 || r.msgs[0].Time > int64(q.Arg)) {
			lost = true
		}
	}
	slices.SortFunc(out, func(a, b Retained) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	if q.Replay == protocol.BusReplayLast && uint64(len(out)) > q.Arg {
		out = out[uint64(len(out))-q.Arg:]
	}
	if q.Max > 0 && len(out) > q.Max {
		out, lost = slices.Clone(out[len(out)-q.Max:]), true
	}
	return out, lost, nil
}

// Close closes the file of a BoltHistory, once what was appended is on
// disk.
func (h *MemoryHistory) Close() error {
	if h.store == nil {
		return nil
	}
	return h.store.close()
}

// written returns a wait for the messages appended so far to be on disk,
// nil when the history keeps nothing on disk. The wait gives the highest
// sequence number then on disk.
func (h *MemoryHistory) written() func() (uint64, error) {
	if h.store == nil {
		return nil
	}
	return h.store.written()
}

var (
	boltMeta     = []byte("meta")
	boltMessages = []byte("messages")
	boltEpoch    = []byte("epoch")
	boltSeq      = []byte("seq")
)

// NewBoltHistory is a MemoryHistory (the same limits) kept in a bbolt file
// at path as well, so that it survives a restart of the publisher: its
// epoch and its sequence numbers go on, and replay serves what it held.
// Bodies are stored as JSON. Close closes the file.
//
// Publish returns once its message is on disk, and no subscriber gets it
// before: what Publish acknowledged survives a crash of the process (kill
// -9), and a sequence number a subscriber saw is never reused. The Publish
// calls of many goroutines share one transaction and one fsync (a group
// commit), so publishing from many goroutines is much faster than from
// one, which waits for a commit per message.
func NewBoltHistory(path string, last int, maxAge time.Duration) (*MemoryHistory, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("raet bus: history %s: %w", path, err)
	}
	h := NewMemoryHistory(last, maxAge)
	var kept []Retained
	err = db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(boltMeta)
		if err != nil {
			return err
		}
		msgs, err := tx.CreateBucketIfNotExists(boltMessages)
		if err != nil {
			return err
		}
		if v := meta.Get(boltEpoch); len(v) == 8 {
			h.epoch = binary.BigEndian.Uint64(v)
		} else if err := meta.Put(boltEpoch, binary.BigEndian.AppendUint64(nil, h.epoch)); err != nil {
			return err
		}
		if v := meta.Get(boltSeq); len(v) == 8 {
			h.seq = binary.BigEndian.Uint64(v)
		}
		return msgs.ForEach(func(k, v []byte) error {
			m, err := decodeRetained(k, v)
			if err != nil {
				return err
			}
			kept = append(kept, m)
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("raet bus: history %s: %w", path, err)
	}
	for _, m := range kept { // in key order: sequence order
		if err := h.Append(m); err != nil {
			db.Close()
			return nil, err
		}
	}
	h.store = newBoltCommitter(db, h.seq)
	return h, nil
}

// boltCommitter writes a BoltHistory's changes in group commits: Append
// only queues its change (under the publisher's lock, so in sequence
// order), and one goroutine writes all the changes queued meanwhile in one
// transaction, one fsync, while the publishers wait outside the lock.
type boltCommitter struct {
	db      *bolt.DB
	mu      sync.Mutex
	wake    *sync.Cond
	next    *boltBatch // filling; nil when nothing is queued
	last    *boltBatch // the last one queued to, filling or taken
	queued  uint64     // the highest sequence number queued
	closing bool
	stopped chan struct{} // closed when the goroutine has written the last batch
	err     error         // the close's
}

// boltBatch is one transaction: its changes in order, and done closed
// once it is written (err says whether it failed).
type boltBatch struct {
	ops  []boltOp
	seq  uint64 // the highest sequence number on disk once it is written
	done chan struct{}
	err  error
}

type boltOp struct {
	key [8]byte
	val []byte // nil: delete
}

func newBoltCommitter(db *bolt.DB, seq uint64) *boltCommitter {
	c := &boltCommitter{db: db, queued: seq, stopped: make(chan struct{})}
	c.wake = sync.NewCond(&c.mu)
	go c.run()
	return c
}

// queue adds ops to the batch being filled.
func (c *boltCommitter) queue(seq uint64, ops ...boltOp) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return ErrClosed
	}
	if c.next == nil {
		c.next = &boltBatch{done: make(chan struct{})}
		c.wake.Signal()
	}
	c.next.ops = append(c.next.ops, ops...)
	c.queued = max(c.queued, seq)
	c.next.seq = c.queued
	c.last = c.next
	return nil
}

// written returns a wait for everything queued so far (the committer may
// have taken it already), nil when nothing was.
func (c *boltCommitter) written() func() (uint64, error) {
	c.mu.Lock()
	b := c.last
	c.mu.Unlock()
	if b == nil {
		return nil
	}
	return func() (uint64, error) {
		<-b.done
		return b.seq, b.err
	}
}

func (c *boltCommitter) run() {
	defer close(c.stopped)
	for {
		c.mu.Lock()
		for c.next == nil && !c.closing {
			c.wake.Wait()
		}
		b := c.next
		c.next = nil
		c.mu.Unlock()
		if b == nil { // closing, and all written
			return
		}
		b.err = c.db.Update(func(tx *bolt.Tx) error {
			msgs := tx.Bucket(boltMessages)
			for _, op := range b.ops {
				var err error
				if op.val == nil {
					err = msgs.Delete(op.key[:])
				} else {
					err = msgs.Put(op.key[:], op.val)
				}
				if err != nil {
					return err
				}
			}
			if b.seq == 0 { // nothing published yet
				return nil
			}
			return tx.Bucket(boltMeta).Put(boltSeq, binary.BigEndian.AppendUint64(nil, b.seq))
		})
		if b.err != nil {
			b.err = fmt.Errorf("raet bus: history: %w", b.err)
		}
		close(b.done)
	}
}

// close writes what is queued, stops the goroutine and closes the file.
func (c *boltCommitter) close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.stopped
		return c.err
	}
	c.closing = true
	c.wake.Signal()
	c.mu.Unlock()
	<-c.stopped
	c.err = c.db.Close()
	return c.err
}

type retainedRecord struct {
	Subject string `json:"sj"`
	Time    int64  `json:"tm"`
	Origin  string `json:"or,omitempty"`
	Body    any    `json:"bd,omitempty"`
}

func decodeRetained(k, v []byte) (Retained, error) {
	if len(k) != 8 {
		return Retained{}, errors.New("bad key")
	}
	var m map[string]any
	if err := (packet.JSONBody{}).Unmarshal(v, &m); err != nil {
		return Retained{}, err
	}
	r := Retained{Seq: binary.BigEndian.Uint64(k), Body: m["bd"]}
	r.Subject, _ = m["sj"].(string)
	r.Origin, _ = m["or"].(string)
	if t, ok := m["tm"].(int64); ok {
		r.Time = t
	}
	return r, nil
}

func (h *MemoryHistory) persist(m Retained) error {
	if h.store == nil {
		return nil
	}
	v, err := packet.JSONBody{}.Marshal(nil, retainedRecord{m.Subject, m.Time, m.Origin, m.Body})
	if err != nil {
		return fmt.Errorf("raet bus: history: %w", err)
	}
	op := boltOp{val: v}
	binary.BigEndian.PutUint64(op.key[:], m.Seq)
	return h.store.queue(m.Seq, op)
}

func (h *MemoryHistory) unpersist(ms []Retained) error {
	if h.store == nil {
		return nil
	}
	ops := make([]boltOp, len(ms))
	for i, m := range ms {
		binary.BigEndian.PutUint64(ops[i].key[:], m.Seq)
	}
	return h.store.queue(0, ops...)
}

// noHistory retains nothing (Config.HistoryLast negative).
type noHistory struct{ epoch, seq uint64 }

func (h *noHistory) Epoch() uint64           { return h.epoch }
func (h *noHistory) LastSeq() uint64         { return h.seq }
func (h *noHistory) Append(m Retained) error { h.seq = m.Seq; return nil }
func (h *noHistory) Select(q Query) ([]Retained, bool, error) {
	return nil, q.Replay == protocol.BusReplaySinceSeq && q.Arg < h.seq, nil
}
func (h *noHistory) Close() error { return nil }
