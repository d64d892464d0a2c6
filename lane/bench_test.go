//go:build unix

package lane

import (
	"context"
	"github.com/raet-go/raet/codec"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/internal/testutil"
)

var benchSizes = []struct {
	name string
	size int
}{{"64B", 64}, {"1KiB", 1 << 10}, {"64KiB", 64 << 10}}

// BenchmarkLane measures messages per second between two yards of this
// process, and raw unixgram datagrams of the same size between two
// sockets, in the same run (compare the msgs/s metrics; make bench). The
// lane body is {"d":"xxx..."}, serialized to exactly size bytes in json
// (a few bytes less in msgpack); a 64 KiB body takes two pages. Every
// message is decoded by the receiver, as Receive delivers it.
func BenchmarkLane(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run("lane-json/"+bs.name, func(b *testing.B) { benchLane(b, bs.size, codec.PackKindJSON) })
		b.Run("lane-msgpack/"+bs.name, func(b *testing.B) { benchLane(b, bs.size, codec.PackKindPack) })
		b.Run("raw/"+bs.name, func(b *testing.B) { benchRaw(b, bs.size) })
	}
}

func benchLane(b *testing.B, size int, pk codec.PackKind) {
	alpha, beta := pair(b, func(c *Config) { c.PackKind = pk })
	body := map[string]any{"d": strings.Repeat("x", size-len(`{"d":""}`))}
	ctx := context.Background()
	done := make(chan int)
	n := b.N
	go func() {
		got := 0
		for got < n {
			m, ok := <-beta.Receive()
			if !ok {
				break
			}
			if len(m.Raw) > size || len(m.Raw) < size-8 {
				b.Errorf("got %d bytes, want %d", len(m.Raw), size)
			}
			got++
		}
		done <- got
	}()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range n {
		if err := alpha.Send(ctx, "beta", body); err != nil {
			b.Fatal(err)
		}
	}
	got := <-done
	el := time.Since(start)
	b.StopTimer()
	if got != n {
		b.Fatalf("received %d of %d", got, n)
	}
	b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
	c := alpha.Counters()
	b.ReportMetric(float64(c.Retries)/float64(n), "retries/msg")
}

func benchRaw(b *testing.B, size int) {
	dir := testutil.ShortTempDir(b, "rl")
	listen := func(name string) *net.UnixConn {
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, name), Net: "unixgram"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		return c
	}
	src, dst := listen("a"), listen("b")
	to := dst.LocalAddr().(*net.UnixAddr)
	msg := make([]byte, size)
	n := b.N
	done := make(chan int)
	go func() {
		buf := make([]byte, size+1)
		got := 0
		for got < n {
			if _, _, err := dst.ReadFromUnix(buf); err != nil {
				break
			}
			got++
		}
		done <- got
	}()
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range n {
		if _, err := src.WriteToUnix(msg, to); err != nil {
			b.Fatal(err)
		}
	}
	got := <-done
	el := time.Since(start)
	b.StopTimer()
	if got != n {
		b.Fatalf("received %d of %d", got, n)
	}
	b.ReportMetric(float64(n)/el.Seconds(), "msgs/s")
}
