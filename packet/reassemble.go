package packet

import (
	"errors"
	"fmt"

	"github.com/raet-go/raet/codec"
)

// Reassembly limits and their defaults.
const (
	DefaultMaxReassemblies = 65536     // unfinished messages of all remotes together
	DefaultMaxPerRemote    = 32        // unfinished messages of one remote
	DefaultMaxBuffered     = 256 << 20 // memory held by all unfinished messages together
)

// ReassemblyConfig bounds a Reassembler, per owner (the remote that sends
// the segments) and in total. Memory is counted as it is held: the chunks
// segments are stored in, plus a fixed charge per message and per segment
// for the bookkeeping (SlotCharge, SegmentCharge). The zero value gives the
// defaults.
type ReassemblyConfig struct {
	// MaxMessageSize is the largest coat (ml) accepted; 0 means
	// codec.MaxMessageSize, the reference's limit.
	MaxMessageSize int
	// MaxReassemblies is how many messages may be unfinished at once, all
	// owners together; 0 means DefaultMaxReassemblies.
	MaxReassemblies int
	// MaxPerRemote is how many messages one owner may have unfinished; 0
	// means DefaultMaxPerRemote.
	MaxPerRemote int
	// MaxBuffered is how much memory all unfinished messages may hold
	// together; 0 means DefaultMaxBuffered.
	MaxBuffered int
	// MaxBufferedPerRemote is how much memory the unfinished messages of
	// one owner may hold; 0 means room for one message of MaxMessageSize
	// however it is cut (MessageCharge), but at most MaxBuffered.
	MaxBufferedPerRemote int
}

// The bookkeeping a Reassembler charges on top of the chunks: per
// unfinished message, and per segment stored.
const (
	SlotCharge    = 256
	SegmentCharge = 40
)

// MessageCharge is the most memory a Reassembler charges for one message
// of ml bytes: its payload, in chunks, and its bookkeeping.
func MessageCharge(ml int) int {
	return SlotCharge + ml + ml/7 + 2*chunkSize + SegmentCharge*codec.MaxSegmentCount
}

// The reasons a segment is refused by a Reassembler.
var (
	ErrSegment          = errors.New("inconsistent segment")
	ErrMessageTooLarge  = errors.New("message too large")
	ErrRemoteQuota      = errors.New("reassembly quota of this remote used up")
	ErrTooManyMessages  = errors.New("too many unfinished messages")
	ErrReassemblyMemory = errors.New("reassembly memory limit reached")
)

// SegmentError is a segment a Reassembler refused; Err is one of ErrSegment,
// ErrMessageTooLarge, ErrRemoteQuota, ErrTooManyMessages or
// ErrReassemblyMemory.
type SegmentError struct {
	SN, SC uint16
	ML     uint32
	Err    error
	Detail string
}

func (e *SegmentError) Error() string {
	return fmt.Sprintf("raet: segment %d of %d (ml %d): %v: %s", e.SN, e.SC, e.ML, e.Err, e.Detail)
}

// Unwrap returns the reason.
func (e *SegmentError) Unwrap() error { return e.Err }

// Reassembler collects the segments of messages (§8.5 of the protocol) until
// each is whole. K identifies a message: the caller includes whatever makes
// its transaction unique (remote, session, transaction id, direction); the
// Reassembler adds the segment count and message length of the first
// segment and refuses later segments that disagree. O is the owner of a
// message, the remote that sends it: limits hold per owner and in total.
//
// Fairness: an owner gets at most MaxPerRemote messages and
// MaxBufferedPerRemote bytes; beyond, its own newest message gives way to
// an older one of its own, else its segment is refused (ErrRemoteQuota).
// When the total is full, the heaviest owner pays: its newest message is
// evicted to make room for a lighter owner, and a segment of the heaviest
// owner itself is refused (ErrTooManyMessages, ErrReassemblyMemory) unless
// its own newer message gives way. So no owner can take room another owner
// needs while it holds more than that owner. An evicted message is
// forgotten (its transaction asks for the missing segments again) and
// counted (Evicted).
//
// Memory grows only with the segment bytes that arrive (in chunks of at
// most 64 KiB, no larger than the message needs), never with the ml a
// packet claims, and is bounded by the config. A message that fits one
// chunk has one of its own length, each segment copied to its place in
// the message, and Add hands out that chunk as the whole message: one
// copy of each byte, one allocation per message. Larger messages are
// copied out of their chunks once whole. Chunks and the bookkeeping of
// finished messages are reused, so that in a steady flow segments are
// stored without allocating. A Reassembler keeps no time: the caller's
// transactions time out and Drop their messages. It is not safe for
// concurrent use.
type Reassembler[O, K comparable] struct {
	cfg      ReassemblyConfig
	msgs     map[K]*partial[O, K]
	owners   map[O]*ownerUse[K]
	heap     []*ownerUse[K] // owners by memory, the heaviest first
	memory   int
	buffered int
	started  uint64 // messages started, to order them by age
	evicted  uint64
	free     []*partial[O, K]     // finished, their maps cleared, for reuse
	freeUse  []*ownerUse[K]       // owners with nothing held, for reuse
	chunks   [numClasses][][]byte // spare chunks by size class, for reuse
	odd      [][]byte             // spare chunks of other sizes, for reuse
}

