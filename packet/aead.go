package packet

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/sys/cpu"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/replay"
)

// Sizes of an AEAD coat.
const (
	// AEADCounterSize is the size of the packet counter that starts an
	// AEAD coat (big-endian).
	AEADCounterSize = 8
	// AEADTagSize is the size of the tag that ends an AEAD coat.
	AEADTagSize = 16
	// AEADOverhead is what an AEAD coat adds to a body, empty or not.
	AEADOverhead = AEADCounterSize + AEADTagSize
)

// The domain-separation labels of the AEAD coats' key derivation (see
// NewAEADCoat). Changing one changes the wire format.
const (
	AES256GCMLabel        = "raet-go aead coat v1 aes-256-gcm"
	ChaCha20Poly1305Label = "raet-go aead coat v1 chacha20-poly1305"
)

// AEADCounterLimit bounds the packet counter: a direction seals the
// counters 0 to AEADCounterLimit-1 and then refuses with ErrRekey. It is
// far below 2^64, so the counter never wraps, however many refused Seals
// follow.
const AEADCounterLimit = 1 << 63

// AES256GCMBlockLimit is how many 16-byte blocks a direction seals under
// one AES-256-GCM key before Seal refuses with ErrRekey: 2^34 (256 GiB),
// which keeps an attacker's advantage near 2^-60 (the bound TLS 1.3 uses,
// RFC 8446 §5.5). ChaCha20-Poly1305 has no such limit short of the counter.
const AES256GCMBlockLimit = 1 << 34

// Errors of the AEAD coat, wrapped in a *CoatError like the others.
var (
	// ErrReplayed: the packet's counter was accepted before.
	ErrReplayed = errors.New("raet: packet counter seen before (replay)")
	// ErrTooOld: the packet's counter is behind the replay window.
	ErrTooOld = errors.New("raet: packet counter behind the replay window")
	// ErrRekey: the direction's key has sealed all it may; a new allow
	// (new short-term keys) is needed.
	ErrRekey = errors.New("raet: coat key used up, a new allow is needed")
	// ErrNotAEAD: a coat kind that is not an AEAD coat.
	ErrNotAEAD = errors.New("raet: not an AEAD coat kind")
)

// AEADCoat is the AEAD coat of raet-go for one session: coat kind
// aes256gcm (6) or chacha20poly1305 (7). It is for sessions whose two ends
// are both raet-go and have agreed on it, after a completed allow; the
// keys are the short-term ones. See docs/aead.md for the security argument.
//
// Layout. The coat of every packet, even of an empty body, is
//
//	counter (8 bytes, big-endian) || ciphertext || tag (16 bytes)
//
// sealed with the packet's head as associated data: the tag authenticates
// head and body, so the packet has no foot (foot kind nada, fl 0). The
// head must therefore hold its final pl before Seal (Packer.PackAEAD).
//
// Keys. As for the MAC foot, each direction has its own 44 bytes, a key and
// an IV, from the session's shared key S:
//
//	K||IV(A→B) = HKDF-SHA-256(secret S, no salt, info label || 0x00 || pubA || pubB, 32+12 bytes)
//
// with the kind's label (AES256GCMLabel, ChaCha20Poly1305Label). The
// 96-bit nonce of a packet is IV xor (4 zero bytes || counter).
//
// Counters and replays. Seal numbers the packets of our direction 0, 1, 2,
// …; Open refuses a counter it accepted before (ErrReplayed) or one more
// than replay.Window behind the highest accepted (ErrTooOld), with a
// sliding window (internal/replay) that is moved only by packets that
// authenticate. A retransmission must therefore be sealed again, under a
// new counter.
//
// Cipher states. The coat always keeps the two 32-byte direction keys,
// the counters and the replay window; the expanded cipher states (for
// AES-256-GCM the key schedules and GHASH tables of the standard library,
// ~1.5 KiB a session) are built at the first Seal or Open, dropped by Drop
// when the session's owner finds it idle, and built again at the next use
// (BenchmarkAEADCoatRebuild). Nonces come from the counters only, never
// from the states, so a rebuild cannot repeat one.
//
// AEADCoat is safe for concurrent use. Seal and Open append to dst like
// Coat's methods, and allocate nothing when dst has the room (Overhead more
// than the body for Seal) and does not overlap the input and the cipher
// states are built; on error they return dst unchanged.
type AEADCoat struct {
	// What a Seal and an Open read come first, in one cache line (a main
	// with thousands of sessions finds most out of the cache); the keys,
	// read only to build the states, last.
	state    atomic.Pointer[aeadCipher] // nil: not built (or dropped)
	next     atomic.Uint64              // the counter of our next packet
	blocks   atomic.Uint64              // AES-GCM blocks sealed
	blockCap uint64                     // AES256GCMBlockLimit, or 0: no limit
	sendIV   [12]byte
	recvIV   [12]byte
	kind     codec.CoatKind
	mu       sync.Mutex    // guards window
	window   replay.Filter // of the counters of their packets
	sendKey  [32]byte
	recvKey  [32]byte
}

