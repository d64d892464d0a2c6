package packet_test

import (
	"errors"
	"fmt"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Three small messages for one remote go out in one datagram; the receiver
// reads each entry back with its own transaction id, and answers all three
// with one answers packet.
func ExampleBundler() {
	hc, _ := codec.Lookup(codec.HeadKindBinary)
	pk := &packet.Packer{Codec: hc, Foot: packet.NadaFoot{}, MaxPacketSize: 1400}
	b := &packet.Bundler{Packer: pk} // nil Coat: NadaCoat, for the example
	var h codec.Head
	h.Reset()
	h.SourceID, h.DestinationID, h.SessionID, h.BodyKind = 2, 3, 1, codec.BodyKindJSON
	b.Reset(&h)
	for ti, body := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		if err := b.Add(packet.BundleEntry{TI: uint32(10 + ti), BodyKind: codec.BodyKindJSON, Plain: []byte(body)}); errors.Is(err, packet.ErrNotBundled) {
			fmt.Println("send it alone")
		}
	}
	datagram, err := b.Flush(nil)
	if err != nil {
		fmt.Println(err)
		return
	}

	var p packet.Packet
	var bundle packet.Bundle
	if err := packet.Parse(datagram, &p); err != nil {
		fmt.Println(err)
		return
	}
	if err := packet.ParseBundle(p.Coat, &bundle); err != nil {
		fmt.Println(err)
		return
	}
	if _, err := bundle.Open(nil, nil); err != nil {
		fmt.Println(err)
		return
	}
	var answers []packet.AnswerRange
	for _, e := range bundle.Entries {
		fmt.Printf("ti %d: %s\n", e.TI, e.Plain)
		answers = packet.AddAnswer(answers, codec.PacketKindDone, e.TI)
	}
	done, err := pk.PackAnswers(nil, &h, answers)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d-byte bundle, answered by one %d-byte packet: %+v\n", len(datagram), len(done), answers)
	// Output:
	// ti 10: {"n":1}
	// ti 11: {"n":2}
	// ti 12: {"n":3}
	// 49-byte bundle, answered by one 17-byte packet: [{Kind:done First:10 Count:3}]
}
