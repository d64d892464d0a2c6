package core

// orderList holds things in an order through links each of them keeps
// (an intrusive doubly linked list): moving one to the tail, taking one
// out and finding the head cost O(1), and nothing is allocated. The
// remotes by when they were last heard (silenceList) and a remote's
// messages by their last transmission (rack.go) are such lists.
type orderList[T linked[T]] struct{ head, tail T }

// links are a thing's neighbours in its orderList: prev toward the head.
type links[T any] struct{ prev, next T }

// linked is what an orderList holds: a pointer with its links.
type linked[T any] interface {
	comparable
	orderLinks() *links[T]
}

// has says whether v is in the list.
func (l *orderList[T]) has(v T) bool {
	var none T
	return v.orderLinks().prev != none || l.head == v
}

// last puts v at the tail.
func (l *orderList[T]) last(v T) {
	if l.tail == v {
		return
	}
	l.remove(v)
	var none T
	k := v.orderLinks()
	k.prev = l.tail
	if l.tail != none {
		l.tail.orderLinks().next = v
	} else {
		l.head = v
	}
	l.tail = v
}

// remove takes v out of the list, if it is in it.
func (l *orderList[T]) remove(v T) {
	if !l.has(v) {
		return
	}
	var none T
	k := v.orderLinks()
	if k.prev != none {
		k.prev.orderLinks().next = k.next
	} else {
		l.head = k.next
	}
	if k.next != none {
		k.next.orderLinks().prev = k.prev
	} else {
		l.tail = k.prev
	}
	*k = links[T]{}
}