// ownerUse is what one owner holds.
type ownerUse[K comparable] struct {
	memory int
	keys   []K // its unfinished messages, oldest first
	at     int // index in Reassembler.heap
}

type partial[O, K comparable] struct {
	owner  O
	use    *ownerUse[K]
	key    K
	age    uint64 // order of start
	sc     uint16
	ml     uint32
	segs   map[uint16]segRef
	chunks [][]byte // the stored payloads, appended one after another
	// placed: chunks[0] is the whole message, each segment at its place
	// (see placed).
	placed   bool
	bytes    int // payload stored
	memory   int // charged: SlotCharge, chunk capacities, SegmentCharge per segment
	segSize  int // payload size of every segment but the last, once one is seen
	lastSize int // payload size of the last segment, once seen (-1 before)
}

// segRef is where a segment's payload is stored: chunk, offset, length.
type segRef struct{ chunk, off, n uint32 }

// Chunks come in size classes 1 KiB << c; a segment larger than the
// largest class gets a chunk of its own size, not reused.
const (
	minChunk   = 1 << 10
	numClasses = 7
	chunkSize  = minChunk << (numClasses - 1) // 64 KiB
	bigSegment = chunkSize / 8
)

// Reuse bounds: how many finished partials and idle owners a Reassembler
// keeps, and how many bytes of spare chunks per size class.
const (
	maxFreePartials = 64
	maxFreeOwners   = 64
	maxFreeClass    = 1 << 20 // bytes of spare chunks per class, and of other sizes
	maxFreeOdd      = 16      // spare chunks of other sizes
)

// NewReassembler returns a Reassembler bounded by cfg (nil for defaults).
func NewReassembler[O, K comparable](cfg *ReassemblyConfig) *Reassembler[O, K] {
	r := &Reassembler[O, K]{msgs: map[K]*partial[O, K]{}, owners: map[O]*ownerUse[K]{}}
	if cfg != nil {
		r.cfg = *cfg
	}
	c := &r.cfg
	if c.MaxMessageSize <= 0 || c.MaxMessageSize > codec.MaxMessageSize {
		c.MaxMessageSize = codec.MaxMessageSize
	}
	if c.MaxReassemblies <= 0 {
		c.MaxReassemblies = DefaultMaxReassemblies
	}
	if c.MaxPerRemote <= 0 {
		c.MaxPerRemote = DefaultMaxPerRemote
	}
	c.MaxPerRemote = min(c.MaxPerRemote, c.MaxReassemblies)
	if c.MaxBuffered <= 0 {
		c.MaxBuffered = DefaultMaxBuffered
	}
	if c.MaxBufferedPerRemote <= 0 {
		c.MaxBufferedPerRemote = MessageCharge(c.MaxMessageSize)
	}
	c.MaxBufferedPerRemote = min(c.MaxBufferedPerRemote, c.MaxBuffered)
	return r
}

// Config returns the limits in force, the defaults filled in.
func (r *Reassembler[O, K]) Config() ReassemblyConfig { return r.cfg }

