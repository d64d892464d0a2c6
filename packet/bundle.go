package packet

import (
	"errors"
	"fmt"

	"github.com/raet-go/raet/codec"
)

// Bundles and answers (raet-go only, the fast profile between two raet-go
// estates that negotiated them; spec/raet.yaml, extensions "bundle" and
// "answers").
//
// A bundle packet (pk bundle, tk message, ti the first entry's) carries
// several small messages under one head, one coat seal and one foot:
//
//	coat = uvarint(n)                              1..MaxBundleEntries
//	       n × { uvarint(ti) u8(fg) u8(bk) uvarint(len) }
//	       uvarint(a) a bytes of answers           0 for none (piggybacked)
//	       Seal(entry 1 plaintext || … || entry n plaintext)
//
// The table is in the clear, so a receiver (and a dissector without keys)
// sees each entry's transaction id and size; the foot authenticates it
// with the rest of the packet. Each entry is one message transaction of
// its own ti, answered by its own done; its plaintext is what the coat of
// that message would seal alone (the mid envelope and the body).
//
// In a session with an AEAD coat (the aead extension) the whole coat above,
// table, answers and payload, is the AEAD plaintext, sealed with the head
// as associated data and no foot; the payload is not sealed again
// (Bundler.AEAD; a receiver opens the packet, then ParseBundle and Open
// with a nil Coat).
//
// An answers packet (pk answers, tk message, ti 0), or the answers of a
// bundle, coalesces dones and acks:
//
//	uvarint(n)                                     1..MaxAnswerRanges
//	n × { u8(pk) zigzag-uvarint(first - previous last) uvarint(count - 1) }
//
// pk is ack or done; a range answers the ids first..first+count-1 (mod
// 2^32); the difference is a signed 32-bit one and the previous last is 0
// before the first range; at most MaxAnswerIDs ids in all. Its coat is
// never sealed: like a done's empty coat, only the foot protects it (with
// an AEAD coat, the list is the AEAD plaintext, as any packet's body).
//
// Every uvarint must be minimal (no padding bytes), so that one list of
// entries or ranges has exactly one encoding.

// Limits of bundles and answers.
const (
	// MaxBundleEntries is the most messages in one bundle.
	MaxBundleEntries = 255
	// MaxAnswerRanges is the most ranges in one answers list.
	MaxAnswerRanges = 256
	// MaxAnswerIDs is the most transaction ids one answers list may cover,
	// so that an answers packet costs its receiver a bounded amount of work.
	MaxAnswerIDs = 8192
)

// Errors of bundles and answers, wrapped in a *PacketError; test with
// errors.Is.
var (
	// ErrBundleFull: the entry (or the answers) does not fit the bundle
	// being built; flush it and add the entry to the next one.
	ErrBundleFull = errors.New("bundle full")
	// ErrNotBundled: the message does not fit even an empty bundle of the
	// packet size; it goes alone, as a message packet (segmented if need be).
	ErrNotBundled = errors.New("message too large for a bundle")
	// ErrBundleEmpty: a bundle flushed with no entry.
	ErrBundleEmpty = errors.New("bundle without entries")
	// ErrBundleTable: a bundle's table is malformed or out of bounds.
	ErrBundleTable = errors.New("malformed bundle table")
	// ErrBundlePayload: a bundle's opened payload is not the sum of its
	// entries' lengths.
	ErrBundlePayload = errors.New("bundle payload does not match its table")
	// ErrAnswers: an answers list is malformed or out of bounds.
	ErrAnswers = errors.New("malformed answers")
)

// errBundleFull is made once: a full bundle is the usual case of Add in a
// stream of messages, which allocates nothing.
var errBundleFull error = &PacketError{Op: "bundle", Err: ErrBundleFull}

// BundleEntry is one message of a bundle.
type BundleEntry struct {
	TI       uint32         // the message's transaction id
	Flags    codec.Flags    // the flags the message would carry alone (cf, af)
	BodyKind codec.BodyKind // the serialization of its body
	// Plain is the message's coat plaintext (mid envelope and body). To
	// Bundler.Add it is copied; from Bundle.Open it aliases the payload.
	Plain []byte
	// Len is the plaintext length the table gives (set by ParseBundle).
	Len int
}

