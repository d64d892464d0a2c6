// Command heads is the demo of what raet-go has today: it takes an alive
// request captured from the reference Python RAET (raet-protocol.md §4.1 c),
// decodes its native head, checks its Ed25519 foot with the sender's key,
// then encodes the same head in all three head kinds and decodes each back.
//
//	go run ./examples/heads
package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/codec/binary"
	"github.com/raet-go/raet/codec/json"
	"github.com/raet-go/raet/codec/native"
	"github.com/raet-go/raet/keys"
)

// The captured datagram (other -> main) and other's verify key (§7.4).
const (
	capturedHex = "726920524145540a706c20303039320a686c2035320a66672030300a706b20340a73652063610a64652036360a736920320a746920330a746b20340a626b20310a636b20310a666b20310a666c2034300a0a" +
		"e9243edbf4302dc4d453f40cfd1afe1facf95d1c62ebff3e88fd3526ad263e612dae7a061fe009acfd55e4fd4e32340c9b8fec9f0aec9c3b9033107cb1a4b303"
	otherVerHex = "516b4dd774b4eeabdc8b0b2a9e7392c6cc5a6573cc7f86715ebd62e2fa15a402"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "heads:", err)
		os.Exit(1)
	}
}

func run() error {
	datagram, err := hex.DecodeString(capturedHex)
	if err != nil {
		return err
	}
	c, err := codec.Detect(datagram)
	if err != nil {
		return err
	}
	var h codec.Head
	hl, err := c.Decode(datagram, &h)
	if err != nil {
		return err
	}
	fmt.Printf("captured from the reference: %d bytes, %v head of %d bytes\n", len(datagram), c.Kind(), hl)
	fmt.Printf("  %v/%v se=%#x de=%#x si=%d ti=%d bk=%v ck=%v fk=%v fl=%d flags=%v\n",
		h.TransactionKind, h.PacketKind, h.SourceID, h.DestinationID, h.SessionID, h.TransactionID,
		h.BodyKind, h.CoatKind, h.FootKind, h.FootLength, h.Flags)

	// The foot signs head || coat || 64 zero bytes (§7.3).
	ver, err := keys.ParseVerifyKey(otherVerHex)
	if err != nil {
		return err
	}
	footAt := len(datagram) - int(h.FootLength)
	signed := append(append([]byte(nil), datagram[:footAt]...), make([]byte, h.FootLength)...)
	ok := ed25519.Verify(ver.Ed25519(), signed, datagram[footAt:])
	fmt.Printf("  Ed25519 foot with other's key %s…: verified=%v\n\n", otherVerHex[:16], ok)
	if !ok {
		return fmt.Errorf("the captured signature does not verify")
	}

	fmt.Println("the same head in each head kind, decoded back:")
	for _, c := range []codec.Codec{native.Codec{}, json.Codec{}, binary.Codec{}} {
		out := h
		enc, err := c.Append(nil, &out)
		if err != nil {
			return err
		}
		// Patch pl for a datagram of this head plus the same 64-byte foot.
		pkt := append(enc, datagram[footAt:]...)
		if err := c.SetPacketLength(pkt, len(pkt)); err != nil {
			return err
		}
		var back codec.Head
		if _, err := c.Decode(pkt, &back); err != nil {
			return fmt.Errorf("%v: %w", c.Kind(), err)
		}
		want := out // Append set hl and hk for its kind
		want.PacketLength = uint32(len(pkt))
		same := back.Equal(&want)
		fmt.Printf("  %-6v %3d bytes  round trip=%v  %s\n", c.Kind(), len(enc), same, show(enc))
		if !same {
			return fmt.Errorf("%v: round trip changed the head", c.Kind())
		}
	}
	return nil
}

// show prints text heads readably and binary ones in hex.
func show(b []byte) string {
	if b[0] == 'r' || b[0] == '{' {
		return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(string(b))
	}
	return hex.EncodeToString(b)
}
