package bus_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// benchRoad starts a main estate and n others on loopback UDP, joined.
func benchRoad(b *testing.B, n int) []*road.Stack {
	b.Helper()
	var out []*road.Stack
	for i := range n + 1 {
		s, err := road.New(&road.Config{Name: fmt.Sprintf("e%d", i), Main: i == 0, Listen: "127.0.0.1:0", Auto: keep.AutoAlways,
			AlivePeriod: -1, ReceiveQueue: 4096})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range out[1:] {
		if _, err := s.Join(ctx, out[0].Addr().String()); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// roadOf adapts s, closed at cleanup (after the node using it).
func roadOf(b *testing.B, s *road.Stack) *bus.Road {
	r := bus.NewRoad(s)
	b.Cleanup(func() { r.Close() })
	return r
}

// cpuTime is the CPU time the process has used (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter reports the CPU time per operation ("cpu-us/op"), which a
// loaded machine changes less than the wall time.
func cpuMeter(b *testing.B) func() {
	b.ResetTimer()
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Microseconds())/float64(b.N), "cpu-us/op")
	}
}

var benchBody = map[string]any{"data": strings.Repeat("x", 64)}

// Fan-out to 10 estates: the stack's own Send (16 in flight to each, as
// a publisher's SendWindow) beside Publish to 10 subscribers. Compare the
// two in one run: go test -run ^$ -bench Fanout ./bus/
func BenchmarkFanout(b *testing.B) {
	const subs = 10
	b.Run("road.Send", func(b *testing.B) {
		st := benchRoad(b, subs)
		var wg sync.WaitGroup
		for _, s := range st[1:] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range b.N {
					<-s.Receive()
				}
			}()
		}
		defer cpuMeter(b)()
		ctx := context.Background()
		var sends sync.WaitGroup
		for _, s := range st[1:] {
			sends.Add(1)
			go func() {
				defer sends.Done()
				sem := make(chan struct{}, 16)
				var inner sync.WaitGroup
				for range b.N {
					sem <- struct{}{}
					inner.Add(1)
					go func() {
						defer func() { <-sem; inner.Done() }()
						if err := st[0].Send(ctx, s.Name(), benchBody); err != nil {
							b.Error(err)
						}
					}()
				}
				inner.Wait()
			}()
		}
		sends.Wait()
		wg.Wait()
		b.ReportMetric(float64(b.N*subs)/b.Elapsed().Seconds(), "delivered/s")
	})
	b.Run("bus.Publish", func(b *testing.B) {
		st := benchRoad(b, subs)
		pub, err := bus.New(roadOf(b, st[0]), &bus.Config{Heartbeat: -1, HistoryLast: 16, DefaultHWM: 4096})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pub.Close() })
		var wg sync.WaitGroup
		for _, s := range st[1:] {
			n, err := bus.New(roadOf(b, s), &bus.Config{Heartbeat: -1})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { n.Close() })
			sub, err := n.Subscribe("e0", []string{">"}, &bus.SubOptions{Buffer: 4096})
			if err != nil {
				b.Fatal(err)
			}
			<-sub.Ready()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for got := 0; got < b.N; {
					if d := <-sub.Messages(); d.Kind == bus.DeliveryMessage {
						got++
					}
				}
			}()
		}
		defer cpuMeter(b)()
		ctx := context.Background()
		for range b.N {
			if _, err := pub.Publish(ctx, bus.Pub{Subject: "bench.x", Body: benchBody}); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		b.ReportMetric(float64(b.N*subs)/b.Elapsed().Seconds(), "delivered/s")
	})
}

// Round trips, one at a time: a Send answered by a Send beside Request
// answered by a service. go test -run ^$ -bench RoundTrip ./bus/
func BenchmarkRoundTrip(b *testing.B) {
	b.Run("road.Send", func(b *testing.B) {
		st := benchRoad(b, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			for {
				select {
				case m := <-st[1].Receive():
					st[1].Send(ctx, m.From, m.Body)
				case <-ctx.Done():
					return
				}
			}
		}()
		defer cpuMeter(b)()
		for range b.N {
			if err := st[0].Send(ctx, "e1", benchBody); err != nil {
				b.Fatal(err)
			}
			<-st[0].Receive()
		}
	})
	b.Run("bus.Request", func(b *testing.B) {
		st := benchRoad(b, 1)
		c, err := bus.New(roadOf(b, st[0]), &bus.Config{Heartbeat: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		srv, err := bus.New(roadOf(b, st[1]), &bus.Config{Heartbeat: -1})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { srv.Close() })
		srv.Serve("echo", func(ctx context.Context, r *bus.Request) (any, error) { return r.Body, nil }, nil)
		ctx := context.Background()
		defer cpuMeter(b)()
		for range b.N {
			if _, err := c.Request(ctx, "e1", "echo", benchBody); err != nil {
				b.Fatal(err)
			}
		}
	})
}
