// Package dissect takes RAET traffic apart for people: it is the library
// behind raetdump.
//
// It has five parts:
//
//   - Layers for gopacket: RAET (a road packet, LayerTypeRAET, decoded on
//     UDP port 7530 and on the ports given to RegisterPort), Lane (a lane
//     page) and LaneRecord (the capture record of a lane page). They decode
//     through the generated codecs of package codec.
//   - CaptureReader reads pcap and pcapng files with gopacket's pure-Go
//     pcapgo, behind a guard that refuses corrupt framing before pcapgo
//     sees it; LinkDecoder takes off Ethernet, loopback, Linux cooked (v1
//     and v2) and raw IP link layers.
//   - KeyRing holds keys from keeps (verify keys for the Ed25519 feet,
//     long-term keys for the allow handshake) and from key logs (the
//     short-term session keys that open coats: the NaCl coat, and the AEAD
//     coats of both directions from one side's line; docs/keylog.md).
//   - Tracker follows transactions (join, allow, alive, message) per
//     initiator, correspondent, session id and transaction id: it
//     reassembles segmented messages, marks retransmissions, resend
//     requests, missing segments, stale nacks and timeouts, and times each
//     transaction, within fixed memory bounds.
//   - Dissector puts these together: Decode turns each captured frame into
//     a Packet (head, verification, body, transaction note; a bus envelope
//     decoded and named), Next the further packets of a UDP GSO
//     super-datagram (a capture on lo sees several packets in one frame),
//     and Stats counts everything for the summary. Packet.AppendJSON gives
//     raetdump's -json output.
//
// PcapngWriter writes captures, and its Tap method serves a road.Config.Tap
// (through RoadPacket, as TapLane a lane one through LanePacket), so that a
// stack records its own traffic without privileges. Road
// datagrams are written as raw IP/UDP frames; lane pages, which have no IP
// addresses, as lane records of link type LINKTYPE_USER0 (see the lane
// record layout in writer.go), which the Wireshark dissector raetgen
// generates from spec/raet.yaml (docs/wireshark/raet.lua) also reads.
//
// Nothing here panics on input, and every error names its reason.
package dissect
