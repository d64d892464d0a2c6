package core

// inbox is what the core has received for its owner: the completed
// messages not yet taken, those waiting for room among them, and those
// whose bodies wait for a decoder.
type inbox struct {
	// delivery is the completed messages not yet taken (Deliveries);
	// roomWaits the whole messages waiting for room in it, oldest first,
	// which Delivered delivers as room frees; roomWaiting counts those
	// still waiting (roomSweep and the bounds: waitForRoom).
	delivery    fifo[Message]
	roomWaits   fifo[roomWait]
	roomWaiting int
	roomSweep   int
	// decodes are messages whose bodies wait for a decoder
	// (Config.DecodeLater; Decodes).
	decodes []*Decode
}

// trim lets the queues' room go, keeping what they hold (Core.shrink).
func (in *inbox) trim() {
	in.delivery = fifo[Message]{s: append([]Message(nil), in.delivery.items()...)}
	in.roomWaits = fifo[roomWait]{s: append([]roomWait(nil), in.roomWaits.items()...)}
}

// fifo is a queue taken from the front: drop moves a head on, and what is
// left moves down only once the head has passed as much as is left, so
// that a caller taking a few of a long queue at a time (a Stack's receive
// channel full) copies nothing each time (dropFirst would copy the rest).
type fifo[T any] struct {
	s    []T
	head int
}

func (q *fifo[T]) items() []T { return q.s[q.head:] }
func (q *fifo[T]) len() int   { return len(q.s) - q.head }
func (q *fifo[T]) push(v T)   { q.s = append(q.s, v) }

// drop forgets the first n items, clearing their slots: what they point to
// is not kept alive.
func (q *fifo[T]) drop(n int) {
	clear(q.s[q.head : q.head+n])
	q.head += n
	switch left := len(q.s) - q.head; {
	case left == 0:
		q.s, q.head = q.s[:0], 0
	case q.head >= left:
		k := copy(q.s, q.s[q.head:])
		clear(q.s[k:])
		q.s, q.head = q.s[:k], 0
	}
}

// dropFirst removes the first n elements of s, in place, and clears the
// slots past its new end: what moved down must not stay behind there too,
// where it would keep the messages it points to alive.
func dropFirst[T any](s []T, n int) []T {
	k := copy(s, s[n:])
	clear(s[k:])
	return s[:k]
}
