package road

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
)

// offloadPair is two joined stacks on loopback in the fast profile with
// 8 KiB packets, with segmentation offload or without (Config.NoOffload).
func offloadPair(tb testing.TB, offload bool) (m, o *Stack) {
	tb.Helper()
	mk := func(name string, main bool) *Stack {
		s, err := New(&Config{Name: name, Main: main, Listen: "127.0.0.1:0", Auto: keep.AutoAlways, AlivePeriod: -1,
			FastMaxPacketSize: 8192, NoOffload: !offload})
		if err != nil {
			tb.Fatal(err)
		}
		if err := s.Start(); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}
	m, o = mk("main", true), mk("other", false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := o.Join(ctx, m.Addr().String()); err != nil {
		tb.Fatalf("join: %v", err)
	}
	mi, oi := m.io.(*mmsgIO), o.io.(*mmsgIO)
	if got := mi.gso && mi.gro != nil && oi.gso && oi.gro != nil; got != offload {
		tb.Fatalf("offload %v, but the stacks have gso %v/%v, gro %v/%v", offload, mi.gso, oi.gso, mi.gro != nil, oi.gro != nil)
	}
	return m, o
}

// TestSegmentedMessageOffload sends large segmented messages between two
// stacks with segmentation offload and without: each arrives whole and
// unchanged either way.
func TestSegmentedMessageOffload(t *testing.T) {
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("offload=%v", offload), func(t *testing.T) {
			m, o := offloadPair(t, offload)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for i, size := range []int{100, 9000, 70000, 300 << 10} {
				data := strings.Repeat(fmt.Sprintf("%d:%07d|", i, size), size/10+1)[:size]
				errc := make(chan error, 1)
				go func() { errc <- o.Send(ctx, "main", map[string]any{"data": data}) }()
				select {
				case msg := <-m.Receive():
					if got, _ := msg.Body["data"].(string); got != data {
						t.Fatalf("%d bytes: got %d bytes back, not the same", size, len(got))
					}
				case <-ctx.Done():
					t.Fatalf("%d bytes: nothing received", size)
				}
				if err := <-errc; err != nil {
					t.Fatalf("%d bytes: %v", size, err)
				}
			}
		})
	}
}

// BenchmarkSegmentedOffload sends 256 KiB messages (33 packets of 8 KiB),
// 4 in flight, between two stacks with segmentation offload and without,
// side by side, and reports beside msgs/s the sendmmsg and recvmmsg calls
// of both stacks per datagram they sent.
func BenchmarkSegmentedOffload(b *testing.B) {
	data := strings.Repeat("x", 256<<10)
	for _, offload := range []bool{false, true} {
		b.Run(map[bool]string{false: "no-offload", true: "gso+gro"}[offload], func(b *testing.B) {
			m, o := offloadPair(b, offload)
			ctx := context.Background()
			ios := []*mmsgIO{m.io.(*mmsgIO), o.io.(*mmsgIO)}
			calls := func() (send, recv, pkts uint64) {
				for i, s := range []*Stack{m, o} {
					send += ios[i].w.calls.Load()
					recv += ios[i].r.calls.Load()
					c, err := s.Counters(ctx)
					if err != nil {
						b.Fatal(err)
					}
					for _, n := range c.PacketsOut {
						pkts += n
					}
					pkts += c.Retransmits
				}
				return
			}
			go func() {
				for {
					select {
					case <-m.Receive():
					case <-m.closing:
						return
					}
				}
			}()
			sem := make(chan struct{}, 4)
			errc := make(chan error, 4)
			s0, r0, p0 := calls()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				sem <- struct{}{}
				go func() {
					defer func() { <-sem }()
					if err := o.Send(ctx, "main", map[string]any{"data": data}); err != nil {
						select {
						case errc <- err:
						default:
						}
					}
				}()
			}
			for range cap(sem) {
				sem <- struct{}{}
			}
			select {
			case err := <-errc:
				b.Fatal(err)
			default:
			}
			s1, r1, p1 := calls()
			pkts := float64(p1 - p0)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			b.ReportMetric(float64(s1-s0)/pkts, "sendcalls/datagram")
			b.ReportMetric(float64(r1-r0)/pkts, "recvcalls/datagram")
		})
	}
}
