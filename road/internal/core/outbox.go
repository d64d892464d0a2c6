package core

import "github.com/raet-go/raet/codec"

// outbox is what the core has made to send and what it sends with: the
// datagrams the writer takes (TakeOut), their buffers, the head being
// packed and the dones kept to send again.
type outbox struct {
	out     []Datagram
	answers answers    // the dones sent last, to send again unchanged (answers.go)
	scratch []byte     // a message's coat plaintext, being bundled
	bufs    bufPool    // buffers of the datagrams in out that nobody keeps
	head    codec.Head // the head being sent, kept here so it is not allocated per packet
}

// push queues d to send.
func (o *outbox) push(d Datagram) { o.out = append(o.out, d) }

// take returns the datagrams to send and keeps spare's memory (emptied)
// for the next ones, unless it has more room than kept.
func (o *outbox) take(spare []Datagram, kept int) []Datagram {
	out := o.out
	if cap(spare) > kept {
		spare = nil // a burst's room (an alive to each of thousands) goes
	}
	o.out = spare[:0]
	return out
}

// trim lets out's room go when it has more than kept (Core.shrink).
func (o *outbox) trim(kept int) {
	if cap(o.out) > kept {
		o.out = append([]Datagram(nil), o.out...)
	}
}
