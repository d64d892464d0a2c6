package codec_test

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/codec/json"
	"github.com/raet-go/raet/codec/native"
)

// The byte-exact vectors of the protocol description (raet-protocol.md §4.1
// a–d and §5 e–f): each head must encode to exactly these bytes from its
// field values, and the datagram must decode back to the same values.
var goldens = []struct {
	name  string
	codec codec.Codec
	head  string // the encoded head, exactly
	rest  string // what follows the head in the datagram; hex if it starts with "hex:", else text; "pad:N" pads with N zero bytes
	want  codec.Head
}{
	{
		name:  "a native raw body (reference unit-test vector)",
		codec: native.Codec{},
		head:  "ri RAET\npl 0040\nhl 22\nfg 00\nbk 2\n\n",
		rest:  "This is a fine kettle of fish.",
		want:  head(func(h *codec.Head) { h.PacketLength = 0x40; h.HeadLength = 0x22; h.BodyKind = codec.BodyKindRaw }),
	},
	{
		name:  "b native join ack, captured",
		codec: native.Codec{},
		head:  "ri RAET\npl 0037\nhl 37\nfg 00\npk 1\nse ca\nti 1\ntk 1\nbk 1\n\n",
		want: head(func(h *codec.Head) {
			h.PacketLength, h.HeadLength = 0x37, 0x37
			h.PacketKind, h.SourceID, h.TransactionID = codec.PacketKindAck, 0xca, 1
			h.TransactionKind, h.BodyKind = codec.TransactionKindJoin, codec.BodyKindJSON
		}),
	},
	{
		name:  "c native alive request with its signature, captured",
		codec: native.Codec{},
		head:  "ri RAET\npl 0092\nhl 52\nfg 00\npk 4\nse ca\nde 66\nsi 2\nti 3\ntk 4\nbk 1\nck 1\nfk 1\nfl 40\n\n",
		rest:  "hex:e9243edbf4302dc4d453f40cfd1afe1facf95d1c62ebff3e88fd3526ad263e612dae7a061fe009acfd55e4fd4e32340c9b8fec9f0aec9c3b9033107cb1a4b303",
		want: head(func(h *codec.Head) {
			h.PacketLength, h.HeadLength = 0x92, 0x52
			h.PacketKind, h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = codec.PacketKindRequest, 0xca, 0x66, 2, 3
			h.TransactionKind, h.BodyKind, h.CoatKind, h.FootKind, h.FootLength = codec.TransactionKindAlive, codec.BodyKindJSON, codec.CoatKindNaCl, codec.FootKindNaCl, 64
		}),
	},
	{
		name:  "d native first segment of 117",
		codec: native.Codec{},
		head:  "ri RAET\npl 03f4\nhl 57\nfg 08\nse ca\nde 66\nsi 2\nti 7\nsc 75\nml 186eb\nbk 1\nck 1\nfk 1\nfl 40\n\n",
		rest:  "pad:925",
		want: head(func(h *codec.Head) {
			h.PacketLength, h.HeadLength, h.Flags = 0x3f4, 0x57, codec.FlagSegment
			h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = 0xca, 0x66, 2, 7
			h.SegmentCount, h.MessageLength = 0x75, 0x186eb
			h.BodyKind, h.CoatKind, h.FootKind, h.FootLength = codec.BodyKindJSON, codec.CoatKindNaCl, codec.FootKindNaCl, 64
		}),
	},
	{
		name:  "d native segment 115, resent, last of burst",
		codec: native.Codec{},
		head:  "ri RAET\npl 03fa\nhl 5d\nfg 1c\nse ca\nde 66\nsi 2\nti 7\nsn 73\nsc 75\nml 186eb\nbk 1\nck 1\nfk 1\nfl 40\n\n",
		rest:  "pad:925",
		want: head(func(h *codec.Head) {
			h.PacketLength, h.HeadLength, h.Flags = 0x3fa, 0x5d, codec.FlagAgain|codec.FlagSegment|codec.FlagWait
			h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = 0xca, 0x66, 2, 7
			h.SegmentNumber, h.SegmentCount, h.MessageLength = 0x73, 0x75, 0x186eb
			h.BodyKind, h.CoatKind, h.FootKind, h.FootLength = codec.BodyKindJSON, codec.CoatKindNaCl, codec.FootKindNaCl, 64
		}),
	},
	{
		name:  "e json head and body (reference unit-test vector)",
		codec: json.Codec{},
		head:  "{\"ri\":\"RAET\",\"pl\":\"0000076\",\"hl\":\"42\",\"fg\":\"00\",\"hk\":1,\"bk\":1}\r\n\r\n",
		rest:  `{"msg":"Hello Raet World","extra":"Goodby Big Moon"}`,
		want: head(func(h *codec.Head) {
			h.PacketLength, h.HeadLength, h.HeadKind, h.BodyKind = 0x76, 0x42, codec.HeadKindJSON, codec.BodyKindJSON
		}),
	},
	{
		name:  "f json message head, captured",
		codec: json.Codec{},
		head:  "{\"ri\":\"RAET\",\"pl\":\"00000fd\",\"hl\":\"78\",\"fg\":\"04\",\"hk\":1,\"se\":202,\"de\":102,\"si\":2,\"ti\":6,\"bk\":1,\"ck\":1,\"fk\":1,\"fl\":64}\r\n\r\n",
		rest:  "pad:133",
		want: head(func(h *codec.Head) {
			h.PacketLength, h.HeadLength, h.HeadKind, h.Flags = 0xfd, 0x78, codec.HeadKindJSON, codec.FlagWait
			h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = 202, 102, 2, 6
			h.BodyKind, h.CoatKind, h.FootKind, h.FootLength = codec.BodyKindJSON, codec.CoatKindNaCl, codec.FootKindNaCl, 64
		}),
	},
}