// bundledHead is the head of a bundle built from the template t.
func bundledHead(t *codec.Head, ti uint32) codec.Head {
	h := *t
	h.PacketKind = codec.PacketKindBundle
	h.TransactionKind = codec.TransactionKindMessage
	h.TransactionID = ti
	h.SegmentNumber, h.SegmentCount, h.MessageLength = 0, 1, 0
	h.Flags &^= codec.FlagSegment | codec.FlagCorrespondent | codec.FlagAgain
	h.PacketLength = 0
	return h
}

// Bundler packs the messages queued for one remote into bundle packets of
// at most its Packer's packet size, sealing each bundle's payload once with
// Coat, or, with AEAD set, sealing each bundle's whole coat (table, answers
// and payload, the payload not sealed again) with that AEAD coat, the head
// as associated data and no foot, as PackAEAD does (the table is then not
// in the clear). Add messages, then Flush; Add says when a message must wait for the
// next bundle (ErrBundleFull) or go alone (ErrNotBundled). After the first
// bundle of the largest size, nothing is allocated: the Bundler keeps its
// buffers and Flush appends to the caller's.
//
// A Bundler is not safe for concurrent use; the road's owner keeps one per
// remote.
type Bundler struct {
	Packer *Packer   // head codec, foot and packet size
	Coat   Coat      // the session's coat; nil is NadaCoat
	AEAD   *AEADCoat // the session's AEAD coat, in place of Coat and the foot; nil: none

	head    codec.Head // template: se, de, si, bk, ck, flags
	first   uint32     // ti of the first entry
	headLen int        // the head's size with the first entry's ti
	n       int
	table   []byte // the entries' table, without the count
	answers []byte
	plain   []byte
	coat    []byte
	out     codec.Head              // the head being packed (kept here: it escapes)
	scratch [codec.MaxHeadSize]byte // for sizing heads
}

// Reset empties the bundle and sets the head every bundle takes from
// template h (its estate and session ids, kinds and flags; the bundler sets
// pk, tk, ti and the segment fields).
func (b *Bundler) Reset(h *codec.Head) {
	b.head = *h
	b.clear()
}

func (b *Bundler) clear() {
	b.n, b.headLen = 0, 0
	b.table, b.answers, b.plain = b.table[:0], b.answers[:0], b.plain[:0]
}

// Len is the number of entries in the bundle being built.
func (b *Bundler) Len() int { return b.n }

func (b *Bundler) coatKind() Coat {
	if b.Coat == nil {
		return NadaCoat{}
	}
	return b.Coat
}

// size is the packet size of the bundle with headLen, n entries, a table of
// table bytes, answers of a bytes and a plaintext of plain bytes.
func (b *Bundler) size(headLen, n, table, a, plain int) int {
	s := headLen + uvarintLen(uint64(n)) + table + uvarintLen(uint64(a)) + a + plain
	switch {
	case b.AEAD != nil:
		s += AEADOverhead
	case plain > 0:
		s += b.coatKind().Overhead() + b.Packer.Foot.Size()
	default:
		s += b.Packer.Foot.Size()
	}
	return s
}

// headSize is the size of the bundle head for a first entry ti.
func (b *Bundler) headSize(ti uint32) (int, error) {
	b.out = b.bundleHead(ti)
	out, err := b.Packer.Codec.Append(b.scratch[:0], &b.out)
	if err != nil {
		return 0, err
	}
	return len(out), nil
}

// entryHeadLen is the size of e's table entry.
func entryHeadLen(ti uint32, n int) int { return uvarintLen(uint64(ti)) + 2 + uvarintLen(uint64(n)) }

