package core

import (
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// outbox is what the core has made to send and what it sends with: the
// datagrams the writer takes (TakeOut), their buffers, the head being
// packed and the dones kept to send again.
type outbox struct {
	out     []Datagram
	answers answers    // the dones sent last, to send again unchanged (outbox.go)
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
	// sent again unchanged (outbox.go); nil when B is not kept so.
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

// Answers sent again. A message delivered is answered done; when that done
// is lost, or comes later than its sender's timer (a loaded receiver), the
// sender sends the message's last packet again, and the receiver's replay
// window finds it finished (correspond): it is answered done again. A done
// has no body and nothing in its head that changes from one sending to the
// next, and an Ed25519 signature is deterministic (RFC 8032), so a done
// signed anew is byte for byte the one sent before (but for wf, which the
// first copies from the message's last packet): the stack keeps the bytes
// of the dones it sent last and sends those again, with no new signature
// (16 µs each, on the owner goroutine). A remote with fixed timers (the
// reference's 200 ms to 500 ms) repeats every message a loaded main answers
// later than that.
//
// The keeping is bounded and shared by the stack, not per remote: sets of
// answerWays slots by a keyed hash of the answer's key, the oldest of a set
// taken for a new one, from minAnswers slots up to answersFor the remotes
// the stack holds (so that a stack with few remotes stays small), growing
// when it would drop an answer noted less than answerSpan ago; forgetting
// remotes gives the memory back (Core.forget), and so does a stack that
// noted no answer for answerSpan (expire: the repeats it serves come at
// the senders' first timers), so that idle remotes hold none of it. A kept answer goes only to
// the remote, at the address, whose transaction it answered (answerKey):
// a different remote, session or transaction never gets it. Answers of an
// AEAD session (sealed under a new counter each time: never the same
// bytes) and those of a session that bundles (bundle.go) are not kept. See
// docs/security.md for why sending one again is no replay.

const (
	answerWays             = 4
	minAnswers, maxAnswers = 16, 4096
	answersPerRemote       = 32 // at most, a remote's (answersFor): its messages under way
	answerSpan             = 2 * firstMessageRedo
	maxAnswerSize          = 256 // the longest answer kept (a done: 139 bytes with a native head, ~220 at most with a JSON one)
)

// answersFor is the most slots kept while the stack holds n remotes:
// answersPerRemote each, in a power of two from minAnswers to maxAnswers.
func answersFor(n int) int {
	room := minAnswers
	for room < answersPerRemote*n && room < maxAnswers {
		room *= 2
	}
	return room
}

// answerKey names the transaction an answer answered: the remote by its
// address and both its uids, its session and transaction ids, and the
// coat and foot kinds of the session (a head sent anew would carry them).
type answerKey struct {
	to         netip.AddrPort
	nuid, fuid uint32
	si, ti     uint32
	ck         codec.CoatKind
	fk         codec.FootKind
}

// answers are the dones sent last, for the owner goroutine, which notes
// and sends them, and the writer, which signs a datagram whose foot the
// owner left to sign (Config.SignLater) and fills its slot then.
type answers struct {
	mu    sync.Mutex
	seed  uint64
	slots []answerSlot // len(slots)/answerWays sets; nil until the first answer
	gen   uint64       // counts the answers noted
	last  int64        // unix ns of the newest answer noted
}

type answerSlot struct {
	key answerKey
	gen uint64 // answers.gen when noted; 0: empty
	at  int64  // unix ns when noted
	n   int    // len of b's answer; 0: not signed yet
	b   [maxAnswerSize]byte
}

// keepsAnswer reports whether a done of a session of coat kind ck is kept
// to be sent again: not one sealed with an AEAD coat (under a new counter
// each time).
func keepsAnswer(ck codec.CoatKind) bool { return !packet.IsAEAD(ck) }

// answerKeyOf is the key of the answer to the message that `from` sent
// with head h (the answer's head has their uids the other way round).
func answerKeyOf(h *codec.Head, from netip.AddrPort) answerKey {
	return answerKey{to: from, nuid: h.DestinationID, fuid: h.SourceID, si: h.SessionID, ti: h.TransactionID,
		ck: h.CoatKind, fk: h.FootKind}
}

// set is the index of k's set in slots.
func (a *answers) set(k *answerKey) int {
	x := a.seed ^ uint64(k.nuid)<<32 ^ uint64(k.ti)
	x ^= (uint64(k.si) | uint64(k.fuid)<<32) * 0x9e3779b97f4a7c15
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 29
	return int(x%uint64(len(a.slots)/answerWays)) * answerWays
}

// slotFor is the slot of k's set that k takes: its own, a free one, or
// the oldest.
func (a *answers) slotFor(k *answerKey) int {
	i := a.set(k)
	v := i
	for j := i; j < i+answerWays; j++ {
		if s := &a.slots[j]; s.gen == 0 || s.key == *k {
			return j
		} else if s.gen < a.slots[v].gen {
			v = j
		}
	}
	return v
}

// note keeps d, the done of key k, sent at now; room is answersFor the
// remotes the stack holds. A datagram whose foot is left to sign is filled
// when the writer signs it (Datagram.Sign).
func (a *answers) note(k answerKey, d *Datagram, now time.Time, room int) {
	if len(d.B) > maxAnswerSize {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.slots == nil:
		a.seed = rand.Uint64()
		a.slots = make([]answerSlot, min(minAnswers, room))
	case len(a.slots) > room:
		a.resize(room)
	}
	i := a.slotFor(&k)
	if v := &a.slots[i]; v.gen != 0 && v.key != k && now.UnixNano()-v.at < int64(answerSpan) && len(a.slots) < room {
		a.resize(2 * len(a.slots)) // it would drop an answer of this span
		i = a.slotFor(&k)
	}
	a.gen++
	a.last = now.UnixNano()
	v := &a.slots[i]
	v.key, v.gen, v.at, v.n = k, a.gen, now.UnixNano(), 0
	if d.sign == nil {
		v.n = copy(v.b[:], d.B)
		return
	}
	d.ans, d.ansSlot, d.ansGen = a, i, a.gen
}

// fill keeps b, the datagram of answer gen noted in slot i, now signed
// (Datagram.Sign); nothing when the slot was taken or moved since.
func (a *answers) fill(i int, gen uint64, b []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i < len(a.slots) && a.slots[i].gen == gen {
		a.slots[i].n = copy(a.slots[i].b[:], b)
	}
}

// recall appends the answer of key k to dst, reporting whether one was
// kept (and signed).
func (a *answers) recall(k *answerKey, dst []byte) ([]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.slots == nil {
		return dst, false
	}
	i := a.set(k)
	for j := i; j < i+answerWays; j++ {
		if s := &a.slots[j]; s.gen != 0 && s.n > 0 && s.key == *k {
			return append(dst, s.b[:s.n]...), true
		}
	}
	return dst, false
}

// expiry is when expire gives the memory back; zero when it holds none.
// Only the owner goroutine, which alone sets slots and last, calls it.
func (a *answers) expiry() time.Time {
	if a.slots == nil {
		return time.Time{}
	}
	return time.Unix(0, a.last+int64(answerSpan))
}

// expire gives back the memory once no answer was noted for answerSpan.
func (a *answers) expire(now time.Time) {
	if a.slots == nil || now.UnixNano()-a.last < int64(answerSpan) {
		return
	}
	a.mu.Lock()
	a.slots = nil
	a.mu.Unlock()
}

// trim gives back the slots beyond room (answersFor), as remotes go.
func (a *answers) trim(room int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.slots) > room {
		a.resize(room)
	}
}

// resize lays the answers out in n slots, the newest of each set kept (the
// lock held).
func (a *answers) resize(n int) {
	old := a.slots
	a.slots = make([]answerSlot, n)
	for i := range old {
		s := &old[i]
		if s.gen == 0 {
			continue
		}
		if v := &a.slots[a.slotFor(&s.key)]; v.gen < s.gen {
			*v = *s
		}
	}
}
