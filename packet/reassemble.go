package packet

import (
	"errors"
	"fmt"

	"github.com/raet-go/raet/codec"
)

// Reassembly limits and their defaults.
const (
	DefaultMaxReassemblies = 64
	DefaultMaxBuffered     = 256 << 20 // bytes held by all unfinished messages together
)

// ReassemblyConfig bounds a Reassembler. The zero value gives the defaults.
type ReassemblyConfig struct {
	// MaxMessageSize is the largest coat (ml) accepted; 0 means
	// codec.MaxMessageSize, the reference's limit.
	MaxMessageSize int
	// MaxReassemblies is how many messages may be unfinished at once; 0 means
	// DefaultMaxReassemblies.
	MaxReassemblies int
	// MaxBuffered is how many segment bytes all unfinished messages may hold
	// together; 0 means DefaultMaxBuffered.
	MaxBuffered int
}

// The reasons a segment is refused by a Reassembler.
var (
	ErrSegment          = errors.New("inconsistent segment")
	ErrMessageTooLarge  = errors.New("message too large")
	ErrTooManyMessages  = errors.New("too many unfinished messages")
	ErrReassemblyMemory = errors.New("reassembly memory limit reached")
)

// SegmentError is a segment a Reassembler refused; Err is one of ErrSegment,
// ErrMessageTooLarge, ErrTooManyMessages or ErrReassemblyMemory.
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
// segment and refuses later segments that disagree.
//
// Memory grows only with the segment bytes that arrive (in chunks of
// 64 KiB), never with the ml a packet claims, and is bounded by the config.
// Chunks and the bookkeeping of finished messages are reused, so that in a
// steady flow segments are stored without allocating. A Reassembler is not
// safe for concurrent use.
type Reassembler[K comparable] struct {
	cfg      ReassemblyConfig
	msgs     map[K]*partial
	buffered int
	free     []*partial // finished, their maps cleared, for reuse
	chunks   [][]byte   // spare chunks, for reuse
}

type partial struct {
	sc       uint16
	ml       uint32
	segs     map[uint16]segRef
	chunks   [][]byte // the stored payloads, appended one after another
	bytes    int
	segSize  int // payload size of every segment but the last, once one is seen
	lastSize int // payload size of the last segment, once seen (-1 before)
}

// segRef is where a segment's payload is stored: chunk, offset, length.
type segRef struct{ chunk, off, n uint32 }

// chunkSize is the size of the chunks segments are stored in; a larger
// segment gets a chunk of its own size.
const chunkSize = 64 << 10

// Reuse bounds: how many finished partials and spare chunks a Reassembler
// keeps.
const (
	maxFreePartials = 16
	maxFreeChunks   = 64 // 4 MiB
)

// NewReassembler returns a Reassembler bounded by cfg (nil for defaults).
func NewReassembler[K comparable](cfg *ReassemblyConfig) *Reassembler[K] {
	r := &Reassembler[K]{msgs: map[K]*partial{}}
	if cfg != nil {
		r.cfg = *cfg
	}
	if r.cfg.MaxMessageSize <= 0 || r.cfg.MaxMessageSize > codec.MaxMessageSize {
		r.cfg.MaxMessageSize = codec.MaxMessageSize
	}
	if r.cfg.MaxReassemblies <= 0 {
		r.cfg.MaxReassemblies = DefaultMaxReassemblies
	}
	if r.cfg.MaxBuffered <= 0 {
		r.cfg.MaxBuffered = DefaultMaxBuffered
	}
	return r
}