// Add queues e in the bundle (copying its plaintext). It returns an error
// wrapping ErrBundleFull when e does not fit with the entries already in
// (flush, then add it again), and ErrNotBundled when it would not fit an
// empty bundle either (send it alone).
func (b *Bundler) Add(e BundleEntry) error {
	headLen := b.headLen
	if b.n == 0 {
		hl, err := b.headSize(e.TI)
		if err != nil {
			return &PacketError{Op: "bundle", Err: err}
		}
		headLen = hl
	}
	eh := entryHeadLen(e.TI, len(e.Plain))
	limit := b.Packer.limit()
	if b.size(headLen, 1, eh, 0, len(e.Plain)) > limit {
		return &PacketError{Op: "bundle", Err: fmt.Errorf("%w: %d bytes, limit %d", ErrNotBundled, len(e.Plain), limit)}
	}
	if b.n == MaxBundleEntries || b.size(headLen, b.n+1, len(b.table)+eh, len(b.answers), len(b.plain)+len(e.Plain)) > limit {
		return errBundleFull
	}
	if b.n == 0 {
		b.first, b.headLen = e.TI, headLen
	}
	b.table = appendUvarint(b.table, uint64(e.TI))
	b.table = append(b.table, byte(e.Flags), byte(e.BodyKind))
	b.table = appendUvarint(b.table, uint64(len(e.Plain)))
	b.plain = append(b.plain, e.Plain...)
	b.n++
	return nil
}

// SetAnswers puts an answers list (AppendAnswers) in the bundle, replacing
// any before, to piggyback dones and acks on the messages. It returns an
// error wrapping ErrBundleFull when it does not fit with the entries
// already in; the bundle is then unchanged.
func (b *Bundler) SetAnswers(answers []byte) error {
	if b.n > 0 && b.size(b.headLen, b.n, len(b.table), len(answers), len(b.plain)) > b.Packer.limit() {
		return errBundleFull
	}
	b.answers = append(b.answers[:0], answers...)
	return nil
}

// Flush appends the bundle packet to dst and empties the bundle (keeping
// its head template). A bundle without entries is an error wrapping
// ErrBundleEmpty (answers alone go in an answers packet, PackAnswers).
func (b *Bundler) Flush(dst []byte) ([]byte, error) {
	if b.n == 0 {
		return dst, &PacketError{Op: "bundle", Err: ErrBundleEmpty}
	}
	c := appendUvarint(b.coat[:0], uint64(b.n))
	c = append(c, b.table...)
	c = appendUvarint(c, uint64(len(b.answers)))
	c = append(c, b.answers...)
	var err error
	if b.AEAD != nil {
		c = append(c, b.plain...)
	} else if c, err = b.coatKind().Seal(c, b.plain); err != nil {
		return dst, &PacketError{Op: "bundle", Err: err}
	}
	b.coat = c
	b.out = b.bundleHead(b.first)
	var out []byte
	if b.AEAD != nil {
		out, err = b.Packer.PackAEAD(dst, &b.out, b.AEAD, c)
	} else {
		out, err = b.Packer.Pack(dst, &b.out, c)
	}
	if err != nil {
		return dst, err
	}
	b.clear()
	return out, nil
}

// bundleHead is the head of the bundle whose first entry is ti, with the
// coat and foot kinds it is packed with.
func (b *Bundler) bundleHead(ti uint32) codec.Head {
	h := bundledHead(&b.head, ti)
	if b.AEAD != nil {
		h.CoatKind, h.FootKind, h.FootLength = b.AEAD.Kind(), codec.FootKindNada, 0
	} else {
		h.FootKind, h.FootLength = b.Packer.Foot.Kind(), uint16(b.Packer.Foot.Size())
	}
	return h
}

// Bundle is a parsed bundle coat. Its slices alias the coat given to
// ParseBundle (and, after Open, the payload); reuse one Bundle for many
// packets to parse without allocating.
type Bundle struct {
	Entries []BundleEntry // at most MaxBundleEntries; Plain nil until Open
	Answers []byte        // the piggybacked answers list (ParseAnswers); empty for none
	Sealed  []byte        // the sealed payload
	total   int           // the sum of the entries' lengths
}

