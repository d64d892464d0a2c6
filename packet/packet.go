package packet

import (
	"errors"
	"fmt"
	"sync"

	"github.com/raet-go/raet/codec"
	// Every head kind is understood on receive.
	_ "github.com/raet-go/raet/codec/binary"
	_ "github.com/raet-go/raet/codec/json"
	_ "github.com/raet-go/raet/codec/native"
)

// Packet-level errors. A *PacketError wraps one of them (or a codec, coat or
// foot error); test with errors.Is.
var (
	ErrTooLarge       = errors.New("packet too large")
	ErrFootKind       = errors.New("foot length does not fit the foot kind")
	ErrUnknownFoot    = errors.New("unknown foot kind")
	ErrSegmentedCoat  = errors.New("a segment's coat cannot be opened alone")
	ErrEmptyMessage   = errors.New("nothing to segment")
	ErrSegmentCount   = errors.New("too many segments")
	ErrHeadTooLarge   = errors.New("head leaves no room for a segment")
	ErrPacketTooShort = errors.New("packet shorter than its head and foot")
)

// PacketError is a packet that could not be packed or parsed.
type PacketError struct {
	Op  string // "pack", "parse", "segment"
	Err error
}

func (e *PacketError) Error() string { return "raet: " + e.Op + " packet: " + e.Err.Error() }

// Unwrap returns the cause.
func (e *PacketError) Unwrap() error { return e.Err }

// Packet is a parsed road packet. Coat and Foot alias the datagram given to
// Parse; the caller keeps that buffer alive and unchanged while using them.
type Packet struct {
	Head  codec.Head
	Codec codec.Codec // the head's codec
	Raw   []byte      // the whole datagram
	Coat  []byte      // the coat (encrypted body or a segment of it)
	Foot  []byte      // the foot (signature or MAC), fl bytes
}

// footSize is the foot length each known foot kind must have.
func footSize(k codec.FootKind) (int, bool) {
	switch k {
	case codec.FootKindNada:
		return 0, true
	case codec.FootKindNaCl:
		return NaClFootSize, true
	case codec.FootKindMAC:
		return MACFootSize, true
	}
	return 0, false
}

// Parse decodes the head of the datagram b (detecting its kind) and slices
// the coat and foot. It checks that the foot length fits the foot kind; it
// does not verify the foot nor open the coat (see Verify and Open).
func Parse(b []byte, p *Packet) error {
	c, err := codec.Detect(b)
	if err != nil {
		return &PacketError{Op: "parse", Err: err}
	}
	hl, err := c.Decode(b, &p.Head)
	if err != nil {
		return &PacketError{Op: "parse", Err: err}
	}
	fl := int(p.Head.FootLength)
	want, known := footSize(p.Head.FootKind)
	switch {
	case !known:
		return &PacketError{Op: "parse", Err: fmt.Errorf("%w %v", ErrUnknownFoot, p.Head.FootKind)}
	case fl != want:
		return &PacketError{Op: "parse", Err: fmt.Errorf("%w: fl %d for %v", ErrFootKind, fl, p.Head.FootKind)}
	case hl+fl > len(b):
		return &PacketError{Op: "parse", Err: ErrPacketTooShort}
	}
	p.Codec = c
	p.Raw = b
	p.Coat = b[hl : len(b)-fl]
	p.Foot = b[len(b)-fl:]
	return nil
}

// Verify checks the packet's foot with f, which must be of the packet's
// foot kind.
func (p *Packet) Verify(f Foot) error {
	if f.Kind() != p.Head.FootKind {
		return &FootError{Kind: p.Head.FootKind, Op: "verify", De: p.Head.DestinationID, Err: ErrFootVerify}
	}
	n := len(p.Raw) - len(p.Foot)
	return f.Verify(p.Raw[:n], p.Raw[n:], p.Head.DestinationID)
}

// Open appends the body inside an unsegmented packet's coat to dst, using c,
// which must be of the packet's coat kind.
func (p *Packet) Open(dst []byte, c Coat) ([]byte, error) {
	if p.Head.Segment() || p.Head.SegmentCount > 1 {
		return dst, &PacketError{Op: "parse", Err: ErrSegmentedCoat}
	}
	if c.Kind() != p.Head.CoatKind {
		return dst, &CoatError{Kind: p.Head.CoatKind, Op: "open", Err: ErrCoatOpen}
	}
	return c.Open(dst, p.Coat)
}

// Packer packs the packets of one remote: one head codec, one foot and a
// packet size limit. The zero MaxPacketSize means codec.MaxPacketSize (1024,
// the reference's limit). Coats are sealed by the caller, who sets the head's
// coat kind to match.
type Packer struct {
	Codec         codec.Codec
	Foot          Foot
	MaxPacketSize int
}

func (pk *Packer) limit() int {
	if pk.MaxPacketSize > 0 {
		return pk.MaxPacketSize
	}
	return codec.MaxPacketSize
}