// Add stores one segment's payload (the slice of the coat it carries) for
// message key of owner, from its head's sn, sc and ml. payload is copied.
// When the message is whole, Add returns the reassembled coat and forgets
// the message; otherwise it returns nil. progress says the segment was new
// (a duplicate is ignored and makes no progress; a timer that waits for
// progress should not restart on it). A refused segment returns a
// *SegmentError and leaves the message's other segments as they were; to
// make room, Add may evict other unfinished messages (see Reassembler).
// key belongs to one owner: a segment of key from another owner is
// refused.
func (r *Reassembler[O, K]) Add(owner O, key K, h *codec.Head, payload []byte) (coat []byte, progress bool, err error) {
	sn, sc, ml := h.SegmentNumber, h.SegmentCount, h.MessageLength
	fail := func(err error, format string, args ...any) ([]byte, bool, error) {
		return nil, false, &SegmentError{SN: sn, SC: sc, ML: ml, Err: err, Detail: fmt.Sprintf(format, args...)}
	}
	p := r.msgs[key]
	if p == nil {
		switch {
		case sc == 0 || sn >= sc:
			return fail(ErrSegment, "segment number not below the count")
		case int64(ml) > int64(r.cfg.MaxMessageSize):
			return fail(ErrMessageTooLarge, "limit %d", r.cfg.MaxMessageSize)
		case int(ml) < int(sc) || ml == 0:
			return fail(ErrSegment, "message length shorter than the segment count")
		}
	} else if p.owner != owner {
		return fail(ErrSegment, "message of another owner")
	} else if sc != p.sc || ml != p.ml {
		return fail(ErrSegment, "first segment said %d segments, ml %d", p.sc, p.ml)
	}
	if sn >= sc {
		return fail(ErrSegment, "segment number not below the count")
	}
	if p != nil {
		if _, dup := p.segs[sn]; dup {
			return nil, false, nil
		}
	}
	n := len(payload)
	if n == 0 {
		return fail(ErrSegment, "empty segment")
	}
	segSize, lastSize := -1, -1
	if p != nil {
		segSize, lastSize = p.segSize, p.lastSize
	}
	if sn == sc-1 {
		if sc == 1 && n != int(ml) {
			return fail(ErrSegment, "a single segment of %d bytes is not the whole message", n)
		}
		if segSize > 0 && int64(segSize)*int64(sc-1)+int64(n) != int64(ml) {
			return fail(ErrSegment, "last segment of %d bytes does not end the message", n)
		}
	} else {
		switch {
		case segSize <= 0:
			if int64(n)*int64(sc-1) >= int64(ml) || (lastSize >= 0 && int64(n)*int64(sc-1)+int64(lastSize) != int64(ml)) {
				return fail(ErrSegment, "segment of %d bytes does not fit ml", n)
			}
		case n != segSize:
			return fail(ErrSegment, "segment of %d bytes, others have %d", n, segSize)
		}
	}
	stored := 0
	if p != nil {
		stored = p.bytes
	}
	if stored+n > int(ml) {
		return fail(ErrSegment, "segments exceed ml")
	}
	// The segment is good; make room for it.
	var age uint64
	if p != nil {
		age = p.age
	} else {
		age = r.started + 1
	}
	need := SegmentCharge
	switch {
	case p == nil && placed(ml):
		need += SlotCharge + int(ml)
	case p == nil:
		need += SlotCharge + chunkFor(n, int(ml))
	case p.needsChunk(n):
		need += chunkFor(n, int(ml)-stored)
	}
	var use *ownerUse[K]
	if p != nil {
		use = p.use
	} else {
		use = r.owners[owner]
	}
	if detail, err := r.makeRoom(owner, use, age, p == nil, need); err != nil {
		return fail(err, "%s", detail)
	}
	if p == nil {
		r.started++
		p = r.newPartial(owner, key, age, sc, ml)
	}
	if sn == sc-1 {
		p.lastSize = n
	} else {
		p.segSize = n
	}
	before := p.memory
	p.segs[sn] = r.store(p, sn, payload)
	p.memory += SegmentCharge
	p.bytes += n
	r.buffered += n
	r.charge(p.use, p.memory-before)
	if len(p.segs) < int(sc) {
		return nil, true, nil
	}
	// Whole: the sizes were checked on the way in, so the total is ml.
	if p.placed {
		// Every byte is in place: the buffer is the coat, and leaves
		// with it.
		coat, p.chunks[0] = p.chunks[0], nil
	} else {
		coat = make([]byte, 0, ml)
		for i := range sc {
			ref := p.segs[i]
			coat = append(coat, p.chunks[ref.chunk][ref.off:ref.off+ref.n]...)
		}
	}
	r.forget(p)
	return coat, true, nil
}

