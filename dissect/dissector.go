package dissect

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"strings"
	"time"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/packet"
)

// Config configures a Dissector. The zero value dissects RAET on port 7530
// without keys.
type Config struct {
	// Keys verifies feet and opens coats; nil means no keys.
	Keys *KeyRing
	// Ports are the UDP ports of RAET; none means DefaultPort.
	Ports []uint16
	// NoHeuristic turns off taking UDP datagrams on other ports as RAET when
	// they start like a RAET head (LooksLikeRAET).
	NoHeuristic bool
	// Tracker bounds the transaction tracker.
	Tracker TrackerConfig
	// OnClose, when set, is called once for each transaction when it ends,
	// times out, is evicted, or is still running at Flush.
	OnClose func(*Transaction)
	// Serializers decodes bodies of the kinds that are not built in
	// (serializer plugins); nil is the process-wide packet.DefaultRegistry.
	Serializers *packet.Registry
}

// Packet is one dissected RAET packet (a road datagram or a lane page), or a
// frame that should have been one and could not be decoded (Err).
type Packet struct {
	N                int       // the record's number in the capture, from 1
	Time             time.Time // capture time
	Lane             bool      // a lane page, not a road datagram
	Src, Dst         netip.AddrPort
	SrcPath, DstPath string // lane socket paths
	LinkType         int    // the link type of the frame
	Data             []byte // the datagram or page; valid until the next Decode
	Truncated        bool   // the capture holds less than was sent

	HeadOK                    bool // Head (or LaneHead) holds the decoded head
	Parsed                    bool // the head and the parts around it are sound
	Head                      codec.Head
	LaneHead                  codeclane.Head
	HeadLen, CoatLen, FootLen int

	// Verified is nil when the foot was not checked (unsigned, or no key
	// for it), else whether it verified. Signer names the estate (from the
	// keeps) whose key verified it; VerifyNote says why it is nil or false.
	Verified   *bool
	Signer     string
	VerifyNote string

	// Body is the decoded body: a packet.OrderedMap for the mapping kinds
	// and for the allow handshake's bodies (what could be opened). BodyNote
	// says why there is none (a sealed coat, a segment of a message).
	Body     packet.OrderedMap
	HasBody  bool
	BodyNote string
	// Bus is the bus envelope the body is, if it is one (package bus).
	Bus *BusInfo
	// MessageID is the message id envelope inside a message's coat
	// (packet.SplitMessageID), between raet-go estates that negotiated
	// message ids; nil where there is none.
	MessageID *packet.MsgID

	Note    Note // the transaction tracker's; Note.Txn is nil for lane pages, errors, bundles and answers
	HasNote bool

	// Bundle holds the messages of a bundle packet (raet-go fast profile),
	// each with the tracker's note for it as its message; Answers the
	// dones and acks of an answers packet or of a bundle, counted as the
	// done or ack of each transaction they name.
	Bundle  []BundledMessage
	Answers []packet.AnswerRange
	// Answered holds the tracker's note for each transaction Answers
	// name, in their order (an answers packet ends many transactions).
	Answered []Note

	// GSO is the packet's place (from 1) in a UDP GSO super-datagram, a
	// datagram captured before the kernel cut it into packets (a capture
	// on lo sees them so): 0 for a datagram of one packet. The packets of
	// one super-datagram share N and Time; Dissector.Next gives the 2nd
	// and later.
	GSO int

	// Err is why the packet could not be decoded: its frame, head or
	// framing (Parsed false), or, with Parsed true, a coat that does not
	// open with its session's key or a body that does not parse, the
	// inputs that crash the reference's service loop (§13).
	Err error
}

// BundledMessage is one message of a bundle packet. Body, MessageID and
// Err are as a lone message's Packet would have them, once the bundle's
// payload is opened (a plain coat, or a sealed one with its key-log
// session); else HasBody is false and the packet's BodyNote says why.
type BundledMessage struct {
	TI        uint32
	Flags     codec.Flags
	Len       int // its coat plaintext's length
	Note      Note
	Body      packet.OrderedMap
	HasBody   bool
	MessageID *packet.MsgID
	Bus       *BusInfo // the bus envelope its body is, if it is one
	Err       error    // its body does not decode
}

