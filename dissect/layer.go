package dissect

import (
	"errors"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/protocol"
)

// A RAET road packet, the payload of one UDP datagram (raet-protocol.md §3):
//
//	+------------------+--------------------------------+----------------+
//	| head (hl bytes)  | coat (body, maybe encrypted)   | foot (fl bytes)|
//	+------------------+--------------------------------+----------------+
//	 <---------------------------- pl bytes ---------------------------->
//
// The head is native text ("ri RAET\npl 0092\nhl 52\n...\n\n"), a compact
// JSON object ({"ri":"RAET",...}\r\n\r\n) or raet-go's binary head (first
// byte 0xd2); pl must equal the datagram length and hl the head length.
//
// A RAET lane page, the payload of one Unix datagram (§11), is a native-style
// head of nine fields ("ri RAET\nvn 0\npk 0\nsn ...\n\n") and a body.

// DefaultPort is RAET's UDP port (RAET_PORT of the reference), from the
// specification (package protocol).
const DefaultPort = protocol.DefaultPort

// Layer type numbers, in the range gopacket recommends for application
// layers (1000–1999).
const (
	layerNumRAET       = 1530
	layerNumLane       = 1531
	layerNumLaneRecord = 1532
)

var (
	// LayerTypeRAET is the gopacket layer type of a RAET road packet
	// (*RAET). UDP decodes it on port 7530 and on the ports given to
	// RegisterPort.
	LayerTypeRAET = gopacket.RegisterLayerType(layerNumRAET, gopacket.LayerTypeMetadata{
		Name: "RAET", Decoder: gopacket.DecodeFunc(decodeRAET)})
	// LayerTypeRAETLane is the gopacket layer type of a RAET lane page
	// (*Lane).
	LayerTypeRAETLane = gopacket.RegisterLayerType(layerNumLane, gopacket.LayerTypeMetadata{
		Name: "RAETLane", Decoder: gopacket.DecodeFunc(decodeLane)})
	// LayerTypeLaneRecord is the gopacket layer type of the capture
	// record of a lane page (*LaneRecord), the link layer of
	// LinkTypeLane; see PcapngWriter.
	LayerTypeLaneRecord = gopacket.RegisterLayerType(layerNumLaneRecord, gopacket.LayerTypeMetadata{
		Name: "RAETLaneRecord", Decoder: gopacket.DecodeFunc(decodeLaneRecord)})
)

func init() { RegisterPort(DefaultPort) }

// RegisterPort makes gopacket's UDP layer hand the payload of datagrams to
// or from port to the RAET layer. It changes gopacket's global port table, so
// call it before decoding starts, not concurrently with decoding.
func RegisterPort(port uint16) {
	layers.RegisterUDPPortLayerType(layers.UDPPort(port), LayerTypeRAET)
}

// RAET is a RAET road packet as a gopacket layer. Contents is the head,
// Payload the coat and foot; the embedded packet.Packet gives the decoded
// head, the coat and foot slices (aliasing the decoded bytes) and Verify
// and Open. DecodeFromBytes does not allocate when it succeeds.
type RAET struct {
	layers.BaseLayer
	packet.Packet
}

// LayerType returns LayerTypeRAET.
func (r *RAET) LayerType() gopacket.LayerType { return LayerTypeRAET }

// CanDecode returns LayerTypeRAET.
func (r *RAET) CanDecode() gopacket.LayerClass { return LayerTypeRAET }

// NextLayerType returns gopacket.LayerTypeZero: the body is read with the
// keys of the session, not by gopacket (see Dissector).
func (r *RAET) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// Payload returns the coat, making RAET a gopacket.ApplicationLayer.
func (r *RAET) Payload() []byte { return r.Coat }

// HeadDecoded reports whether err, returned by DecodeFromBytes, left a
// decoded head in r.Head: the head was good but the packet around it was
// not (a foot length that does not fit the foot kind, a packet shorter than
// its head and foot).
func HeadDecoded(err error) bool {
	if err == nil {
		return true
	}
	var ce *codec.Error
	return !errors.As(err, &ce)
}

// DecodeFromBytes decodes data, one whole UDP payload, as a RAET road
// packet: it detects the head kind from the first bytes, decodes the head
// with the generated codec (checking every field, pl against len(data) and
// hl against the real head length) and slices the coat and foot. It neither
// verifies the foot nor opens the coat. On failure it returns a
// *packet.PacketError whose cause is a *codec.Error for a bad head; see
// HeadDecoded. A head cut short is reported to df as truncation.
func (r *RAET) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	r.BaseLayer = layers.BaseLayer{}
	r.Raw, r.Coat, r.Foot, r.Codec = nil, nil, nil, nil
	if err := packet.Parse(data, &r.Packet); err != nil {
		if df != nil && errors.Is(err, codec.ErrShort) {
			df.SetTruncated()
		}
		return err
	}
	hl := len(data) - len(r.Coat) - len(r.Foot)
	r.BaseLayer = layers.BaseLayer{Contents: data[:hl], Payload: data[hl:]}
	return nil
}

func decodeRAET(data []byte, p gopacket.PacketBuilder) error {
	r := &RAET{}
	if err := r.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(r)
	p.SetApplicationLayer(r)
	return nil
}

// Lane is a RAET lane page as a gopacket layer: Contents is the page head,
// Payload (and Body) the body, a fragment of it when the book has several
// pages.
type Lane struct {
	layers.BaseLayer
	Head codeclane.Head
	Body []byte
}

// LayerType returns LayerTypeRAETLane.
func (l *Lane) LayerType() gopacket.LayerType { return LayerTypeRAETLane }

// CanDecode returns LayerTypeRAETLane.
func (l *Lane) CanDecode() gopacket.LayerClass { return LayerTypeRAETLane }

// NextLayerType returns gopacket.LayerTypeZero.
func (l *Lane) NextLayerType() gopacket.LayerType { return gopacket.LayerTypeZero }

// Payload returns the body, making Lane a gopacket.ApplicationLayer.
func (l *Lane) Payload() []byte { return l.Body }

// DecodeFromBytes decodes a lane page: the head with the generated lane
// codec (a *codeclane.Error on failure), then the body.
func (l *Lane) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	l.BaseLayer, l.Body = layers.BaseLayer{}, nil
	if len(data) > codeclane.MaxPageSize {
		return fmt.Errorf("raet: lane page of %d bytes, more than %d", len(data), codeclane.MaxPageSize)
	}
	hl, err := codeclane.Decode(data, &l.Head)
	if err != nil {
		if df != nil && errors.Is(err, codec.ErrShort) {
			df.SetTruncated()
		}
		return err
	}
	l.BaseLayer = layers.BaseLayer{Contents: data[:hl], Payload: data[hl:]}
	l.Body = data[hl:]
	return nil
}

func decodeLane(data []byte, p gopacket.PacketBuilder) error {
	l := &Lane{}
	if err := l.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(l)
	p.SetApplicationLayer(l)
	return nil
}