// placed says whether a message of ml bytes is stored in one buffer of
// its own length, each segment at its place in the message (sn times the
// size of the others; the last at the end), so that the whole message is
// that buffer, not a copy: a message that fits one chunk. A larger one is
// stored in chunks as its segments arrive and copied out once whole, so
// that its memory grows with what arrives, not with the ml it claims.
func placed(ml uint32) bool { return ml <= chunkSize }

// makeRoom evicts unfinished messages until owner (holding use, nil for
// nothing) may add need bytes (and, when slot, one more message) to its
// message of the given age, or says why it may not.
func (r *Reassembler[O, K]) makeRoom(owner O, use *ownerUse[K], age uint64, slot bool, need int) (detail string, err error) {
	newSlot := 0
	if slot {
		newSlot = 1
	}
	for evicted := false; ; evicted = true {
		if evicted {
			use = r.owners[owner] // an eviction may have emptied it
		}
		mine, slots := 0, 0
		if use != nil {
			mine, slots = use.memory, len(use.keys)
		}
		// The owner's own quota: its newer messages give way to older ones.
		if slots+newSlot > r.cfg.MaxPerRemote || mine+need > r.cfg.MaxBufferedPerRemote {
			if !r.evictNewest(use, age) {
				if slots+newSlot > r.cfg.MaxPerRemote {
					return fmt.Sprintf("%d messages of this remote unfinished, limit %d", slots, r.cfg.MaxPerRemote), ErrRemoteQuota
				}
				return fmt.Sprintf("%d bytes held for this remote, limit %d", mine, r.cfg.MaxBufferedPerRemote), ErrRemoteQuota
			}
			continue
		}
		fullSlots := len(r.msgs)+newSlot > r.cfg.MaxReassemblies
		fullMemory := r.memory+need > r.cfg.MaxBuffered
		if !fullSlots && !fullMemory {
			return "", nil
		}
		// The total is full: the heaviest owner pays.
		if heavy := r.heaviest(); heavy != nil && heavy != use && heavy.memory > mine+need {
			r.evictNewest(heavy, 0)
			continue
		}
		if r.evictNewest(use, age) {
			continue
		}
		if fullSlots {
			return fmt.Sprintf("limit %d, this remote holds the most memory", r.cfg.MaxReassemblies), ErrTooManyMessages
		}
		return fmt.Sprintf("limit %d bytes, this remote holds the most (%d)", r.cfg.MaxBuffered, mine), ErrReassemblyMemory
	}
}

// evictNewest forgets use's newest message if it is newer than age (any,
// for age 0) and reports whether it did.
func (r *Reassembler[O, K]) evictNewest(use *ownerUse[K], age uint64) bool {
	if use == nil || len(use.keys) == 0 {
		return false
	}
	p := r.msgs[use.keys[len(use.keys)-1]]
	if age != 0 && p.age <= age {
		return false
	}
	r.evicted++
	r.forget(p)
	return true
}

// needsChunk says whether a payload of n bytes needs a new chunk.
func (p *partial[O, K]) needsChunk(n int) bool {
	if p.placed {
		return false
	}
	last := len(p.chunks) - 1
	return last < 0 || cap(p.chunks[last])-len(p.chunks[last]) < n
}

// chunkFor is the capacity of the chunk a payload of n bytes gets when the
// message still lacks rest bytes (rest >= n). A small segment gets the
// smallest class that holds min(rest, 64 KiB): every chunk but a message's
// last is then more than 7/8 full. A large one (over 8 KiB) gets room for
// a whole number of segments of its size, up to 64 KiB or rest, so that
// nothing is wasted; such chunks are reused by exact size.
func chunkFor(n, rest int) int {
	if n > bigSegment {
		return n * max(1, min(rest, chunkSize)/n)
	}
	return minChunk << classOf(min(rest, chunkSize))
}

// classOf is the smallest size class that holds want bytes, or numClasses
// when none does.
func classOf(want int) int {
	c := 0
	for c < numClasses && minChunk<<c < want {
		c++
	}
	return c
}

