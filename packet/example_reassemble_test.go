package packet_test

import (
	"errors"
	"fmt"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// A Reassembler bounds each remote (the owner) on its own: a remote that
// opens more messages than its quota is refused, and another remote's
// message still goes through.
func ExampleReassembler() {
	ra := packet.NewReassembler[string, int](&packet.ReassemblyConfig{MaxPerRemote: 2})
	for ti := range 3 { // the first segments of three messages of "greedy"
		_, _, err := ra.Add("greedy", ti, twoSegments(0), []byte("hello"))
		fmt.Println("greedy", ti, errors.Is(err, packet.ErrRemoteQuota))
	}
	ra.Add("polite", 100, twoSegments(0), []byte("hello"))
	whole, _, err := ra.Add("polite", 100, twoSegments(1), []byte("world"))
	fmt.Printf("polite: %q %v\n", whole, err)
	pending, _ := ra.Owner("greedy")
	fmt.Println("greedy holds", pending)
	// Output:
	// greedy 0 false
	// greedy 1 false
	// greedy 2 true
	// polite: "helloworld" <nil>
	// greedy holds 2
}

// A receiver whose senders are gone gives back what its busiest moment
// left for reuse; a message under way still completes.
func ExampleReassembler_Shrink() {
	ra := packet.NewReassembler[string, int](nil)
	ra.Add("left", 1, twoSegments(0), []byte("hello"))
	ra.Add("left", 1, twoSegments(1), []byte("world")) // done: its room is kept for reuse
	ra.Add("stays", 2, twoSegments(0), []byte("still"))
	ra.Shrink() // the sender "left" is gone
	whole, _, err := ra.Add("stays", 2, twoSegments(1), []byte("there"))
	fmt.Printf("%q %v %d\n", whole, err, ra.Pending())
	// Output: "stillthere" <nil> 0
}

// twoSegments is the head of segment sn of a 10-byte message in two
// segments, as the examples' senders send them.
func twoSegments(sn uint16) *codec.Head {
	var h codec.Head
	h.Reset()
	h.SegmentNumber, h.SegmentCount, h.MessageLength = sn, 2, 10
	h.SetSegment(true)
	return &h
}
