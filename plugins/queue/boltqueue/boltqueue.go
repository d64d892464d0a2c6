// Package boltqueue is a durable queue plugin backed by an embedded
// database (go.etcd.io/bbolt): a message put is on disk (fsynced) before
// Put returns, so messages queued for a remote survive a crash of the
// plugin and of the estate, and the estate sends them after its restart.
// Its main is cmd/raet-queue-bolt.
package boltqueue

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/sdk"
)

// Version of this plugin.
const Version = "1.1.0"

var (
	bucket   = []byte("messages")
	meta     = []byte("meta")
	countKey = []byte("count")    // messages held, kept with each change
	instKey  = []byte("instance") // random, made with the database: QueueInfo.Instance
)

func count(tx *bolt.Tx) uint64 {
	v := tx.Bucket(meta).Get(countKey)
	if len(v) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func setCount(tx *bolt.Tx, n uint64) error {
	return tx.Bucket(meta).Put(countKey, binary.BigEndian.AppendUint64(nil, n))
}

// Options configure Open.
type Options struct {
	// MaxMessages bounds the messages held; Put fails with sdk.ErrQueueFull
	// beyond. 0 means 1,000,000.
	MaxMessages int
	// LockTimeout is how long Open waits for the database's file lock (held
	// by a previous plugin process that has not exited yet). 0 means 10s.
	LockTimeout time.Duration
	// NoSync skips the fsync of each Put (faster, not durable across a
	// power loss; a crash of the process loses nothing). For tests.
	NoSync bool
}

// Queue implements sdk.Queue. It is safe for concurrent use.
type Queue struct {
	db       *bolt.DB
	max      int
	instance uint64
}

var _ sdk.Queue = (*Queue)(nil)

// Open opens (or creates) the queue database at path. A new database gets
// a random instance (QueueInfo.Instance), kept in it.
func Open(path string, o Options) (*Queue, error) {
	if o.MaxMessages <= 0 {
		o.MaxMessages = 1_000_000
	}
	if o.LockTimeout <= 0 {
		o.LockTimeout = 10 * time.Second
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.LockTimeout, NoSync: o.NoSync})
	if err != nil {
		return nil, fmt.Errorf("boltqueue: open %s: %w", path, err)
	}
	q := &Queue{db: db, max: o.MaxMessages}
	if err := db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucket); err != nil {
			return err
		}
		m, err := tx.CreateBucketIfNotExists(meta)
		if err != nil {
			return err
		}
		// The instance tells this database's ids from another's; a
		// database of an older version gets one now (its ids go on
		// growing from where they were, so they stay unique).
		if v := m.Get(instKey); len(v) == 8 && binary.BigEndian.Uint64(v) != 0 {
			q.instance = binary.BigEndian.Uint64(v)
			return nil
		}
		for q.instance == 0 {
			var b [8]byte
			rand.Read(b[:])
			q.instance = binary.BigEndian.Uint64(b[:])
		}
		return m.Put(instKey, binary.BigEndian.AppendUint64(nil, q.instance))
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("boltqueue: %w", err)
	}
	return q, nil
}

// Close closes the database.
func (q *Queue) Close() error { return q.db.Close() }

// Info implements sdk.Queue.
func (q *Queue) Info(context.Context) (sdk.QueueInfo, error) {
	return sdk.QueueInfo{Name: "bolt", Version: Version, Durable: true, Instance: q.instance}, nil
}

// A record is kind (1 byte), the remote's name (uvarint length, bytes),
// and the body.
func encode(m sdk.Message) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(m.Remote)+len(m.Body))
	b = append(b, byte(m.Kind))
	b = binary.AppendUvarint(b, uint64(len(m.Remote)))
	b = append(b, m.Remote...)
	return append(b, m.Body...)
}

func decode(id uint64, v []byte) (sdk.Message, error) {
	if len(v) < 1 {
		return sdk.Message{}, errors.New("boltqueue: empty record")
	}
	n, w := binary.Uvarint(v[1:])
	if w <= 0 || n > uint64(len(v)-1-w) {
		return sdk.Message{}, fmt.Errorf("boltqueue: corrupt record %d", id)
	}
	rest := v[1+w:]
	return sdk.Message{ID: id, Kind: codec.BodyKind(v[0]), Remote: string(rest[:n]),
		Body: append([]byte(nil), rest[n:]...)}, nil
}

func key(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

// Put stores the batch in one transaction (one fsync).
func (q *Queue) Put(ctx context.Context, msgs []sdk.Message) ([]uint64, error) {
	ids := make([]uint64, len(msgs))
	err := q.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		n := count(tx)
		if n+uint64(len(msgs)) > uint64(q.max) {
			return fmt.Errorf("%w: %d messages held", sdk.ErrQueueFull, n)
		}
		for i, m := range msgs {
			id, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(key(id), encode(m)); err != nil {
				return err
			}
			ids[i] = id
		}
		return setCount(tx, n+uint64(len(msgs)))
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Done deletes the ids in one transaction; unknown ids are ignored.
func (q *Queue) Done(ctx context.Context, ids []uint64) error {
	return q.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		n, gone := count(tx), uint64(0)
		for _, id := range ids {
			k := key(id)
			if b.Get(k) == nil {
				continue
			}
			if err := b.Delete(k); err != nil {
				return err
			}
			gone++
		}
		if gone == 0 {
			return nil
		}
		return setCount(tx, n-min(n, gone))
	})
}

// Pending lists messages after the id, oldest first, up to limit (0: all).
func (q *Queue) Pending(ctx context.Context, after uint64, limit int) ([]sdk.Message, error) {
	var out []sdk.Message
	err := q.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		for k, v := c.Seek(key(after + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			m, err := decode(binary.BigEndian.Uint64(k), v)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}