func head(set func(*codec.Head)) codec.Head {
	var h codec.Head
	h.Reset()
	set(&h)
	return h
}

func restBytes(t *testing.T, rest string) []byte {
	t.Helper()
	switch {
	case strings.HasPrefix(rest, "hex:"):
		b, err := hex.DecodeString(rest[4:])
		if err != nil {
			t.Fatal(err)
		}
		return b
	case strings.HasPrefix(rest, "pad:"):
		var n int
		for _, c := range rest[4:] {
			n = n*10 + int(c-'0')
		}
		return make([]byte, n)
	}
	return []byte(rest)
}

func TestGoldenVectors(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			datagram := append([]byte(g.head), restBytes(t, g.rest)...)
			if int(g.want.PacketLength) != len(datagram) {
				t.Fatalf("vector: pl %d but datagram has %d bytes", g.want.PacketLength, len(datagram))
			}
			// Encode from the values, the way a packer does: pl unknown
			// (0) at first, patched after.
			h := g.want
			h.PacketLength = 0
			enc, err := g.codec.Append(nil, &h)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.codec.SetPacketLength(enc, len(datagram)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(enc, []byte(g.head)) {
				t.Fatalf("encoded\n%q\nwant\n%q", enc, g.head)
			}
			if int(h.HeadLength) != len(g.head) || h.HeadKind != g.codec.Kind() {
				t.Errorf("Append set hl=%d hk=%v, want %d %v", h.HeadLength, h.HeadKind, len(g.head), g.codec.Kind())
			}
			// Decode the datagram, found by detection.
			c, err := codec.Detect(datagram)
			if err != nil || c.Kind() != g.codec.Kind() {
				t.Fatalf("Detect = %v, %v", c, err)
			}
			var got codec.Head
			n, err := c.Decode(datagram, &got)
			if err != nil {
				t.Fatal(err)
			}
			if n != len(g.head) || got != g.want {
				t.Fatalf("decoded n=%d %+v\nwant n=%d %+v", n, got, len(g.head), g.want)
			}
		})
	}
}
