package dissect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// FrameKind classifies a captured frame.
type FrameKind uint8

// The kinds of frames.
const (
	FrameOther    FrameKind = iota // not RAET: another protocol or another port
	FrameRoad                      // a UDP datagram to or from a RAET port
	FrameLane                      // a lane record
	FrameFragment                  // an IP fragment; fragments are not reassembled
	FrameBad                       // the link, IP or UDP layer is broken (Err says why)
)

// Frame is a captured frame with its link, IP and UDP layers (or its lane
// record) taken off.
type Frame struct {
	Kind             FrameKind
	Src, Dst         netip.AddrPort // road
	SrcPath, DstPath string         // lane: socket paths
	Out              bool           // lane: sent by the capturing yard
	Payload          []byte         // the UDP payload or the lane page
	Truncated        bool           // the capture holds less than the frame had
	Err              error          // FrameBad: why
}

// Ports is a set of UDP ports.
type Ports [65536 / 64]uint64

// Add adds port p.
func (s *Ports) Add(p uint16) { s[p/64] |= 1 << (p % 64) }

// Has reports whether p is in the set.
func (s *Ports) Has(p uint16) bool { return s[p/64]&(1<<(p%64)) != 0 }

// LinkDecoder takes the link, IP and UDP layers off captured frames with
// gopacket's decoding layers (no allocation per frame), and picks the UDP
// datagrams to or from RAET ports. It understands Ethernet (with 802.1Q),
// BSD and OpenBSD loopback, Linux cooked captures v1 and v2 (SLL2 is
// decoded here: gopacket 1.1.19 has no layer for it), raw IPv4/IPv6 and
// lane records. A LinkDecoder is not safe for concurrent use.
type LinkDecoder struct {
	ports Ports
	// Heuristic, when set, also takes as RAET the UDP datagrams on other
	// ports that start like a RAET head (see LooksLikeRAET).
	Heuristic bool
	eth       layers.Ethernet
	dot1q     layers.Dot1Q
	lo        layers.Loopback
	sll       layers.LinuxSLL
	ip4       layers.IPv4
	ip6       layers.IPv6
	udp       layers.UDP
	parsers   map[gopacket.LayerType]*gopacket.DecodingLayerParser
	decoded   []gopacket.LayerType
}

// NewLinkDecoder returns a decoder that takes UDP datagrams to or from
// ports as RAET; none means DefaultPort.
func NewLinkDecoder(ports ...uint16) *LinkDecoder {
	d := &LinkDecoder{parsers: map[gopacket.LayerType]*gopacket.DecodingLayerParser{}}
	if len(ports) == 0 {
		ports = []uint16{DefaultPort}
	}
	for _, p := range ports {
		d.ports.Add(p)
	}
	for _, first := range []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeLoopback,
		layers.LayerTypeLinuxSLL, layers.LayerTypeIPv4, layers.LayerTypeIPv6} {
		p := gopacket.NewDecodingLayerParser(first, &d.eth, &d.dot1q, &d.lo, &d.sll, &d.ip4, &d.ip6, &d.udp)
		p.IgnoreUnsupported = true
		d.parsers[first] = p
	}
	return d
}

var (
	errUnknownLink = errors.New("unsupported link type")
	errShortLink   = errors.New("frame shorter than its link header")
	errRawVersion  = errors.New("raw IP frame of an unknown IP version")
)

// Decode takes the layers off one frame of link type link; wireLen is the
// frame's length on the wire.
func (d *LinkDecoder) Decode(link int, data []byte, wireLen int) Frame {
	var f Frame
	f.Truncated = wireLen > len(data)
	var first gopacket.LayerType
	switch link {
	case LinkTypeLane:
		return decodeLaneRecordFrame(data, f.Truncated)
	case LinkTypeEthernet:
		first = layers.LayerTypeEthernet
	case LinkTypeNull, LinkTypeLoop:
		first = layers.LayerTypeLoopback
	case LinkTypeLinuxSLL:
		first = layers.LayerTypeLinuxSLL
	case LinkTypeLinuxSLL2:
		if len(data) < 20 {
			return Frame{Kind: FrameBad, Err: errShortLink, Truncated: f.Truncated}
		}
		switch layers.EthernetType(binary.BigEndian.Uint16(data[0:2])) {
		case layers.EthernetTypeIPv4:
			first = layers.LayerTypeIPv4
		case layers.EthernetTypeIPv6:
			first = layers.LayerTypeIPv6
		default:
			return Frame{Kind: FrameOther, Truncated: f.Truncated}
		}
		data = data[20:]
	case LinkTypeRaw, 12, 14, LinkTypeIPv4, LinkTypeIPv6:
		if len(data) == 0 {
			return Frame{Kind: FrameBad, Err: errShortLink, Truncated: f.Truncated}
		}
		switch data[0] >> 4 {
		case 4:
			first = layers.LayerTypeIPv4
		case 6:
			first = layers.LayerTypeIPv6
		default:
			return Frame{Kind: FrameBad, Err: fmt.Errorf("%w: %d", errRawVersion, data[0]>>4), Truncated: f.Truncated}
		}
	default:
		return Frame{Kind: FrameBad, Err: fmt.Errorf("%w %d", errUnknownLink, link), Truncated: f.Truncated}
	}
	p := d.parsers[first]
	err := p.DecodeLayers(data, &d.decoded)
	f.Truncated = f.Truncated || p.Truncated
	var ipSeen, udpSeen bool
	var src, dst netip.Addr
	for _, t := range d.decoded {
		switch t {
		case layers.LayerTypeIPv4:
			ipSeen = true
			src, _ = netip.AddrFromSlice(d.ip4.SrcIP.To4())
			dst, _ = netip.AddrFromSlice(d.ip4.DstIP.To4())
		case layers.LayerTypeIPv6:
			ipSeen = true
			src, _ = netip.AddrFromSlice(d.ip6.SrcIP.To16())
			dst, _ = netip.AddrFromSlice(d.ip6.DstIP.To16())
		case layers.LayerTypeUDP:
			udpSeen = true
		}
	}
	if !udpSeen {
		switch {
		case err != nil:
			f.Kind, f.Err = FrameBad, err
		case ipSeen && d.ip4Fragment():
			f.Kind = FrameFragment
		default:
			f.Kind = FrameOther
		}
		return f
	}
	if err != nil {
		f.Kind, f.Err = FrameBad, err
		return f
	}
	sp, dp := uint16(d.udp.SrcPort), uint16(d.udp.DstPort)
	if !d.ports.Has(sp) && !d.ports.Has(dp) && !(d.Heuristic && LooksLikeRAET(d.udp.Payload)) {
		f.Kind = FrameOther
		return f
	}
	f.Kind = FrameRoad
	f.Src = netip.AddrPortFrom(src.Unmap(), sp)
	f.Dst = netip.AddrPortFrom(dst.Unmap(), dp)
	f.Payload = d.udp.Payload
	if int(d.udp.Length) > 8+len(f.Payload) {
		f.Truncated = true
	}
	return f
}