// newPartial returns a reused or a new partial for a message, registered
// with its owner.
func (r *Reassembler[O, K]) newPartial(owner O, key K, age uint64, sc uint16, ml uint32) *partial[O, K] {
	var p *partial[O, K]
	if n := len(r.free); n > 0 {
		p = r.free[n-1]
		r.free = r.free[:n-1]
	} else {
		p = &partial[O, K]{segs: map[uint16]segRef{}}
	}
	p.owner, p.key, p.age, p.sc, p.ml, p.lastSize, p.memory = owner, key, age, sc, ml, -1, SlotCharge
	use := r.owners[owner]
	if use == nil {
		if n := len(r.freeUse); n > 0 {
			use = r.freeUse[n-1]
			r.freeUse = r.freeUse[:n-1]
		} else {
			use = &ownerUse[K]{}
		}
		r.owners[owner] = use
		use.at = len(r.heap)
		r.heap = append(r.heap, use)
	}
	p.use = use
	use.keys = append(use.keys, key)
	r.msgs[key] = p
	r.charge(use, SlotCharge)
	return p
}

// store copies payload, segment sn of p, into p's buffer at its place
// (placed), else into p's last chunk, or a new one when it is full.
func (r *Reassembler[O, K]) store(p *partial[O, K], sn uint16, payload []byte) segRef {
	n := len(payload)
	if p.bytes == 0 && placed(p.ml) {
		// Every byte of it is written before it is whole (the sizes
		// tile ml), so a spare buffer needs no clearing.
		p.chunks = append(p.chunks, r.chunk(int(p.ml))[:p.ml])
		p.memory += int(p.ml)
		p.placed = true
	}
	if p.placed {
		off := int(sn) * n
		if sn == p.sc-1 {
			off = int(p.ml) - n
		}
		copy(p.chunks[0][off:], payload)
		return segRef{chunk: 0, off: uint32(off), n: uint32(n)}
	}
	if p.needsChunk(n) {
		size := chunkFor(n, int(p.ml)-p.bytes)
		p.chunks = append(p.chunks, r.chunk(size))
		p.memory += size
	}
	last := len(p.chunks) - 1
	off := len(p.chunks[last])
	p.chunks[last] = append(p.chunks[last], payload...)
	return segRef{chunk: uint32(last), off: uint32(off), n: uint32(n)}
}

// chunk returns an empty spare chunk of capacity size, or a new one.
func (r *Reassembler[O, K]) chunk(size int) []byte {
	if cl := classOf(size); cl < numClasses && minChunk<<cl == size {
		if k := len(r.chunks[cl]); k > 0 {
			c := r.chunks[cl][k-1]
			r.chunks[cl] = r.chunks[cl][:k-1]
			return c
		}
	} else {
		for i, o := range r.odd {
			if cap(o) == size {
				r.odd = append(r.odd[:i], r.odd[i+1:]...)
				return o
			}
		}
	}
	return make([]byte, 0, size)
}

// Missing appends to dst the segment numbers of message key not yet received,
// from 0 up to the highest one received, and returns it with the highest
// received number (-1 if none). These are what a resend asks for.
func (r *Reassembler[O, K]) Missing(dst []uint16, key K) ([]uint16, int) {
	p := r.msgs[key]
	if p == nil {
		return dst, -1
	}
	high := -1
	for sn := range p.segs {
		high = max(high, int(sn))
	}
	for sn := 0; sn < high; sn++ {
		if _, ok := p.segs[uint16(sn)]; !ok {
			dst = append(dst, uint16(sn))
		}
	}
	return dst, high
}

// Drop forgets message key and its segments (a transaction that ended).
func (r *Reassembler[O, K]) Drop(key K) {
	if p := r.msgs[key]; p != nil {
		r.forget(p)
	}
}

// Shrink gives back what the Reassembler keeps at the size of its
// busiest moment: the spare chunks and the bookkeeping of finished
// messages and idle owners kept for reuse, and the room of its maps. For
// a receiver whose senders are gone (a main whose remotes it forgot), so
// that it holds what it held before they came; the messages under way
// are kept, and later ones allocate afresh until reuse sets in again.
func (r *Reassembler[O, K]) Shrink() {
	r.free, r.freeUse, r.odd = nil, nil, nil
	r.chunks = [numClasses][][]byte{}
	msgs := make(map[K]*partial[O, K], len(r.msgs))
	for k, p := range r.msgs {
		msgs[k] = p
	}
	owners := make(map[O]*ownerUse[K], len(r.owners))
	for o, u := range r.owners {
		owners[o] = u
	}
	r.msgs, r.owners, r.heap = msgs, owners, append([]*ownerUse[K](nil), r.heap...)
}

