package bus_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/raet-go/raet/bus"
)

// Publish with a bbolt history, from 64 publishers at once: what each
// Publish acknowledges is on disk. BENCH_HISTORY_DIR chooses the disk
// (default the test's temporary directory):
// go test -run ^$ -bench BoltHistoryPublish ./bus/
func BenchmarkBoltHistoryPublish(b *testing.B) {
	dir := os.Getenv("BENCH_HISTORY_DIR")
	if dir == "" {
		dir = b.TempDir()
	} else {
		var err error
		if dir, err = os.MkdirTemp(dir, "bench"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	h, err := bus.NewBoltHistory(filepath.Join(dir, "history.db"), 1000, 0)
	if err != nil {
		b.Fatal(err)
	}
	tr, err := bus.NewMemNet(0).Transport("pub")
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	n, err := bus.New(tr, &bus.Config{History: h, Heartbeat: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer n.Close()
	b.SetParallelism(32) // with GOMAXPROCS 2: 64 publishers
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := n.Publish(ctx, bus.Pub{Subject: "bench.a", Body: benchBody}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publishes/s")
}
