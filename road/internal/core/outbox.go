package core

import (
	"net/netip"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

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

// Datagram is one packet to send (Out).
type Datagram struct {
	B    []byte
	To   netip.AddrPort
	buf  *[]byte  // B's buffer from pool, given back by Release; nil when B is kept
	pool *bufPool // buf's pool
	// sign signs B's Ed25519 foot, left as zeros (Config.SignLater); nil
	// when B is ready to send.
	sign *packet.NaClFoot
	// ans keeps B once signed, in slot ansSlot for answer ansGen: a done
	// sent again unchanged (answers.go); nil when B is not kept so.
	ans     *answers
	ansSlot int
	ansGen  uint64
}

// Sign signs B's Ed25519 foot in place when the core left it unsigned
// (Config.SignLater), and does nothing otherwise. B must be signed before
// it is sent. It may be called from any goroutine, and on different
// datagrams at once; it neither allocates nor moves B.
func (d *Datagram) Sign() {
	if d.sign == nil {
		return
	}
	// B's foot is the last NaClFootSize bytes, zeros: Sign writes them
	// again (in place: they are within B's capacity), signs head || coat ||
	// zeros as the reference does and puts the signature over them. It fails
	// only without a signing key, and the core's signer has one.
	d.B, _ = d.sign.Sign(d.B[:len(d.B)-packet.NaClFootSize])
	d.sign = nil
	if d.ans != nil {
		d.ans.fill(d.ansSlot, d.ansGen, d.B)
		d.ans = nil
	}
}

// Unsigned reports whether B's Ed25519 foot waits for Sign: a costly call
// the owner leaves to another goroutine.
func (d *Datagram) Unsigned() bool { return d.sign != nil }

// Release gives the datagram's buffer back once B is sent (or dropped). It
// may be called from any goroutine, once; B must not be used after it.
func (d *Datagram) Release() {
	if d.buf != nil {
		d.pool.put(d.buf)
	}
	*d = Datagram{}
}

// bundling is the core's state of the moment: one set for all remotes.
type bundling struct {
	queued  []*messenger // messages waiting for their bundle, in order
	answers []owed       // dones to send
	bundler packet.Bundler
	packer  packet.Packer // the bundler's packer (of the remote being flushed)
	ranges  []packet.AnswerRange
	pig     []packet.AnswerRange // ranges for the next bundle to carry
	list    []byte               // an answers list being piggybacked
	parsed  packet.Bundle        // a received bundle
	plain   []byte               // its opened payload
	lone    messengent           // an entry's, while it is delivered (bundledMessage)
	// own is the memory the new entries of the bundle being received
	// keep (their Message.Raw, each capped to its own), made at the first
	// of them for all: one allocation a bundle, not one an entry. owing is
	// what the bundle's entries hold in all.
	own   []byte
	owing int
}

// owed is a done owed to remote r for its transaction (si, ti).
type owed struct {
	r      *remote
	si, ti uint32
}