// Pack appends to dst one packet of head h and the given coat bytes (already
// sealed, or a segment of a sealed body): it sets h's foot kind and foot
// length from the Packer, writes the head, the coat and the foot, and patches
// the packet length. The packet must fit MaxPacketSize.
func (pk *Packer) Pack(dst []byte, h *codec.Head, coat []byte) ([]byte, error) {
	h.FootKind = pk.Foot.Kind()
	h.FootLength = uint16(pk.Foot.Size())
	start := len(dst)
	out, err := pk.Codec.Append(dst, h)
	if err != nil {
		return dst, &PacketError{Op: "pack", Err: err}
	}
	headEnd := len(out)
	pl := headEnd - start + len(coat) + pk.Foot.Size()
	if pl > pk.limit() {
		return dst, &PacketError{Op: "pack", Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, pl, pk.limit())}
	}
	if err := pk.Codec.SetPacketLength(out[start:headEnd], pl); err != nil {
		return dst, &PacketError{Op: "pack", Err: err}
	}
	h.PacketLength = uint32(pl)
	out = append(out, coat...)
	signed, err := pk.Foot.Sign(out[start:])
	if err != nil {
		return dst, &PacketError{Op: "pack", Err: err}
	}
	if len(signed) > 0 && len(out) > start && &signed[0] == &out[start] {
		return out[:start+len(signed)], nil
	}
	return append(out[:start], signed...), nil
}

// Segments decides how a coat of coatLen bytes travels with head h: in one
// packet (count 1, segSize 0) when head, coat and foot fit MaxPacketSize;
// otherwise cut into count segments of segSize bytes (the last shorter), the
// size the reference computes: the limit less the unsegmented head, the
// largest sn, sc and ml lines the head may gain, and the foot (§8.5).
func (pk *Packer) Segments(h *codec.Head, coatLen int) (segSize, count int, err error) {
	s := headScratches.Get().(*headScratch)
	defer headScratches.Put(s)
	s.head = *h
	s.head.FootKind, s.head.FootLength = pk.Foot.Kind(), uint16(pk.Foot.Size())
	return pk.segments(s, coatLen, pk.Foot.Size())
}

// headScratch is where segments sizes a head: the head and the bytes it
// encodes to. Both escape through the Codec interface, so they are pooled
// rather than declared on each call (which made each message allocate
// them) and not kept in the Packer, which is a value its callers copy and
// share between goroutines.
type headScratch struct {
	head codec.Head
	buf  [codec.MaxHeadSize]byte
}

var headScratches = sync.Pool{New: func() any { return new(headScratch) }}

// segments plans a payload of n bytes in packets of head s.head (its coat
// and foot kinds set), each carrying tail more bytes after its payload
// (the foot, or the AEAD overhead), as Segments says: the head with the
// largest sn, sc and ml fields is the unsegmented one and what they add
// (the reference's 27 bytes for a native head and 36 for a JSON one),
// measured here by encoding it.
func (pk *Packer) segments(s *headScratch, n, tail int) (segSize, count int, err error) {
	h := &s.head
	h.SegmentNumber, h.SegmentCount, h.MessageLength = 0, 1, 0
	h.SetSegment(false)
	h.PacketLength = 0
	head, err := pk.Codec.Append(s.buf[:0], h)
	if err != nil {
		return 0, 0, &PacketError{Op: "segment", Err: err}
	}
	headLen := len(head)
	if headLen+n+tail <= pk.limit() {
		return 0, 1, nil
	}
	h.SegmentNumber, h.SegmentCount, h.MessageLength = codec.MaxSegmentCount, codec.MaxSegmentCount, codec.MaxMessageSize
	full, err := pk.Codec.Append(s.buf[:0], h)
	if err != nil {
		return 0, 0, &PacketError{Op: "segment", Err: err}
	}
	segSize = pk.limit() - (len(full) + tail)
	if segSize <= 0 {
		return 0, 0, &PacketError{Op: "segment", Err: ErrHeadTooLarge}
	}
	count = (n + segSize - 1) / segSize
	if count > codec.MaxSegmentCount || n > codec.MaxMessageSize {
		return 0, 0, &PacketError{Op: "segment", Err: fmt.Errorf("%w: %d bytes in %d segments", ErrSegmentCount, n, count)}
	}
	return segSize, count, nil
}

// PackSegment appends segment i of count of the sealed coat (as Segments
// planned them, segSize bytes each) with head h: sn=i, sc=count, ml=the
// coat length and the segment flag set. Other flags (wf, af) are the
// caller's.
func (pk *Packer) PackSegment(dst []byte, h *codec.Head, coat []byte, i, segSize, count int) ([]byte, error) {
	piece, err := segment(h, coat, i, segSize, count)
	if err != nil {
		return dst, err
	}
	return pk.Pack(dst, h, piece)
}

// segment sets h's segment fields for piece i of count of body (segSize
// bytes each; count 1: unsegmented) and returns the piece.
func segment(h *codec.Head, body []byte, i, segSize, count int) ([]byte, error) {
	lo, hi, err := segmentRange(h, len(body), i, segSize, count)
	if err != nil {
		return nil, err
	}
	return body[lo:hi], nil
}

// segmentRange sets h's segment fields for piece i of count of a body of
// n bytes (segSize bytes each; count 1: unsegmented) and returns where the
// piece is in the body.
func segmentRange(h *codec.Head, n, i, segSize, count int) (lo, hi int, err error) {
	if count <= 1 {
		h.SegmentNumber, h.SegmentCount, h.MessageLength = 0, 1, 0
		h.SetSegment(false)
		return 0, n, nil
	}
	if i < 0 || i >= count || segSize <= 0 || i*segSize >= n {
		return 0, 0, &PacketError{Op: "segment", Err: ErrSegmentCount}
	}
	h.SegmentNumber, h.SegmentCount, h.MessageLength = uint16(i), uint16(count), uint32(n)
	h.SetSegment(true)
	return i * segSize, min((i+1)*segSize, n), nil
}
