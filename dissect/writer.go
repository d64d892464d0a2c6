package dissect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"
)

// Link types (LINKTYPE_ values of pcap and pcapng) that raetdump reads.
const (
	LinkTypeNull      = 0   // BSD loopback: a 4-byte address family in host order
	LinkTypeEthernet  = 1   // Ethernet, with or without 802.1Q tags
	LinkTypeRaw       = 101 // raw IPv4 or IPv6
	LinkTypeLoop      = 108 // OpenBSD loopback: the family in network order
	LinkTypeLinuxSLL  = 113 // Linux cooked capture v1 ("any" device)
	LinkTypeLane      = 147 // LINKTYPE_USER0: raet-go's lane records (see PcapngWriter)
	LinkTypeIPv4      = 228
	LinkTypeIPv6      = 229
	LinkTypeLinuxSLL2 = 276 // Linux cooked capture v2
)

// The lane record: the frame of a lane page in a capture, link type
// LinkTypeLane (LINKTYPE_USER0, which the generated Wireshark dissector
// claims). Integers are big endian.
//
//	offset  size  field
//	     0     4  magic "RLAN"
//	     4     1  version, 1
//	     5     1  flags: 0x01 the page was sent by the yard that captured it
//	     6     2  S, the length of the source socket path
//	     8     2  D, the length of the destination socket path
//	    10     S  source socket path (<dir>/<lane>.<yard>.uxd)
//	  10+S     D  destination socket path
//	10+S+D     …  the page: head and body
const (
	laneMagic      = "RLAN"
	laneVersion    = 1
	laneRecordHead = 10
	laneFlagOut    = 0x01
)

// RoadPacket is one road datagram seen by a road stack. It has the fields
// of road.TapPacket, which converts to it (dissect does not depend on the
// road stack):
//
//	cfg.Tap = func(p road.TapPacket) { pw.Tap(dissect.RoadPacket(p)) }
type RoadPacket struct {
	Out    bool // sent by us
	Local  netip.AddrPort
	Remote netip.AddrPort
	Time   time.Time
	Data   []byte
}

// LanePacket is one lane page seen by a lane stack, the lane counterpart of
// RoadPacket: Local and Remote are socket paths.
type LanePacket struct {
	Out    bool // sent by us
	Local  string
	Remote string
	Time   time.Time
	Data   []byte
}

// WriterOptions configures a PcapngWriter. The zero value is fine.
type WriterOptions struct {
	// Application is written to the section header (shb_userappl).
	// Default "raet-go".
	Application string
	// Comment is written to the section header when set.
	Comment string
}

// PcapngWriter writes a pcapng capture: road datagrams as raw IP/UDP frames
// (LINKTYPE_RAW, with IPv4 or IPv6 and UDP headers made up from the
// addresses, checksums included), lane pages as lane records
// (LinkTypeLane), and any other frame with its own link type. Each frame
// carries its direction (epb_flags) when known. Every block is one Write to
// the underlying writer, so the file can be read while it grows.
//
// Its methods are safe for concurrent use: Tap can serve a road.Config.Tap,
// which the stack calls from its socket goroutines:
//
//	f, _ := os.Create("road.pcapng")
//	pw, _ := dissect.NewPcapngWriter(f, nil)
//	cfg.Tap = func(p road.TapPacket) { pw.Tap(dissect.RoadPacket(p)) }
//	...
//	stack.Close(); pw.Err(); f.Close()
type PcapngWriter struct {
	mu     sync.Mutex
	w      io.Writer
	ifaces map[int]uint32 // link type -> interface id
	nextIf uint32
	ipID   uint16
	buf    []byte
	err    error
}

// NewPcapngWriter writes the section header to w and returns the writer.
func NewPcapngWriter(w io.Writer, opts *WriterOptions) (*PcapngWriter, error) {
	if opts == nil {
		opts = &WriterOptions{}
	}
	app := opts.Application
	if app == "" {
		app = "raet-go"
	}
	pw := &PcapngWriter{w: w, ifaces: map[int]uint32{}}
	b := pw.buf[:0]
	b = le32(b, ngSHB)
	b = le32(b, 0) // length, patched
	b = le32(b, ngByteOrderMagic)
	b = le16(b, 1)
	b = le16(b, 0)
	b = append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff) // section length unknown
	if opts.Comment != "" {
		b = ngOption(b, 1, []byte(opts.Comment))
	}
	b = ngOption(b, 4, []byte(app)) // shb_userappl
	b = ngEndBlock(b, 0)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	pw.buf = b
	return pw, nil
}

