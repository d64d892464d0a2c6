// Package builtin holds the in-process implementations an estate uses when
// no plugin is named: the json, msgpack and cbor serializers and the nacl
// coat of package packet, and a bounded in-memory queue. They cost no
// process boundary; plugins (package host) add kinds, they do not replace
// these.
package builtin

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/queue"
)

// Serializers lists the names Serializer knows.
var Serializers = []string{"json", "msgpack", "cbor"}

// Serializer returns the built-in serializer named json, msgpack or cbor.
func Serializer(name string) (packet.Serializer, error) {
	k, ok := codec.ParseBodyKind(name)
	if !ok || !slices.Contains(Serializers, name) {
		return nil, fmt.Errorf("raet: no built-in serializer %q (have %v)", name, Serializers)
	}
	return packet.Builtin(k)
}

// NaClCoat returns the built-in nacl coat of a session (packet.NewNaClCoat
// with crypto/rand nonces).
func NaClCoat(ourShortPriv, theirShortPub *[32]byte) (packet.Coat, error) {
	return packet.NewNaClCoat(ourShortPriv, theirShortPub, nil)
}

// ErrQueueFull: a MemQueue at its bound refuses a message.
var ErrQueueFull = errors.New("raet: memory queue full")

// Default bounds of a MemQueue.
const (
	DefaultMaxMessages = 10_000
	DefaultMaxBytes    = 256 << 20
)

// MemQueue is a bounded in-memory queue.Queue (road.Config.Queue,
// lane.Config.Queue): messages are kept until done but, unlike a durable
// queue plugin, not across a restart of the process.
// Put fails with ErrQueueFull at MaxMessages messages or MaxBytes of
// bodies. Its zero value is not ready; use NewMemQueue. It is safe for
// concurrent use.
type MemQueue struct {
	maxMsgs, maxBytes int

	mu    sync.Mutex
	next  uint64
	bytes int
	msgs  map[uint64]queue.Message
}

var _ queue.Queue = (*MemQueue)(nil)

// NewMemQueue makes a queue of at most maxMessages messages and maxBytes
// bytes of bodies (0: DefaultMaxMessages, DefaultMaxBytes).
func NewMemQueue(maxMessages, maxBytes int) *MemQueue {
	if maxMessages <= 0 {
		maxMessages = DefaultMaxMessages
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	return &MemQueue{maxMsgs: maxMessages, maxBytes: maxBytes, msgs: map[uint64]queue.Message{}}
}

// Put stores a copy of body for remote.
func (q *MemQueue) Put(remote string, kind codec.BodyKind, body []byte) (uint64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.msgs) >= q.maxMsgs || q.bytes+len(body) > q.maxBytes {
		return 0, fmt.Errorf("%w: %d messages, %d bytes", ErrQueueFull, len(q.msgs), q.bytes)
	}
	q.next++
	q.msgs[q.next] = queue.Message{ID: q.next, Remote: remote, Kind: kind, Body: append([]byte(nil), body...)}
	q.bytes += len(body)
	return q.next, nil
}

// Done forgets id; an unknown id is ignored.
func (q *MemQueue) Done(id uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if m, ok := q.msgs[id]; ok {
		q.bytes -= len(m.Body)
		delete(q.msgs, id)
	}
	return nil
}

// Pending lists the messages not done, oldest first.
func (q *MemQueue) Pending() ([]queue.Message, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]queue.Message, 0, len(q.msgs))
	for _, m := range q.msgs {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b queue.Message) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out, nil
}

// Len returns how many messages are held.
func (q *MemQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}