// ParseBundle reads the table of a bundle packet's coat into b. It checks
// the table's bounds; the payload is checked by Open.
func ParseBundle(coat []byte, b *Bundle) error {
	b.Entries, b.Answers, b.Sealed, b.total = b.Entries[:0], nil, nil, 0
	fail := func(why string) error {
		return &PacketError{Op: "unbundle", Err: fmt.Errorf("%w: %s", ErrBundleTable, why)}
	}
	n, k := readUvarint(coat)
	if k <= 0 || n == 0 || n > MaxBundleEntries {
		return fail("entry count")
	}
	pos := k
	for range n {
		ti, k := readUvarint(coat[pos:])
		if k <= 0 || ti > 1<<32-1 {
			return fail("entry ti")
		}
		pos += k
		if len(coat)-pos < 2 {
			return fail("entry flags")
		}
		fg, bk := coat[pos], coat[pos+1]
		pos += 2
		l, k := readUvarint(coat[pos:])
		if k <= 0 || l > uint64(len(coat)) {
			return fail("entry length")
		}
		pos += k
		b.total += int(l)
		if b.total > len(coat) {
			return fail("entry lengths exceed the coat")
		}
		b.Entries = append(b.Entries, BundleEntry{TI: uint32(ti), Flags: codec.Flags(fg), BodyKind: codec.BodyKind(bk), Len: int(l)})
	}
	a, k := readUvarint(coat[pos:])
	if k <= 0 || a > uint64(len(coat)-pos-k) {
		return fail("answers length")
	}
	pos += k
	b.Answers = coat[pos : pos+int(a)]
	b.Sealed = coat[pos+int(a):]
	return nil
}

// Open appends the bundle's opened payload to dst with c (the packet's coat
// kind; nil is NadaCoat) and points each entry's Plain at its part of it.
// A payload that is not exactly the entries' lengths is an error wrapping
// ErrBundlePayload.
func (b *Bundle) Open(dst []byte, c Coat) ([]byte, error) {
	if c == nil {
		c = NadaCoat{}
	}
	start := len(dst)
	out, err := c.Open(dst, b.Sealed)
	if err != nil {
		return dst, &PacketError{Op: "unbundle", Err: err}
	}
	plain := out[start:]
	if len(plain) != b.total {
		return dst, &PacketError{Op: "unbundle", Err: fmt.Errorf("%w: %d bytes for %d", ErrBundlePayload, len(plain), b.total)}
	}
	off := 0
	for i := range b.Entries {
		e := &b.Entries[i]
		e.Plain = plain[off : off+e.Len : off+e.Len]
		off += e.Len
	}
	return out, nil
}

// AnswerRange is count transaction ids from first (mod 2^32), all answered
// with one kind: ack or done.
type AnswerRange struct {
	Kind  codec.PacketKind // codec.PacketKindAck or codec.PacketKindDone
	First uint32
	Count uint32 // at least 1
}

// AddAnswer adds the answer kind for ti to rs: it extends the last range
// when ti follows it with the same kind, else appends a range of one.
func AddAnswer(rs []AnswerRange, kind codec.PacketKind, ti uint32) []AnswerRange {
	if n := len(rs); n > 0 {
		last := &rs[n-1]
		if last.Kind == kind && last.First+last.Count == ti && last.Count < MaxAnswerIDs {
			last.Count++
			return rs
		}
	}
	return append(rs, AnswerRange{Kind: kind, First: ti, Count: 1})
}

func answerKind(k codec.PacketKind) bool {
	return k == codec.PacketKindAck || k == codec.PacketKindDone
}