// Dissector decodes captured frames into Packets: the link layers, the RAET
// head (through the RAET layer and the generated codecs), the foot
// (verified with keep keys), the coat (opened with key-log sessions), the
// body, and the packet's place in its transaction. It is not safe for
// concurrent use.
type Dissector struct {
	keys    *KeyRing
	link    *LinkDecoder
	tracker *Tracker
	stats   *Stats
	cache   sessionCache
	layer   RAET
	lane    Lane
	books   laneBooks
	bus     busRequests
	seed    maphash.Seed
	noKeys  *KeyRing // learns keys from the capture when Keys is nil
	bodies  *packet.Registry
	n       int
	opened  bool                 // the packet being decoded had an AEAD coat, opened
	gso     [][]byte             // the packets of the last frame's super-datagram not yet decoded
	gsoFrom Packet               // the first of them, for the others' record fields
	gsoHead codec.Head           // scratch of splitGSO
	bundle  packet.Bundle        // reused for each bundle's table
	answers []packet.AnswerRange // reused for each answers list
}

// NewDissector returns a Dissector configured by cfg (nil for defaults).
func NewDissector(cfg *Config) *Dissector {
	if cfg == nil {
		cfg = &Config{}
	}
	d := &Dissector{keys: cfg.Keys, link: NewLinkDecoder(cfg.Ports...), stats: NewStats(), seed: maphash.MakeSeed(), noKeys: NewKeyRing(), bodies: cfg.Serializers}
	d.link.Heuristic = !cfg.NoHeuristic
	d.tracker = NewTracker(&cfg.Tracker, d.stats)
	d.tracker.OnClose = cfg.OnClose
	return d
}

// Stats returns the counts so far; call Flush first for the final ones.
func (d *Dissector) Stats() *Stats {
	d.stats.nameKinds()
	return d.stats
}

// Flush ends the capture: transactions still running are Incomplete, and
// all are counted in Stats.
func (d *Dissector) Flush() { d.tracker.Flush() }

// SetCaptureError records why reading stopped early, for the summary.
func (d *Dissector) SetCaptureError(err error) {
	d.stats.CaptureError = err.Error()
	d.stats.addFailure(reason(err))
}

// CountDuplicate counts a frame suppressed as a loopback duplicate.
func (d *Dissector) CountDuplicate() { d.stats.Records++; d.n++; d.stats.Duplicates++ }

// Decode dissects one captured frame. It returns nil for a frame that is not
// RAET (counted in Stats.Other and Stats.Fragments). For a UDP GSO
// super-datagram it returns the first packet; Next gives the others.
func (d *Dissector) Decode(rec Record) *Packet {
	p := new(Packet)
	if !d.DecodeInto(rec, p) {
		return nil
	}
	return p
}

// DecodeInto is Decode into a caller's Packet, which it resets; it reports
// false for a frame that is not RAET.
func (d *Dissector) DecodeInto(rec Record, p *Packet) bool {
	d.gso = d.gso[:0]
	d.n++
	st := d.stats
	st.Records++
	if st.First.IsZero() || rec.Time.Before(st.First) {
		st.First = rec.Time
	}
	if rec.Time.After(st.Last) {
		st.Last = rec.Time
	}
	f := d.link.Decode(rec.LinkType, rec.Data, rec.Length)
	switch f.Kind {
	case FrameOther:
		st.Other++
		return false
	case FrameFragment:
		st.Fragments++
		return false
	}
	*p = Packet{N: d.n, Time: rec.Time, LinkType: rec.LinkType, Src: f.Src, Dst: f.Dst, SrcPath: f.SrcPath, DstPath: f.DstPath,
		Data: f.Payload, Truncated: f.Truncated, Lane: f.Kind == FrameLane}
	switch f.Kind {
	case FrameBad:
		p.Data = rec.Data
		p.Err = f.Err
		if f.Truncated {
			p.Err = fmt.Errorf("frame truncated by the capture: %w", f.Err)
		}
		st.addFailure(reason(p.Err))
	case FrameLane:
		d.decodeLane(p)
	default:
		if d.splitGSO(p.Data) {
			p.Data, p.GSO = d.gso[0], 1
			d.gso = d.gso[1:]
			d.gsoFrom = *p
			d.stats.GSO++
		}
		d.decodeRoad(p)
	}
	return true
}