// LooksLikeRAET reports whether a UDP payload starts like a RAET road
// packet: the native prefix "ri RAET\n", the JSON prefix {"ri":"RAET",
// or the binary head's magic and version with a head length within a
// packet length within the payload (equal to it, or shorter: the first
// packet of a UDP GSO super-datagram, as a capture on lo sees it).
func LooksLikeRAET(b []byte) bool {
	switch {
	case len(b) >= 8 && string(b[:8]) == "ri RAET\n":
		// A lane page head starts the same way but goes on with "vn".
		return len(b) >= 11 && string(b[8:11]) == "pl "
	case len(b) >= 13 && string(b[:13]) == `{"ri":"RAET",`:
		return true
	case len(b) >= 7 && b[0] == 0xd2 && b[1] == 1:
		pl := int(binary.BigEndian.Uint16(b[2:4]))
		return pl >= 7 && pl <= len(b) && int(b[4]) <= pl
	}
	return false
}

// ip4Fragment reports whether the last decode stopped at an IPv4 fragment.
func (d *LinkDecoder) ip4Fragment() bool {
	for _, t := range d.decoded {
		if t == layers.LayerTypeIPv4 {
			return d.ip4.Flags&layers.IPv4MoreFragments != 0 || d.ip4.FragOffset != 0
		}
	}
	return false
}

// LaneRecord is the capture record of a lane page (see PcapngWriter) as a
// gopacket layer; its payload is the page.
type LaneRecord struct {
	layers.BaseLayer
	Out         bool
	Source      string
	Destination string
}

// LayerType returns LayerTypeLaneRecord.
func (r *LaneRecord) LayerType() gopacket.LayerType { return LayerTypeLaneRecord }

// CanDecode returns LayerTypeLaneRecord.
func (r *LaneRecord) CanDecode() gopacket.LayerClass { return LayerTypeLaneRecord }

// NextLayerType returns LayerTypeRAETLane.
func (r *LaneRecord) NextLayerType() gopacket.LayerType { return LayerTypeRAETLane }

// ErrLaneRecord is a lane record that does not follow the format.
var ErrLaneRecord = errors.New("not a lane record")

// DecodeFromBytes decodes the record header.
func (r *LaneRecord) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*r = LaneRecord{}
	if len(data) < laneRecordHead {
		if df != nil {
			df.SetTruncated()
		}
		return fmt.Errorf("%w: %d bytes", ErrLaneRecord, len(data))
	}
	if string(data[:4]) != laneMagic || data[4] != laneVersion {
		return fmt.Errorf("%w: magic %q version %d", ErrLaneRecord, data[:4], data[4])
	}
	s, d := int(binary.BigEndian.Uint16(data[6:])), int(binary.BigEndian.Uint16(data[8:]))
	if laneRecordHead+s+d > len(data) {
		if df != nil {
			df.SetTruncated()
		}
		return fmt.Errorf("%w: socket paths overrun the record", ErrLaneRecord)
	}
	r.Out = data[5]&laneFlagOut != 0
	r.Source = string(data[laneRecordHead : laneRecordHead+s])
	r.Destination = string(data[laneRecordHead+s : laneRecordHead+s+d])
	n := laneRecordHead + s + d
	r.BaseLayer = layers.BaseLayer{Contents: data[:n], Payload: data[n:]}
	return nil
}

func decodeLaneRecord(data []byte, p gopacket.PacketBuilder) error {
	r := &LaneRecord{}
	if err := r.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(r)
	return p.NextDecoder(LayerTypeRAETLane)
}

func decodeLaneRecordFrame(data []byte, truncated bool) Frame {
	var r LaneRecord
	if err := r.DecodeFromBytes(data, nil); err != nil {
		return Frame{Kind: FrameBad, Err: err, Truncated: truncated}
	}
	return Frame{Kind: FrameLane, SrcPath: r.Source, DstPath: r.Destination, Out: r.Out,
		Payload: r.Payload, Truncated: truncated}
}