// Add stores one segment's payload (the slice of the coat it carries) for
// message key, from its head's sn, sc and ml. payload is copied. When the
// message is whole, Add returns the reassembled coat and forgets the message;
// otherwise it returns nil. A duplicate segment is ignored. A refused segment
// returns a *SegmentError and leaves the message's other segments as they
// were.
func (r *Reassembler[K]) Add(key K, h *codec.Head, payload []byte) ([]byte, error) {
	sn, sc, ml := h.SegmentNumber, h.SegmentCount, h.MessageLength
	fail := func(err error, format string, args ...any) error {
		return &SegmentError{SN: sn, SC: sc, ML: ml, Err: err, Detail: fmt.Sprintf(format, args...)}
	}
	p := r.msgs[key]
	if p == nil {
		switch {
		case sc == 0 || sn >= sc:
			return nil, fail(ErrSegment, "segment number not below the count")
		case int64(ml) > int64(r.cfg.MaxMessageSize):
			return nil, fail(ErrMessageTooLarge, "limit %d", r.cfg.MaxMessageSize)
		case int(ml) < int(sc) || ml == 0:
			return nil, fail(ErrSegment, "message length shorter than the segment count")
		case len(r.msgs) >= r.cfg.MaxReassemblies:
			return nil, fail(ErrTooManyMessages, "limit %d", r.cfg.MaxReassemblies)
		}
		p = r.newPartial(sc, ml)
	} else if sc != p.sc || ml != p.ml {
		return nil, fail(ErrSegment, "first segment said %d segments, ml %d", p.sc, p.ml)
	}
	if sn >= sc {
		return nil, fail(ErrSegment, "segment number not below the count")
	}
	if _, dup := p.segs[sn]; dup {
		return nil, nil
	}
	n := len(payload)
	if n == 0 {
		return nil, fail(ErrSegment, "empty segment")
	}
	if sn == sc-1 {
		if sc == 1 && n != int(ml) {
			return nil, fail(ErrSegment, "a single segment of %d bytes is not the whole message", n)
		}
		if p.segSize > 0 && int64(p.segSize)*int64(sc-1)+int64(n) != int64(ml) {
			return nil, fail(ErrSegment, "last segment of %d bytes does not end the message", n)
		}
	} else {
		switch {
		case p.segSize == 0:
			if int64(n)*int64(sc-1) >= int64(ml) || (p.lastSize >= 0 && int64(n)*int64(sc-1)+int64(p.lastSize) != int64(ml)) {
				return nil, fail(ErrSegment, "segment of %d bytes does not fit ml", n)
			}
		case n != p.segSize:
			return nil, fail(ErrSegment, "segment of %d bytes, others have %d", n, p.segSize)
		}
	}
	if p.bytes+n > int(ml) {
		return nil, fail(ErrSegment, "segments exceed ml")
	}
	if r.buffered+n > r.cfg.MaxBuffered {
		return nil, fail(ErrReassemblyMemory, "limit %d bytes", r.cfg.MaxBuffered)
	}
	if len(p.segs) == 0 {
		r.msgs[key] = p
	}
	if sn == sc-1 {
		p.lastSize = n
	} else {
		p.segSize = n
	}
	p.segs[sn] = r.store(p, payload)
	p.bytes += n
	r.buffered += n
	if len(p.segs) < int(sc) {
		return nil, nil
	}
	// Whole: the sizes were checked on the way in, so the total is ml.
	coat := make([]byte, 0, ml)
	for i := range sc {
		ref := p.segs[i]
		coat = append(coat, p.chunks[ref.chunk][ref.off:ref.off+ref.n]...)
	}
	r.forget(key, p)
	return coat, nil
}

// newPartial returns a reused or a new partial for a message of sc
// segments and ml bytes.
func (r *Reassembler[K]) newPartial(sc uint16, ml uint32) *partial {
	if n := len(r.free); n > 0 {
		p := r.free[n-1]
		r.free = r.free[:n-1]
		p.sc, p.ml, p.lastSize = sc, ml, -1
		return p
	}
	return &partial{sc: sc, ml: ml, segs: map[uint16]segRef{}, lastSize: -1}
}

// store copies payload into p's last chunk, or a new one when it is full.
func (r *Reassembler[K]) store(p *partial, payload []byte) segRef {
	n := len(payload)
	last := len(p.chunks) - 1
	if last < 0 || cap(p.chunks[last])-len(p.chunks[last]) < n {
		var c []byte
		if k := len(r.chunks); k > 0 && n <= chunkSize {
			c, r.chunks = r.chunks[k-1], r.chunks[:k-1]
		} else {
			c = make([]byte, 0, max(chunkSize, n))
		}
		p.chunks = append(p.chunks, c)
		last++
	}
	off := len(p.chunks[last])
	p.chunks[last] = append(p.chunks[last], payload...)
	return segRef{chunk: uint32(last), off: uint32(off), n: uint32(n)}
}

// Missing appends to dst the segment numbers of message key not yet received,
// from 0 up to the highest one received, and returns it with the highest
// received number (-1 if none). These are what a resend asks for.
func (r *Reassembler[K]) Missing(dst []uint16, key K) ([]uint16, int) {
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
func (r *Reassembler[K]) Drop(key K) {
	if p := r.msgs[key]; p != nil {
		r.forget(key, p)
	}
}

// Pending is the number of unfinished messages.
func (r *Reassembler[K]) Pending() int { return len(r.msgs) }

// Buffered is the number of segment bytes held.
func (r *Reassembler[K]) Buffered() int { return r.buffered }

// forget drops message key, keeping its chunks and bookkeeping for reuse.
func (r *Reassembler[K]) forget(key K, p *partial) {
	r.buffered -= p.bytes
	delete(r.msgs, key)
	for i, c := range p.chunks {
		if cap(c) == chunkSize && len(r.chunks) < maxFreeChunks {
			r.chunks = append(r.chunks, c[:0])
		}
		p.chunks[i] = nil
	}
	p.chunks = p.chunks[:0]
	if len(r.free) < maxFreePartials {
		clear(p.segs)
		p.bytes, p.segSize = 0, 0
		r.free = append(r.free, p)
	}
}