func le16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func le32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

// ngOption appends one option, padded to 4 bytes.
func ngOption(b []byte, code uint16, v []byte) []byte {
	b = le16(b, code)
	b = le16(b, uint16(len(v)))
	b = append(b, v...)
	for i := len(v); i%4 != 0; i++ {
		b = append(b, 0)
	}
	return b
}

// ngEndBlock appends the end of options and the trailing length, and
// patches the length at start+4.
func ngEndBlock(b []byte, start int) []byte {
	b = le32(b, 0) // opt_endofopt
	n := uint32(len(b) - start + 4)
	b = le32(b, n)
	binary.LittleEndian.PutUint32(b[start+4:], n)
	return b
}

// iface returns the interface id for a link type, writing its description
// block first when it is new. Called with mu held.
func (pw *PcapngWriter) iface(link int) (uint32, error) {
	if id, ok := pw.ifaces[link]; ok {
		return id, nil
	}
	if link < 0 || link > 0xffff {
		return 0, fmt.Errorf("raet: pcapng: link type %d", link)
	}
	name, desc := fmt.Sprintf("link%d", link), ""
	switch link {
	case LinkTypeRaw:
		name, desc = "raet-road", "RAET road datagrams seen by a stack (raw IP/UDP)"
	case LinkTypeLane:
		name, desc = "raet-lane", "RAET lane pages seen by a stack (raet-go lane records)"
	}
	b := pw.buf[:0]
	b = le32(b, ngIDB)
	b = le32(b, 0)
	b = le16(b, uint16(link))
	b = le16(b, 0)
	b = le32(b, 0) // snaplen: unlimited
	b = ngOption(b, 2, []byte(name))
	if desc != "" {
		b = ngOption(b, 3, []byte(desc))
	}
	b = ngOption(b, 9, []byte{9}) // if_tsresol: nanoseconds
	b = ngEndBlock(b, 0)
	pw.buf = b
	if _, err := pw.w.Write(b); err != nil {
		return 0, err
	}
	id := pw.nextIf
	pw.nextIf++
	pw.ifaces[link] = id
	return id, nil
}

// Direction of a frame, for epb_flags.
const (
	dirUnknown = 0
	dirIn      = 1
	dirOut     = 2
)

