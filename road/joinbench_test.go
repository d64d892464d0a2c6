package road_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

// BenchmarkJoinKeepOnDisk joins and allows b.N new estates (each on its
// own loopback address, 16 at a time) to a main whose keep is on disk, in
// the system's temporary directory: joins/s is the main's join throughput,
// keep writes included. (bench/fleet measures it with the main in its own
// process: go run ./bench/fleet -n 2000 -profiles fast.)
func BenchmarkJoinKeepOnDisk(b *testing.B) {
	m := roadtest.Start(b, road.Config{Name: "main", Main: true, KeepDir: b.TempDir(), Auto: keep.AutoAlways,
		Listen: "127.0.0.1:0", AlivePeriod: -1})
	clients := make([]*road.Stack, b.N)
	for i := range clients {
		clients[i] = roadtest.Start(b, road.Config{Name: fmt.Sprint("c", i), Auto: keep.AutoAlways, AlivePeriod: -1,
			Listen: fmt.Sprintf("127.3.%d.%d:0", i/250%250, 1+i%250)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	b.ResetTimer()
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	var failed sync.Map
	for i, c := range clients {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if _, err := c.Join(ctx, m.Addr().String()); err != nil {
				failed.Store(i, err)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	failed.Range(func(k, v any) bool { b.Errorf("join %v: %v", k, v); return false })
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "joins/s")
}
