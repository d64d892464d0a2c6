package packet_test

import (
	"bytes"
	"crypto/ecdh"
	"errors"
	"fmt"

	"github.com/raet-go/raet/codec"
	_ "github.com/raet-go/raet/codec/binary"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// Two ends of a session, each with its short-term key pair, agree on an
// AEAD coat, pack a packet at one end and open it at the other; the same
// datagram again is refused as a replay.
func ExampleAEADCoat() {
	a, _ := ecdh.X25519().GenerateKey(nil)
	b, _ := ecdh.X25519().GenerateKey(nil)
	kind, _ := packet.ChooseAEAD(packet.AEADKinds(), []codec.CoatKind{codec.CoatKindChaCha20Poly1305})
	atB, _ := packet.NewAEADCoat(kind, (*[32]byte)(a.Bytes()), (*[32]byte)(b.PublicKey().Bytes()))
	atA, _ := packet.NewAEADCoat(kind, (*[32]byte)(b.Bytes()), (*[32]byte)(a.PublicKey().Bytes()))

	hc, _ := codec.Lookup(codec.HeadKindBinary)
	pk := &packet.Packer{Codec: hc, Foot: packet.NadaFoot{}}
	var h codec.Head
	h.Reset()
	h.SourceID, h.DestinationID, h.BodyKind = 2, 3, codec.BodyKindRaw
	dgram, err := pk.PackAEAD(nil, &h, atB, []byte("hello"))
	if err != nil {
		fmt.Println(err)
		return
	}

	var p packet.Packet
	if err := packet.Parse(dgram, &p); err != nil {
		fmt.Println(err)
		return
	}
	body, err := p.OpenAEAD(nil, atA)
	fmt.Printf("%v %q %v, foot %v\n", p.Head.CoatKind, body, err, p.Head.FootKind)
	_, err = p.OpenAEAD(nil, atA)
	fmt.Println(errors.Is(err, packet.ErrReplayed))
	// Output:
	// chacha20poly1305 "hello" <nil>, foot nada
	// true
}

// A body too large for one packet is cut before sealing: each segment is
// sealed on its own (and would be sealed again, under a new counter, if
// it were sent again); the receiver opens each where it lies, in the
// datagram's buffer, and reassembles the plain pieces.
func ExamplePacker_PackSegmentAEAD() {
	a, _ := ecdh.X25519().GenerateKey(nil)
	b, _ := ecdh.X25519().GenerateKey(nil)
	atB, _ := packet.NewAEADCoat(codec.CoatKindAES256GCM, (*[32]byte)(a.Bytes()), (*[32]byte)(b.PublicKey().Bytes()))
	atA, _ := packet.NewAEADCoat(codec.CoatKindAES256GCM, (*[32]byte)(b.Bytes()), (*[32]byte)(a.PublicKey().Bytes()))

	hc, _ := codec.Lookup(codec.HeadKindBinary)
	pk := &packet.Packer{Codec: hc, Foot: packet.NadaFoot{}, MaxPacketSize: 256}
	var h codec.Head
	h.Reset()
	h.SourceID, h.DestinationID, h.TransactionID, h.BodyKind = 2, 3, 9, codec.BodyKindRaw
	body := make([]byte, 1000)
	segSize, count, _ := pk.SegmentsAEAD(&h, atB, len(body))

	r := packet.NewReassembler[int, uint32](nil)
	for i := range count {
		sh := h
		dgram, err := pk.PackSegmentAEAD(nil, &sh, atB, nil, body, i, segSize, count)
		if err != nil {
			fmt.Println(err)
			return
		}
		var p packet.Packet
		if err := packet.Parse(dgram, &p); err != nil {
			fmt.Println(err)
			return
		}
		piece, err := p.OpenAEADInBuffer(atA)
		if err != nil {
			fmt.Println(err)
			return
		}
		if whole, _, _ := r.Add(0, p.Head.TransactionID, &p.Head, piece); whole != nil {
			fmt.Printf("%d segments of up to %d bytes: %d bytes whole\n", count, segSize, len(whole))
		}
	}
	fmt.Println(packet.IsAEAD(atB.Kind()), packet.IsAEAD(codec.CoatKindNaCl))
	// Output:
	// 5 segments of up to 209 bytes: 1000 bytes whole
	// true false
}

// A session's coat drops its cipher states when its owner finds it idle,
// and builds them again at the next packet; its counters go on, so no
// nonce repeats.
func ExampleAEADCoat_Drop() {
	a, _ := ecdh.X25519().GenerateKey(nil)
	b, _ := ecdh.X25519().GenerateKey(nil)
	atB, _ := packet.NewAEADCoat(codec.CoatKindChaCha20Poly1305, (*[32]byte)(a.Bytes()), (*[32]byte)(b.PublicKey().Bytes()))
	atA, _ := packet.NewAEADCoat(codec.CoatKindChaCha20Poly1305, (*[32]byte)(b.Bytes()), (*[32]byte)(a.PublicKey().Bytes()))
	head := []byte("head")
	first, _ := atB.Seal(nil, head, []byte("one"))
	atB.Drop()                                      // idle: the states go
	second, _ := atB.Seal(nil, head, []byte("two")) // built again
	for _, coat := range [][]byte{first, second} {
		body, err := atA.Open(nil, head, coat)
		fmt.Printf("%q %v\n", body, err)
		atA.Drop()
	}
	fmt.Println(bytes.Equal(first[:packet.AEADCounterSize], second[:packet.AEADCounterSize]))
	// Output:
	// "one" <nil>
	// "two" <nil>
	// false
}

// A session's coats and feet from one X25519 at each end: the allow
// handshake has computed the crypto_box key of the two short-term pairs
// for its own boxes (here keys.PrivateKey.SharedKey), and SessionKeyOf
// makes the session's coats from it; the other end's NewSessionKey
// computes the same key. What one end seals, the other opens.
func ExampleSessionKeyOf() {
	a, _ := keys.GenerateBox()
	b, _ := keys.GenerateBox()
	shared, _ := a.Private.SharedKey(b.Public)
	atA := packet.SessionKeyOf(&shared, (*[32]byte)(&a.Public), (*[32]byte)(&b.Public))
	atB, _ := packet.NewSessionKey((*[32]byte)(&b.Private), (*[32]byte)(&a.Public))

	sealA, _ := atA.AEADCoat(codec.CoatKindChaCha20Poly1305)
	openB, _ := atB.AEADCoat(codec.CoatKindChaCha20Poly1305)
	hc, _ := codec.Lookup(codec.HeadKindBinary)
	pk := &packet.Packer{Codec: hc, Foot: packet.NadaFoot{}}
	var h codec.Head
	h.Reset()
	h.SourceID, h.DestinationID, h.BodyKind = 2, 3, codec.BodyKindRaw
	dgram, _ := pk.PackAEAD(nil, &h, sealA, []byte("hello"))
	var p packet.Packet
	if err := packet.Parse(dgram, &p); err != nil {
		fmt.Println(err)
		return
	}
	body, err := p.OpenAEAD(nil, openB)
	fmt.Printf("%q %v\n", body, err)

	boxed, _ := atA.NaClCoat(nil).Seal(nil, []byte("boxed"))
	plain, err := atB.NaClCoat(nil).Open(nil, boxed)
	fmt.Printf("%q %v\n", plain, err)
	// Output:
	// "hello" <nil>
	// "boxed" <nil>
}