// writeEPB writes one enhanced packet block of frame = head || data.
// Called with mu held.
func (pw *PcapngWriter) writeEPB(link int, t time.Time, head, data []byte, wireLen int, dir uint32) error {
	if pw.err != nil {
		return pw.err
	}
	id, err := pw.iface(link)
	if err != nil {
		pw.err = err
		return err
	}
	caplen := len(head) + len(data)
	ts := uint64(t.UnixNano())
	b := pw.buf[:0]
	b = le32(b, ngEPB)
	b = le32(b, 0)
	b = le32(b, id)
	b = le32(b, uint32(ts>>32))
	b = le32(b, uint32(ts))
	b = le32(b, uint32(caplen))
	b = le32(b, uint32(max(wireLen, caplen)))
	b = append(b, head...)
	b = append(b, data...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	if dir != dirUnknown {
		b = ngOption(b, 2, binary.LittleEndian.AppendUint32(nil, dir)) // epb_flags
	}
	b = ngEndBlock(b, 0)
	pw.buf = b
	if _, err := pw.w.Write(b); err != nil {
		pw.err = err
		return err
	}
	return nil
}

// Tap writes one datagram a road stack saw (see RoadPacket). It cannot
// return an error: the first one is kept, further frames are dropped, and
// Err reports it.
func (pw *PcapngWriter) Tap(p RoadPacket) {
	src, dst, dir := p.Remote, p.Local, uint32(dirIn)
	if p.Out {
		src, dst, dir = p.Local, p.Remote, dirOut
	}
	_ = pw.writeRoad(p.Time, src, dst, p.Data, dir)
}

// WriteRoad writes one road datagram from src to dst.
func (pw *PcapngWriter) WriteRoad(t time.Time, src, dst netip.AddrPort, data []byte) error {
	return pw.writeRoad(t, src, dst, data, dirUnknown)
}

// ErrTooLarge is a datagram too large for a UDP frame.
var ErrTooLarge = errors.New("raet: pcapng: datagram too large for UDP")

func (pw *PcapngWriter) writeRoad(t time.Time, src, dst netip.AddrPort, data []byte, dir uint32) error {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if len(data) > 65535-48 {
		if pw.err == nil {
			pw.err = ErrTooLarge
		}
		return ErrTooLarge
	}
	var hdr [48]byte
	pw.ipID++
	h := udpFrameHeader(hdr[:0], src, dst, data, pw.ipID)
	return pw.writeEPB(LinkTypeRaw, t, h, data, 0, dir)
}

// TapLane writes one lane page a lane stack saw; like Tap, it keeps the
// first error for Err.
func (pw *PcapngWriter) TapLane(p LanePacket) {
	src, dst := p.Remote, p.Local
	if p.Out {
		src, dst = p.Local, p.Remote
	}
	_ = pw.writeLane(p.Time, src, dst, p.Out, p.Data)
}

// WriteLane writes one lane page sent from the socket src to the socket
// dst; out tells that the capturing yard sent it.
func (pw *PcapngWriter) WriteLane(t time.Time, src, dst string, out bool, page []byte) error {
	return pw.writeLane(t, src, dst, out, page)
}

func (pw *PcapngWriter) writeLane(t time.Time, src, dst string, out bool, page []byte) error {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if len(src) > 0xffff || len(dst) > 0xffff {
		err := fmt.Errorf("raet: pcapng: lane socket path too long")
		if pw.err == nil {
			pw.err = err
		}
		return err
	}
	head := make([]byte, 0, laneRecordHead+len(src)+len(dst))
	head = append(head, laneMagic...)
	var flags byte
	dir := uint32(dirIn)
	if out {
		flags, dir = laneFlagOut, dirOut
	}
	head = append(head, laneVersion, flags)
	head = binary.BigEndian.AppendUint16(head, uint16(len(src)))
	head = binary.BigEndian.AppendUint16(head, uint16(len(dst)))
	head = append(head, src...)
	head = append(head, dst...)
	return pw.writeEPB(LinkTypeLane, t, head, page, 0, dir)
}

// WriteRecord writes a captured frame as it is, with its link type (raetdump
// -w).
func (pw *PcapngWriter) WriteRecord(rec Record) error {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.writeEPB(rec.LinkType, rec.Time, nil, rec.Data, rec.Length, dirUnknown)
}

// Err returns the first error met while writing.
func (pw *PcapngWriter) Err() error {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.err
}

// udpFrameHeader appends an IPv4 (both addresses IPv4) or IPv6 header and
// a UDP header for data from src to dst.
func udpFrameHeader(b []byte, src, dst netip.AddrPort, data []byte, id uint16) []byte {
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	udpLen := 8 + len(data)
	var sum uint32
	if sa.Is4() && da.Is4() {
		s4, d4 := sa.As4(), da.As4()
		ip := []byte{0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
		binary.BigEndian.PutUint16(ip[4:], id)
		ip = append(ip, s4[:]...)
		ip = append(ip, d4[:]...)
		binary.BigEndian.PutUint16(ip[10:], ^fold(onesSum(0, ip)))
		b = append(b, ip...)
		sum = onesSum(0, s4[:])
		sum = onesSum(sum, d4[:])
	} else {
		s16, d16 := src.Addr().As16(), dst.Addr().As16()
		ip := []byte{0x60, 0, 0, 0, 0, 0, 17, 64}
		binary.BigEndian.PutUint16(ip[4:], uint16(udpLen))
		ip = append(ip, s16[:]...)
		ip = append(ip, d16[:]...)
		b = append(b, ip...)
		sum = onesSum(0, s16[:])
		sum = onesSum(sum, d16[:])
	}
	udp := make([]byte, 8)
	binary.BigEndian.PutUint16(udp[0:], src.Port())
	binary.BigEndian.PutUint16(udp[2:], dst.Port())
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	sum += 17 + uint32(udpLen)
	sum = onesSum(sum, udp)
	sum = onesSum(sum, data)
	c := ^fold(sum)
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(udp[6:], c)
	return append(b, udp...)
}

// onesSum adds b to the ones'-complement sum s, as 16-bit big-endian words.
func onesSum(s uint32, b []byte) uint32 {
	for len(b) >= 2 {
		s += uint32(b[0])<<8 | uint32(b[1])
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}