// Pending is the number of unfinished messages.
func (r *Reassembler[O, K]) Pending() int { return len(r.msgs) }

// Buffered is the number of segment bytes held.
func (r *Reassembler[O, K]) Buffered() int { return r.buffered }

// Memory is the memory charged for all unfinished messages (see
// ReassemblyConfig); at most MaxBuffered.
func (r *Reassembler[O, K]) Memory() int { return r.memory }

// Owner returns how many messages owner has unfinished and the memory
// charged for them.
func (r *Reassembler[O, K]) Owner(owner O) (pending, memory int) {
	if use := r.owners[owner]; use != nil {
		return len(use.keys), use.memory
	}
	return 0, 0
}

// Evicted is the number of unfinished messages evicted to make room for
// others since the Reassembler was made.
func (r *Reassembler[O, K]) Evicted() uint64 { return r.evicted }

// forget drops message p, keeping its chunks and bookkeeping for reuse.
func (r *Reassembler[O, K]) forget(p *partial[O, K]) {
	use := p.use
	r.buffered -= p.bytes
	r.charge(use, -p.memory)
	delete(r.msgs, p.key)
	for i, k := range use.keys {
		if k == p.key {
			use.keys = append(use.keys[:i], use.keys[i+1:]...)
			break
		}
	}
	if len(use.keys) == 0 {
		r.dropOwner(p.owner, use)
	}
	for i, c := range p.chunks {
		if c == nil {
			continue // handed out whole
		}
		size := cap(c)
		if cl := classOf(size); cl < numClasses && minChunk<<cl == size {
			if (len(r.chunks[cl])+1)*size <= maxFreeClass {
				r.chunks[cl] = append(r.chunks[cl], c[:0])
			}
		} else if size <= chunkSize && len(r.odd) < maxFreeOdd {
			r.odd = append(r.odd, c[:0])
		}
		p.chunks[i] = nil
	}
	p.chunks, p.placed = p.chunks[:0], false
	var zero O
	var zeroK K
	p.owner, p.key, p.use = zero, zeroK, nil
	if len(r.free) < maxFreePartials {
		clear(p.segs)
		p.bytes, p.segSize, p.memory = 0, 0, 0
		r.free = append(r.free, p)
	}
}

// dropOwner forgets an owner that holds nothing.
func (r *Reassembler[O, K]) dropOwner(owner O, use *ownerUse[K]) {
	delete(r.owners, owner)
	last := len(r.heap) - 1
	i := use.at
	if i != last {
		r.heap[i] = r.heap[last]
		r.heap[i].at = i
	}
	r.heap[last] = nil
	r.heap = r.heap[:last]
	if i != last {
		r.siftDown(i)
		r.siftUp(i)
	}
	if len(r.freeUse) < maxFreeOwners {
		use.keys, use.memory, use.at = use.keys[:0], 0, 0
		r.freeUse = append(r.freeUse, use)
	}
}

// charge adds d (which may be negative) to use's memory and the total.
func (r *Reassembler[O, K]) charge(use *ownerUse[K], d int) {
	use.memory += d
	r.memory += d
	if d > 0 {
		r.siftUp(use.at)
	} else {
		r.siftDown(use.at)
	}
}

// The heap keeps the owner holding the most memory at heap[0].

func (r *Reassembler[O, K]) heaviest() *ownerUse[K] {
	if len(r.heap) == 0 {
		return nil
	}
	return r.heap[0]
}

func (r *Reassembler[O, K]) siftUp(i int) {
	h := r.heap
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].memory >= h[i].memory {
			return
		}
		r.swap(i, parent)
		i = parent
	}
}

func (r *Reassembler[O, K]) siftDown(i int) {
	h := r.heap
	for {
		big, l, rt := i, 2*i+1, 2*i+2
		if l < len(h) && h[l].memory > h[big].memory {
			big = l
		}
		if rt < len(h) && h[rt].memory > h[big].memory {
			big = rt
		}
		if big == i {
			return
		}
		r.swap(i, big)
		i = big
	}
}

func (r *Reassembler[O, K]) swap(i, j int) {
	h := r.heap
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i, j
}