// aeadCipher is the expanded cipher state of a coat's two directions. A
// goroutine that loaded it keeps using it safely after Drop.
type aeadCipher struct {
	send, recv cipher.AEAD
}

// aeadNonces are the nonce buffers of every AEAD coat (*[12]byte: a nonce
// handed to the AEAD escapes), one pool for all sessions.
var aeadNonces = sync.Pool{New: func() any { return new([12]byte) }}

// NewAEADCoat derives the two direction keys of an AEAD coat of kind
// (codec.CoatKindAES256GCM or codec.CoatKindChaCha20Poly1305) from our
// short-term private key and the remote's short-term public key. It fails
// with ErrNotAEAD for another kind, and with ErrWeakKey if a key is missing
// or of low order, or if both ends have the same public key.
func NewAEADCoat(kind codec.CoatKind, ourShortPriv, theirShortPub *[32]byte) (*AEADCoat, error) {
	s, err := NewSessionKey(ourShortPriv, theirShortPub)
	if err != nil {
		return nil, &CoatError{Kind: kind, Op: "new", Err: err}
	}
	return s.AEADCoat(kind)
}

// AEADCoat is the session's AEAD coat of kind (see NewAEADCoat).
func (s *SessionKey) AEADCoat(kind codec.CoatKind) (*AEADCoat, error) {
	fail := func(err error) (*AEADCoat, error) {
		return nil, &CoatError{Kind: kind, Op: "new", Err: err}
	}
	var label string
	switch kind {
	case codec.CoatKindAES256GCM:
		label = AES256GCMLabel
	case codec.CoatKindChaCha20Poly1305:
		label = ChaCha20Poly1305Label
	default:
		return fail(ErrNotAEAD)
	}
	sendKey, recvKey, err := s.directionKeys(label, 32+12)
	if err != nil {
		return fail(err)
	}
	c := &AEADCoat{kind: kind}
	copy(c.sendKey[:], sendKey[:32])
	copy(c.recvKey[:], recvKey[:32])
	copy(c.sendIV[:], sendKey[32:])
	copy(c.recvIV[:], recvKey[32:])
	if kind == codec.CoatKindAES256GCM {
		c.blockCap = AES256GCMBlockLimit
	}
	return c, nil
}

// ciphers returns the coat's cipher states, building them if they are not
// (a rebuild allocates; see Drop).
func (c *AEADCoat) ciphers() (*aeadCipher, error) {
	if s := c.state.Load(); s != nil {
		return s, nil
	}
	send, err := newAEAD(c.kind, c.sendKey[:])
	if err != nil {
		return nil, err
	}
	recv, err := newAEAD(c.kind, c.recvKey[:])
	if err != nil {
		return nil, err
	}
	s := &aeadCipher{send: send, recv: recv}
	if !c.state.CompareAndSwap(nil, s) {
		if other := c.state.Load(); other != nil {
			s = other // another goroutine built them first
		}
	}
	return s, nil
}

// Drop drops the coat's cipher states, for a session gone idle: the next
// Seal or Open builds them again, and a Seal or Open under way finishes
// with the states it loaded. Counters and replay window are kept.
func (c *AEADCoat) Drop() { c.state.Store(nil) }