// Next decodes into p the next packet of the frame DecodeInto (or Decode)
// read last, when that frame was a UDP GSO super-datagram (Packet.GSO):
// call it until it reports false. Each packet is counted, tracked and
// shown as if it had been captured alone, with the frame's N and Time.
func (d *Dissector) Next(p *Packet) bool {
	if len(d.gso) == 0 {
		return false
	}
	f := &d.gsoFrom
	*p = Packet{N: f.N, Time: f.Time, LinkType: f.LinkType, Src: f.Src, Dst: f.Dst, Data: d.gso[0], GSO: f.GSO + 1}
	f.GSO++
	d.gso = d.gso[1:]
	d.decodeRoad(p)
	return true
}

// splitGSO reports whether the UDP payload b is a GSO super-datagram,
// several packets sent as one (UDP_SEGMENT), and if so puts them in
// d.gso. The kernel cuts such a payload into pieces of one size, the last
// one no longer; so it is one when its first head says a packet length
// shorter than b, and every piece after it starts with a head whose packet
// length is that size, or, for the last, the rest. Anything else is left
// whole, to be refused as it is.
func (d *Dissector) splitGSO(b []byte) bool {
	d.gso = d.gso[:0]
	size := d.packetLength(b)
	if size <= 0 || size >= len(b) {
		return false
	}
	for rest := b; len(rest) > 0; {
		n := d.packetLength(rest)
		if n <= 0 || n > len(rest) || (n != size && n != len(rest)) || n > size {
			d.gso = d.gso[:0]
			return false
		}
		d.gso = append(d.gso, rest[:n:n])
		rest = rest[n:]
	}
	return true
}

// packetLength is the packet length the head at the start of b declares,
// when the head decodes but for that length: len(b) when it decodes whole,
// -1 when it does not decode.
func (d *Dissector) packetLength(b []byte) int {
	c, err := codec.Detect(b)
	if err != nil {
		return -1
	}
	_, err = c.Decode(b, &d.gsoHead)
	switch {
	case err == nil:
		return len(b)
	case errors.Is(err, codec.ErrPacketLength):
		return int(d.gsoHead.PacketLength)
	}
	return -1
}

var errCaptureTruncated = errors.New("truncated by the capture (snap length)")

