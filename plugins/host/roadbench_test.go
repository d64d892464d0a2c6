package host_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// BenchmarkRoadSerializer sends 1 KiB messages between two road stacks in
// this process, 64 Sends at once, with the built-in JSON serializer and
// with the zstdjson plugin as a subprocess: the stacks batch the plugin's
// calls (encoding for concurrent Sends, decoding for received bodies), so
// the plugin costs a call per batch, not per message. It reports msgs/s.
func BenchmarkRoadSerializer(b *testing.B) {
	ctx := context.Background()
	plug, err := benchHost(b).Serializer(ctx, "zstdjson")
	if err != nil {
		b.Fatal(err)
	}
	if err := plug.Register(nil); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(plug.Unregister)
	for _, tc := range []struct {
		name string
		ser  packet.Serializer
	}{{"builtin-json", nil}, {"zstdjson-plugin", plug}} {
		b.Run(tc.name, func(b *testing.B) {
			mk := func(name string, main bool, ser packet.Serializer) *road.Stack {
				s, err := road.New(&road.Config{Name: name, Main: main, Auto: keep.AutoAlways,
					Listen: "127.0.0.1:0", AlivePeriod: -1, Serializer: ser})
				return started(b, s, err)
			}
			m, o := mk("main", true, nil), mk("other", false, tc.ser)
			jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := o.Join(jctx, m.Addr().String()); err != nil {
				b.Fatal(err)
			}
			go func() {
				for range b.N {
					select {
					case <-m.Receive():
					case <-time.After(time.Minute):
						return
					}
				}
			}()
			sem := make(chan struct{}, 64)
			var wg sync.WaitGroup
			start := time.Now()
			for i := range b.N {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					if err := o.Send(ctx, "main", body1K(i)); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
			report(b, 1, start)
		})
	}
}
