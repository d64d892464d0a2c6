// Package queue defines the message queue the road and lane stacks keep the
// messages they send in until they are delivered: the built-in in-memory
// queue (plugins/builtin.MemQueue), a durable queue plugin (plugins/host), or
// your own.
package queue

import "github.com/raet-go/raet/codec"

// Queue holds messages until their destination has them. A stack calls it
// once per message (never per packet), from the goroutines of Send and of
// Start. Implementations must be safe for concurrent use.
type Queue interface {
	// Put stores a serialized message for the destination named to (a
	// remote estate, or a yard for a lane) and returns its id.
	Put(to string, kind codec.BodyKind, body []byte) (uint64, error)
	// Done forgets the message id: its destination has it.
	Done(id uint64) error
	// Pending lists the messages put and not done, oldest first.
	Pending() ([]Message, error)
}

// Stable is implemented by a durable Queue whose ids stay with their
// messages across restarts and are unique within its store. Instance
// identifies the store (non-zero; a new store, e.g. a new database, gets a
// new one; 0 means the queue makes no such promise). With it, the road
// stack gives each message the id (Instance, id), which stays the same
// when the message is sent again after a crash, so that a raet-go
// receiver delivers it only once.
type Stable interface {
	Instance() uint64
}

// Message is a message a Queue holds.
type Message struct {
	ID     uint64
	Remote string // the destination: a remote estate, or a yard
	Kind   codec.BodyKind
	Body   []byte
}