func (d *Dissector) decodeRoad(p *Packet) {
	st := d.stats
	err := d.layer.DecodeFromBytes(p.Data, nil)
	l := &d.layer
	if p.HeadOK = HeadDecoded(err); p.HeadOK {
		p.Head = l.Head
	}
	if err != nil {
		var ce *codec.Error
		if errors.As(err, &ce) {
			err = ce // the packet layer's wrapping adds nothing
		}
		if p.Truncated {
			err = fmt.Errorf("%w: %d bytes captured: %w", errCaptureTruncated, len(p.Data), err)
		}
		p.Err = err
		st.addFailure(reason(err))
		return
	}
	h := &p.Head
	p.Parsed = true
	p.CoatLen, p.FootLen = len(l.Coat), len(l.Foot)
	p.HeadLen = len(p.Data) - p.CoatLen - p.FootLen
	st.Road++
	st.kinds[[2]uint8{uint8(h.TransactionKind), uint8(h.PacketKind)}]++
	st.HeadKinds[h.HeadKind.String()]++

	flow := makeFlowKey(p.Src, p.Dst, h.SessionID)
	vr := d.keys.footVerify(&d.cache, flow, &l.Packet)
	p.Verified, p.Signer, p.VerifyNote = vr.verified, vr.who, vr.note
	// An AEAD coat is opened first, whole packet by packet (each segment
	// is sealed on its own): what follows reads its plain text as a
	// plain coat's.
	coat := l.Coat
	d.opened = false
	if h.FootKind == codec.FootKindNada && packet.IsAEAD(h.CoatKind) {
		if coat, d.opened = d.openAEAD(p, flow, &l.Packet); p.Err != nil {
			return
		}
	}
	switch {
	case h.FootKind == codec.FootKindNada && packet.IsAEAD(h.CoatKind):
		st.AEAD++
	case h.FootKind == codec.FootKindNada:
		st.Unsigned++
	case vr.verified == nil:
		st.VerifyUnknown++
	case *vr.verified:
		st.Verified++
	default:
		st.VerifyFailed++
	}

	// Reassemble only what can be read: plain coats, or sealed ones with a
	// key log.
	readable := d.opened || h.CoatKind == codec.CoatKindNada || (h.CoatKind == codec.CoatKindNaCl && d.keys != nil && len(d.keys.sessions) > 0)
	if h.TransactionKind == codec.TransactionKindMessage && (h.PacketKind == codec.PacketKindBundle || h.PacketKind == codec.PacketKindAnswers) {
		if packet.IsAEAD(h.CoatKind) && !d.opened {
			p.BodyNote = sealedNote(h.CoatKind)
			st.Sealed++
			return
		}
		d.decodeBundle(p, flow, coat)
		return
	}
	note, whole := d.tracker.Observe(p.Time, p.Src, p.Dst, h, coat, p.Data, d.seed, readable)
	p.Note, p.HasNote = note, true
	if note.Err != nil {
		p.Err = fmt.Errorf("segment: %w", note.Err)
		st.addFailure("segment refused by the reassembly: " + segmentReason(note.Err))
		return
	}

	segmented := h.Segment() || h.SegmentCount > 1
	switch {
	case segmented && whole == nil:
		switch {
		case !readable && note.Completes:
			p.BodyNote = sealedNote(h.CoatKind)
			d.stats.Sealed++
		default:
			p.BodyNote = "segment (the body is shown when the message completes)"
		}
		return
	case segmented:
		coat = whole
	}
	plain, ok := d.openCoat(p, flow, coat)
	if !ok {
		return
	}
	if h.TransactionKind == codec.TransactionKindAllow && h.BodyKind == codec.BodyKindRaw {
		p.Body, p.BodyNote = d.allowBody(note.Txn, h.PacketKind, plain)
		p.HasBody = p.BodyNote == ""
		st.Opened++
		return
	}
	if h.TransactionKind == codec.TransactionKindMessage && h.PacketKind == codec.PacketKindMessage {
		if plain, ok = d.splitMessageID(p, h.BodyKind, plain); !ok {
			return
		}
	}
	d.decodeBody(p, h.BodyKind, plain)
	if !p.HasBody {
		return
	}
	switch {
	case h.TransactionKind == codec.TransactionKindJoin:
		d.learnJoin(p.Body)
	case h.PacketKind == codec.PacketKindResend && note.Txn != nil:
		if v, ok := p.Body.Get("misseds"); ok {
			if list, ok := v.([]any); ok {
				d.tracker.NoteRequested(note.Txn, len(list))
				p.Note.Event += fmt.Sprintf(": %d segments asked for", len(list))
			}
		}
	}
}

// openCoat returns the body bytes inside coat, or false with p.BodyNote
// set.
func (d *Dissector) openCoat(p *Packet, flow flowKey, coat []byte) ([]byte, bool) {
	switch p.Head.CoatKind {
	case codec.CoatKindNada:
		return coat, true
	case codec.CoatKindNaCl:
		if len(coat) == 0 {
			return nil, true
		}
		if d.keys == nil || len(d.keys.sessions) == 0 {
			p.BodyNote = "sealed: no key log given"
			d.stats.Sealed++
			return nil, false
		}
		known, _ := d.cache.get(flow)
		plain, _, ok := d.keys.openCoat(&d.cache, flow, coat)
		if !ok {
			if known != nil {
				p.Err = errors.New("coat: does not open with the key of its session (corrupt, forged or replayed)")
				d.stats.addFailure("coat does not open with its session's key")
				return nil, false
			}
			p.BodyNote = "sealed: no key-log session opens it"
			d.stats.Sealed++
			return nil, false
		}
		return plain, true
	case codec.CoatKindAES256GCM, codec.CoatKindChaCha20Poly1305:
		if d.opened { // decodeRoad opened it: coat is the plain text
			return coat, true
		}
		p.BodyNote = sealedNote(p.Head.CoatKind)
		d.stats.Sealed++
		return nil, false
	}
	p.BodyNote = "coat kind " + p.Head.CoatKind.String() + " cannot be opened"
	d.stats.addError(p.BodyNote)
	return nil, false
}