// AppendAnswers appends the answers list of rs to dst. rs must hold 1 to
// MaxAnswerRanges ranges of kind ack or done, covering at most MaxAnswerIDs
// ids; otherwise it returns an error wrapping ErrAnswers and dst unchanged.
func AppendAnswers(dst []byte, rs []AnswerRange) ([]byte, error) {
	if len(rs) == 0 || len(rs) > MaxAnswerRanges {
		return dst, &PacketError{Op: "answers", Err: fmt.Errorf("%w: %d ranges", ErrAnswers, len(rs))}
	}
	ids := 0
	for _, r := range rs {
		if !answerKind(r.Kind) || r.Count == 0 || r.Count > MaxAnswerIDs {
			return dst, &PacketError{Op: "answers", Err: fmt.Errorf("%w: range %v %d+%d", ErrAnswers, r.Kind, r.First, r.Count)}
		}
		if ids += int(r.Count); ids > MaxAnswerIDs {
			return dst, &PacketError{Op: "answers", Err: fmt.Errorf("%w: over %d ids", ErrAnswers, MaxAnswerIDs)}
		}
	}
	out := appendUvarint(dst, uint64(len(rs)))
	var last uint32
	for _, r := range rs {
		d := int32(r.First - last)
		out = append(out, byte(r.Kind))
		out = appendUvarint(out, uint64(uint32(d<<1)^uint32(d>>31)))
		out = appendUvarint(out, uint64(r.Count-1))
		last = r.First + r.Count - 1
	}
	return out, nil
}

// ParseAnswers appends the ranges of the answers list b to dst; with
// capacity for MaxAnswerRanges in dst it does not allocate. A malformed or
// out-of-bounds list is an error wrapping ErrAnswers, with dst unchanged.
func ParseAnswers(dst []AnswerRange, b []byte) ([]AnswerRange, error) {
	fail := func(why string) ([]AnswerRange, error) {
		return dst, &PacketError{Op: "answers", Err: fmt.Errorf("%w: %s", ErrAnswers, why)}
	}
	n, pos := readUvarint(b)
	if pos <= 0 || n == 0 || n > MaxAnswerRanges {
		return fail("range count")
	}
	out := dst
	var last uint32
	ids := 0
	for range n {
		if pos >= len(b) {
			return fail("truncated")
		}
		kind := codec.PacketKind(b[pos])
		if !answerKind(kind) {
			return fail("kind " + kind.String())
		}
		pos++
		z, k := readUvarint(b[pos:])
		if k <= 0 || z > 1<<32-1 {
			return fail("first")
		}
		pos += k
		c, k := readUvarint(b[pos:])
		if k <= 0 || c >= MaxAnswerIDs {
			return fail("count")
		}
		pos += k
		if ids += int(c) + 1; ids > MaxAnswerIDs {
			return fail("too many ids")
		}
		d := uint32(z>>1) ^ -uint32(z&1)
		r := AnswerRange{Kind: kind, First: last + d, Count: uint32(c) + 1}
		out = append(out, r)
		last = r.First + r.Count - 1
	}
	if pos != len(b) {
		return fail("trailing bytes")
	}
	return out, nil
}

// PackAnswers appends an answers packet of rs with head h to dst. h gives
// the estate and session ids and kinds; like Pack, PackAnswers sets fields
// of h: pk, tk, ti, the segment fields and the correspondent flag (the
// answers are the receiver's transactions), besides the foot's. The list
// must fit the packet size.
func (pk *Packer) PackAnswers(dst []byte, h *codec.Head, rs []AnswerRange) ([]byte, error) {
	var buf [MaxAnswerRanges * 12]byte
	list, err := AppendAnswers(buf[:0], rs)
	if err != nil {
		return dst, err
	}
	h.PacketKind, h.TransactionKind, h.TransactionID = codec.PacketKindAnswers, codec.TransactionKindMessage, 0
	h.SegmentNumber, h.SegmentCount, h.MessageLength = 0, 1, 0
	h.Flags = h.Flags&^(codec.FlagSegment|codec.FlagAgain) | codec.FlagCorrespondent
	return pk.Pack(dst, h, list)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// readUvarint reads a minimal uvarint of at most 64 bits; k is its size,
// or 0 when b holds none (truncated, too long or padded).
func readUvarint(b []byte) (v uint64, k int) {
	var shift uint
	for i, c := range b {
		if i == 10 || (i == 9 && c > 1) {
			return 0, 0
		}
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			if c == 0 && i > 0 {
				return 0, 0 // padded: not the minimal encoding
			}
			return v, i + 1
		}
		shift += 7
	}
	return 0, 0
}
