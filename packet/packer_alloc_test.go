package packet

import (
	"fmt"
	"testing"

	"github.com/raet-go/raet/codec"
)

// TestPackMessageAllocs: planning and packing a message, in one packet or
// in segments, allocates nothing once the caller's buffers are sized: with
// the NaCl coat and the MAC foot (the coat sealed once, then cut), and
// with the AEAD coat (each segment sealed on its own).
func TestPackMessageAllocs(t *testing.T) {
	if raceEnabled() {
		t.Skip("allocation counts are meaningless under -race")
	}
	pk := aeadPacker(t)
	pk.MaxPacketSize = codec.MaxPacketSize
	foot, _ := macPair(t)
	mac := *pk
	mac.Foot = foot
	seal := otherCoat(t, zeroReader{})
	aead, _ := aeadPair(t, codec.CoatKindChaCha20Poly1305)
	prefix := []byte("mid") // an envelope in front of the body
	h := new(codec.Head)    // reused, as a stack would
	coat := make([]byte, 0, 4096)
	dst := make([]byte, 0, 2*codec.MaxPacketSize)
	for _, size := range []int{64, 3000} {
		body := make([]byte, size)
		pack := map[string]func() int{
			"nacl-mac": func() int {
				*h = aeadHead()
				h.CoatKind = seal.Kind()
				c, err := seal.Seal(coat, body)
				if err != nil {
					t.Fatal(err)
				}
				segSize, count, err := mac.Segments(h, len(c))
				if err != nil {
					t.Fatal(err)
				}
				for i := range count {
					if _, err := mac.PackSegment(dst, h, c, i, segSize, count); err != nil {
						t.Fatal(err)
					}
				}
				return count
			},
			"aead": func() int {
				*h = aeadHead()
				segSize, count, err := pk.SegmentsAEAD(h, aead, len(prefix)+len(body))
				if err != nil {
					t.Fatal(err)
				}
				for i := range count {
					if _, err := pk.PackSegmentAEAD(dst, h, aead, prefix, body, i, segSize, count); err != nil {
						t.Fatal(err)
					}
				}
				return count
			},
		}
		for name, run := range pack {
			t.Run(fmt.Sprintf("%s/%dB", name, size), func(t *testing.T) {
				count := run() // 1: one packet
				if (size > codec.MaxPacketSize) != (count > 1) {
					t.Fatalf("%d segments for %d bytes", count, size)
				}
				if n := testing.AllocsPerRun(50, func() { _ = run() }); n != 0 {
					t.Errorf("%d segment(s): %v allocs per message, want 0", count, n)
				}
			})
		}
	}
}