// openAEAD opens the AEAD coat of pkt (p's) with the key log: the plain
// text and true, with p's foot marked verified (the coat authenticates
// head and body); or false, with p.BodyNote set when no session has the
// key, or p.Err when the session that opened the direction before does
// not open it (a forgery, a corruption or a replay).
func (d *Dissector) openAEAD(p *Packet, flow flowKey, pkt *packet.Packet) ([]byte, bool) {
	if d.keys == nil || len(d.keys.sessions) == 0 {
		return nil, false
	}
	plain, s, known, err := d.keys.openAEAD(&d.cache, flow, p.Src, pkt)
	switch {
	case s != nil:
		p.Verified, p.Signer = &trueVal, "session "+s.e.OurShortPub.Hex()[:8]
		p.VerifyNote = ""
		d.stats.AEADOpened++
		return plain, true
	case known:
		p.Err = fmt.Errorf("coat: does not open with the key of its session: %w", err)
		d.stats.addFailure("AEAD coat does not open with its session's key")
	}
	return nil, false
}

// sealedNote says why a sealed coat of kind ck is not shown.
func sealedNote(ck codec.CoatKind) string {
	if packet.IsAEAD(ck) {
		return fmt.Sprintf("sealed: %s coat (ck %d), which no key-log session opens", ck, uint8(ck))
	}
	return "sealed: no key log given"
}

// bundleBodies opens the payload of the bundle in d.bundle (p's) and
// decodes each message into p.Bundle, as a lone message's body.
func (d *Dissector) bundleBodies(p *Packet, flow flowKey) {
	total := 0
	for _, e := range d.bundle.Entries {
		total += e.Len
	}
	if total == 0 && len(d.bundle.Sealed) == 0 {
		return // no bodies at all
	}
	plain, ok := d.openCoat(p, flow, d.bundle.Sealed)
	if !ok {
		return
	}
	if len(plain) != total {
		p.Err = fmt.Errorf("bundle: %d payload bytes for %d in its table", len(plain), total)
		d.stats.addFailure("bundle payload does not match its table")
		return
	}
	for i := range p.Bundle {
		m := &p.Bundle[i]
		ep := Packet{N: p.N, Time: p.Time, Src: p.Src, Dst: p.Dst}
		bk := d.bundle.Entries[i].BodyKind
		body, ok := d.splitMessageID(&ep, bk, plain[:m.Len:m.Len])
		if ok {
			d.decodeBody(&ep, bk, body)
		}
		plain = plain[m.Len:]
		m.Body, m.HasBody, m.MessageID, m.Bus, m.Err = ep.Body, ep.HasBody, ep.MessageID, ep.Bus, ep.Err
	}
}

// splitMessageID takes the message id envelope off the front of a message's
// plain coat into p.MessageID. A mapping body (json, msgpack, cbor) never
// begins with the envelope's first byte, 0 or 1, so the envelope is known
// without the join that negotiated it; a raw body is left as it is.
func (d *Dissector) splitMessageID(p *Packet, bk codec.BodyKind, plain []byte) ([]byte, bool) {
	switch bk {
	case codec.BodyKindJSON, codec.BodyKindMsgpack, codec.BodyKindCBOR:
	default:
		return plain, true
	}
	if len(plain) == 0 || plain[0] > 1 {
		return plain, true
	}
	id, body, err := packet.SplitMessageID(plain)
	if err != nil {
		p.Err = fmt.Errorf("body: %w", err)
		d.stats.addFailure("message id envelope does not decode")
		return nil, false
	}
	p.MessageID = &id
	return body, true
}

// decodeBody decodes plain by body kind into p.Body.
func (d *Dissector) decodeBody(p *Packet, bk codec.BodyKind, plain []byte) {
	switch bk {
	case codec.BodyKindNada:
		if len(plain) > 0 {
			p.BodyNote = fmt.Sprintf("body kind nada with %d bytes", len(plain))
			d.stats.addError("body kind nada with bytes")
		}
		d.stats.Opened++
		return
	case codec.BodyKindRaw:
		p.Body, p.HasBody = packet.OrderedMap{kv("raw", hexs(plain))}, true
		d.stats.Opened++
		return
	}
	ser, err := d.bodies.Lookup(bk)
	if err != nil {
		p.BodyNote = "body kind " + bk.String() + " unknown"
		d.stats.addError("unknown body kind")
		return
	}
	var m packet.OrderedMap
	if err := ser.Unmarshal(plain, &m); err != nil {
		p.Err = fmt.Errorf("body: %w", err)
		d.stats.addFailure("body does not decode (" + bk.String() + ")")
		return
	}
	if m == nil {
		m = packet.OrderedMap{}
	}
	p.Body, p.HasBody = m, true
	d.stats.Opened++
	d.decodeBus(p)
}