func newAEAD(kind codec.CoatKind, key []byte) (cipher.AEAD, error) {
	if kind == codec.CoatKindChaCha20Poly1305 {
		return chacha20poly1305.New(key)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// HasAESHardware reports whether this CPU has the instructions that make
// AES-GCM fast and constant-time (AES-NI and PCLMULQDQ on amd64, AES and
// PMULL on arm64, KMA-GCM on s390x).
func HasAESHardware() bool {
	return cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ ||
		cpu.ARM64.HasAES && cpu.ARM64.HasPMULL ||
		cpu.S390X.HasAES && cpu.S390X.HasAESGCM
}

// AEADKinds returns the AEAD coat kinds this machine offers, the preferred
// first: AES-256-GCM then ChaCha20-Poly1305 where HasAESHardware, else
// ChaCha20-Poly1305 then AES-256-GCM. An estate that wants one cipher only
// offers that one.
func AEADKinds() []codec.CoatKind {
	if HasAESHardware() {
		return []codec.CoatKind{codec.CoatKindAES256GCM, codec.CoatKindChaCha20Poly1305}
	}
	return []codec.CoatKind{codec.CoatKindChaCha20Poly1305, codec.CoatKindAES256GCM}
}

// ChooseAEAD picks the AEAD coat kind of a session from the coat kinds the
// two ends offer (in their order of preference; other kinds are ignored),
// the same whichever end is a and which b: AES-256-GCM if both prefer it
// (both have AES instructions), else ChaCha20-Poly1305 if both offer it
// (it is fast everywhere), else AES-256-GCM if both offer it. ok is false
// when they have no AEAD kind in common.
func ChooseAEAD(a, b []codec.CoatKind) (kind codec.CoatKind, ok bool) {
	aAES, aChaCha, aPrefAES := aeadOffer(a)
	bAES, bChaCha, bPrefAES := aeadOffer(b)
	switch {
	case aPrefAES && bPrefAES:
		return codec.CoatKindAES256GCM, true
	case aChaCha && bChaCha:
		return codec.CoatKindChaCha20Poly1305, true
	case aAES && bAES:
		return codec.CoatKindAES256GCM, true
	}
	return codec.CoatKindNada, false
}

// aeadOffer reads one end's offer: which AEAD kinds it has, and whether
// AES-256-GCM comes first.
func aeadOffer(kinds []codec.CoatKind) (hasAES, hasChaCha, prefersAES bool) {
	for _, k := range kinds {
		switch k {
		case codec.CoatKindAES256GCM:
			prefersAES = prefersAES || !hasChaCha
			hasAES = true
		case codec.CoatKindChaCha20Poly1305:
			hasChaCha = true
		}
	}
	return hasAES, hasChaCha, prefersAES
}

// Kind returns the coat kind.
func (c *AEADCoat) Kind() codec.CoatKind { return c.kind }

// Remaining is how much more our direction may seal before Seal refuses
// with ErrRekey: the packets left under AEADCounterLimit or, for
// AES-256-GCM, the 16-byte blocks left under AES256GCMBlockLimit, whichever
// is less. A session should allow again (new short-term keys) well before
// it reaches 0.
func (c *AEADCoat) Remaining() uint64 {
	left := uint64(0)
	if n := c.next.Load(); n < AEADCounterLimit {
		left = AEADCounterLimit - n
	}
	if c.blockCap != 0 {
		b := c.blocks.Load()
		left = min(left, c.blockCap-min(b, c.blockCap))
	}
	return left
}

// Overhead returns AEADOverhead.
func (c *AEADCoat) Overhead() int { return AEADOverhead }

// Seal appends to dst the coat of plain, counter || ciphertext || tag,
// under the next counter of our direction and with head as associated
// data. head may be the start of dst (the packet so far). plain may be
// where its ciphertext goes, at dst[len(dst)+AEADCounterSize:] within
// dst's capacity, to seal in place; any other overlap is copied. After
// AEADCounterLimit packets, or AES256GCMBlockLimit blocks for AES-256-GCM,
// it fails with ErrRekey.
func (c *AEADCoat) Seal(dst, head, plain []byte) ([]byte, error) {
	n := c.next.Add(1) - 1
	if n >= AEADCounterLimit {
		return dst, &CoatError{Kind: c.kind, Op: "seal", Len: len(plain), Err: ErrRekey}
	}
	if c.blockCap != 0 && c.blocks.Add(uint64(len(plain)+15)/16+1) > c.blockCap {
		return dst, &CoatError{Kind: c.kind, Op: "seal", Len: len(plain), Err: ErrRekey}
	}
	st, err := c.ciphers()
	if err != nil {
		return dst, &CoatError{Kind: c.kind, Op: "seal", Len: len(plain), Err: err}
	}
	start, total := len(dst), len(plain)+AEADOverhead
	out := slices.Grow(dst, total)
	region := out[start : start+total]
	inPlace := len(plain) > 0 && &region[AEADCounterSize] == &plain[0]
	if (anyOverlap(region, plain) && !inPlace) || anyOverlap(region, head) {
		out = make([]byte, start, start+total)
		copy(out, dst)
	}
	out = binary.BigEndian.AppendUint64(out, n)
	nonce := c.nonce(&c.sendIV, n)
	out = st.send.Seal(out, nonce[:], plain, head)
	aeadNonces.Put(nonce)
	return out, nil
}

// Open appends to dst the body inside coat, given the head of its packet
// as associated data. dst may be coat[AEADCounterSize:AEADCounterSize], to
// open in place. A coat shorter than AEADOverhead is ErrCoatShort, one
// that does not authenticate ErrCoatOpen; a counter seen before is
// ErrReplayed and one behind the window ErrTooOld (both refused before any
// decryption). Only a coat that authenticates moves the window.
func (c *AEADCoat) Open(dst, head, coat []byte) ([]byte, error) {
	fail := func(err error) ([]byte, error) {
		return dst, &CoatError{Kind: c.kind, Op: "open", Len: len(coat), Err: err}
	}
	if len(coat) < AEADOverhead {
		return fail(ErrCoatShort)
	}
	n := binary.BigEndian.Uint64(coat)
	c.mu.Lock()
	v := c.window.Check(n)
	c.mu.Unlock()
	if v != replay.Fresh {
		return fail(verdictError(v))
	}
	st, err := c.ciphers()
	if err != nil {
		return fail(err)
	}
	sealed := coat[AEADCounterSize:]
	start, m := len(dst), len(sealed)-AEADTagSize
	out := slices.Grow(dst, m)
	if region := out[start : start+m]; m > 0 && &region[0] != &sealed[0] && anyOverlap(region, coat) {
		// Anything but in place (exactly over the ciphertext) is copied.
		out = make([]byte, start, start+m)
		copy(out, dst)
	}
	nonce := c.nonce(&c.recvIV, n)
	out, err = st.recv.Open(out, nonce[:], sealed, head)
	aeadNonces.Put(nonce)
	if err != nil {
		return fail(ErrCoatOpen)
	}
	// Accept checks again: another goroutine may have opened the same
	// packet meanwhile.
	c.mu.Lock()
	v = c.window.Accept(n)
	c.mu.Unlock()
	if v != replay.Fresh {
		return fail(verdictError(v))
	}
	return out, nil
}

func verdictError(v replay.Verdict) error {
	if v == replay.Seen {
		return ErrReplayed
	}
	return ErrTooOld
}

// nonce returns a pooled buffer holding iv xor (0^32 || n).
func (c *AEADCoat) nonce(iv *[12]byte, n uint64) *[12]byte {
	b := aeadNonces.Get().(*[12]byte)
	*b = *iv
	binary.BigEndian.PutUint64(b[4:], binary.BigEndian.Uint64(b[4:])^n)
	return b
}

// PackAEAD appends to dst one packet of head h whose coat is plain sealed
// with a (no foot): it sets h's coat kind to a's, foot kind nada and fl 0,
// writes the head with its final pl, and seals plain with the head as
// associated data. The packet must fit MaxPacketSize; pk.Foot is not used.
// It packs one whole packet: a body too large for one is the caller's to
// cut, each piece sealed in its own packet.
func (pk *Packer) PackAEAD(dst []byte, h *codec.Head, a *AEADCoat, plain []byte) ([]byte, error) {
	return pk.packAEAD(dst, h, a, nil, plain)
}

// counterRoom stands in for the counter while a plain text is joined in
// place in front of its coat.
var counterRoom [AEADCounterSize]byte

// packAEAD is PackAEAD of the plain text first || rest: rest is sealed
// from where it is when first is empty, else both are copied into the
// packet, where their ciphertext goes, and sealed in place.
func (pk *Packer) packAEAD(dst []byte, h *codec.Head, a *AEADCoat, first, rest []byte) ([]byte, error) {
	h.CoatKind = a.Kind()
	h.FootKind, h.FootLength = codec.FootKindNada, 0
	start := len(dst)
	out, err := pk.Codec.Append(dst, h)
	if err != nil {
		return dst, &PacketError{Op: "pack", Err: err}
	}
	headEnd := len(out)
	pl := headEnd - start + len(first) + len(rest) + AEADOverhead
	if pl > pk.limit() {
		return dst, &PacketError{Op: "pack", Err: fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, pl, pk.limit())}
	}
	if err := pk.Codec.SetPacketLength(out[start:headEnd], pl); err != nil {
		return dst, &PacketError{Op: "pack", Err: err}
	}
	h.PacketLength = uint32(pl)
	plain := rest
	if len(first) > 0 {
		out = append(append(append(out, counterRoom[:]...), first...), rest...)
		plain = out[headEnd+AEADCounterSize:]
	}
	out, err = a.Seal(out[:headEnd], out[start:headEnd], plain)
	if err != nil {
		return dst, &PacketError{Op: "pack", Err: err}
	}
	return out, nil
}

// SegmentsAEAD is Segments for a body sealed packet by packet with a: how
// a body of plainLen bytes travels with head h, in one packet (count 1,
// segSize 0) or in count segments of segSize bytes (the last shorter),
// each of them with its own AEAD coat (AEADOverhead more than its piece)
// and no foot. The reassembled message is the plain body: its ml is
// plainLen.
func (pk *Packer) SegmentsAEAD(h *codec.Head, a *AEADCoat, plainLen int) (segSize, count int, err error) {
	s := headScratches.Get().(*headScratch)
	defer headScratches.Put(s)
	s.head = *h
	s.head.CoatKind = a.Kind()
	s.head.FootKind, s.head.FootLength = codec.FootKindNada, 0
	return pk.segments(s, plainLen, AEADOverhead)
}

// PackSegmentAEAD appends segment i of count of the plain body prefix ||
// body (as SegmentsAEAD planned them, segSize bytes each), sealed with a
// in its own packet of head h: sn=i, sc=count, ml=len(prefix)+len(body)
// and the segment flag set, as PackSegment does. prefix (nil for none) is
// a short envelope, such as a message id, that travels in front of the
// body without being joined to it first: a piece of the body alone is
// sealed from where it is, a piece with some of the prefix is joined in
// the packet. Each call seals under a new counter, so a segment sent
// again is a new packet.
func (pk *Packer) PackSegmentAEAD(dst []byte, h *codec.Head, a *AEADCoat, prefix, body []byte, i, segSize, count int) ([]byte, error) {
	lo, hi, err := segmentRange(h, len(prefix)+len(body), i, segSize, count)
	if err != nil {
		return dst, err
	}
	if p := len(prefix); lo < p {
		return pk.packAEAD(dst, h, a, prefix[lo:min(hi, p)], body[:max(hi-p, 0)])
	}
	return pk.packAEAD(dst, h, a, nil, body[lo-len(prefix):hi-len(prefix)])
}

// OpenAEAD appends the body inside a packet's AEAD coat to dst, with the
// packet's head as associated data: the whole body of an unsegmented
// packet, or the piece of a segment (each segment is sealed on its own).
// The packet must be of a's coat kind and have no foot. Opening into the
// spare capacity of p.Raw (dst = p.Raw[len(p.Raw):]) allocates nothing
// and leaves the datagram as it was, whatever the outcome.
func (p *Packet) OpenAEAD(dst []byte, a *AEADCoat) ([]byte, error) {
	if a.Kind() != p.Head.CoatKind || len(p.Foot) != 0 {
		return dst, &CoatError{Kind: p.Head.CoatKind, Op: "open", Len: len(p.Coat), Err: ErrCoatOpen}
	}
	hl := len(p.Raw) - len(p.Coat) - len(p.Foot)
	return a.Open(dst, p.Raw[:hl], p.Coat)
}

// OpenAEADInBuffer is OpenAEAD into the datagram's own buffer, allocating
// nothing: after the datagram when p.Raw's capacity has the room, which
// leaves the datagram as it was whatever the outcome (another coat may try
// it after), else in place over the ciphertext, which a failed open leaves
// unreadable.
func (p *Packet) OpenAEADInBuffer(a *AEADCoat) ([]byte, error) {
	if len(p.Coat) < AEADOverhead || cap(p.Raw)-len(p.Raw) >= len(p.Coat) {
		return p.OpenAEAD(p.Raw[len(p.Raw):], a)
	}
	return p.OpenAEAD(p.Coat[AEADCounterSize:AEADCounterSize], a)
}

// IsAEAD reports whether k is an AEAD coat kind (sealed per packet, with
// the head as associated data and no foot).
func IsAEAD(k codec.CoatKind) bool {
	return k == codec.CoatKindAES256GCM || k == codec.CoatKindChaCha20Poly1305
}
