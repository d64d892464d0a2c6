package codec_test

import (
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/codec/codectest"
)

// Encode and decode of a typical signed and coated message head with each
// codec (make bench-codec; targets in the spec issue: native and JSON decode
// ≤ 1 µs, binary encode and decode ≤ 100 ns with 0 allocations).
func BenchmarkCodecs(b *testing.B) {
	for _, c := range allCodecs {
		h := typicalHead()
		pkt, err := codectest.Packet(c, &h, 85+64)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.Kind().String()+"/encode", func(b *testing.B) {
			buf := make([]byte, 0, codec.MaxHeadSize)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if buf, err = c.Append(buf[:0], &h); err != nil {
					b.Fatal(err)
				}
				if err := c.SetPacketLength(buf, len(pkt)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.Kind().String()+"/decode", func(b *testing.B) {
			var got codec.Head
			b.ReportAllocs()
			b.SetBytes(int64(h.HeadLength))
			for b.Loop() {
				if _, err := c.Decode(pkt, &got); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