// learnJoin keeps the long-term public key of a join request or response
// body, to open allow boxes later.
func (d *Dissector) learnJoin(body packet.OrderedMap) {
	if d.keys == nil {
		return
	}
	name, _ := body.Get("name")
	pub, _ := body.Get("pubhex")
	n, _ := name.(string)
	if s, ok := pub.(string); ok {
		d.keys.learnLongPub(n, s)
	}
}

func segmentReason(err error) string {
	for _, e := range []error{packet.ErrSegment, packet.ErrMessageTooLarge, packet.ErrRemoteQuota, packet.ErrTooManyMessages, packet.ErrReassemblyMemory} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return "other"
}

// reason is the category of an error for the summary: the cause without
// the details that vary from packet to packet.
func reason(err error) string {
	var ce *codec.Error
	var le *codeclane.Error
	var ce2 *CaptureError
	switch {
	case errors.Is(err, errCaptureTruncated):
		return errCaptureTruncated.Error()
	case errors.As(err, &ce):
		if ce.Field != "" {
			return fmt.Sprintf("head: %v (%s)", ce.Err, ce.Field)
		}
		return "head: " + ce.Err.Error()
	case errors.As(err, &le):
		if le.Field != "" {
			return fmt.Sprintf("lane head: %v (%s)", le.Err, le.Field)
		}
		return "lane head: " + le.Err.Error()
	case errors.As(err, &ce2):
		return "capture: " + ce2.Err.Error()
	case errors.Is(err, ErrLaneRecord):
		return ErrLaneRecord.Error()
	case errors.Is(err, errUnknownLink):
		return errUnknownLink.Error()
	case errors.Is(err, errRawVersion):
		return errRawVersion.Error()
	}
	for _, e := range []error{packet.ErrUnknownFoot, packet.ErrFootKind, packet.ErrPacketTooShort} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	s := err.Error()
	if i := strings.IndexAny(s, ":0123456789"); i > 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

// decodeBundle reads a bundle's table, or an answers packet's list, and
// has the tracker count each message, done and ack as its transaction's;
// it opens the bundle's payload, when it can, and decodes each message.
func (d *Dissector) decodeBundle(p *Packet, flow flowKey, coat []byte) {
	h := &p.Head
	answers := coat
	p.HasNote = true
	if h.PacketKind == codec.PacketKindBundle {
		if err := packet.ParseBundle(coat, &d.bundle); err != nil {
			p.Err = err
			d.stats.addFailure("malformed bundle")
			return
		}
		for i := range d.bundle.Entries {
			e := &d.bundle.Entries[i]
			note := d.tracker.ObserveEntry(p.Time, p.Src, p.Dst, h, e, d.seed)
			p.Bundle = append(p.Bundle, BundledMessage{TI: e.TI, Flags: e.Flags, Len: e.Len, Note: note})
		}
		p.Note.Event = fmt.Sprintf("bundle of %d messages", len(p.Bundle))
		d.bundleBodies(p, flow)
		answers = d.bundle.Answers
		if len(answers) == 0 {
			return
		}
	}
	rs, err := packet.ParseAnswers(d.answers[:0], answers)
	if err != nil {
		p.Err = err
		d.stats.addFailure("malformed answers")
		return
	}
	d.answers = rs
	ids := 0
	for _, r := range rs {
		for i := range r.Count {
			p.Answered = append(p.Answered, d.tracker.ObserveAnswer(p.Time, p.Src, p.Dst, h, r.Kind, r.First+i, d.seed))
		}
		ids += int(r.Count)
	}
	p.Answers = append(p.Answers, rs...)
	if h.PacketKind == codec.PacketKindAnswers {
		p.Note.Event = fmt.Sprintf("answers for %d transactions", ids)
	} else {
		p.Note.Event += fmt.Sprintf(", answers for %d transactions", ids)
	}
}
