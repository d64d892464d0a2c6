package bus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/raet-go/raet/bus"
)

// Publish with a bbolt history keeping 1000 messages: what each Publish
// acknowledges is on disk. One publisher waits for a commit per message;
// many share their commits. BENCH_HISTORY_DIR chooses the disk (default
// the test's temporary directory):
// go test -run ^$ -bench BoltHistoryPublish ./bus/
func BenchmarkBoltHistoryPublish(b *testing.B) {
	for _, publishers := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("publishers=%d", publishers), func(b *testing.B) {
			n := boltBenchNode(b)
			ctx := context.Background()
			pub := bus.Pub{Subject: "bench.a", Body: benchBody}
			b.ReportAllocs()
			b.ResetTimer()
			if publishers == 1 {
				for range b.N {
					if _, err := n.Publish(ctx, pub); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.SetParallelism((publishers + 1) / 2) // with GOMAXPROCS 2
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := n.Publish(ctx, pub); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "publishes/s")
		})
	}
}

// boltBenchNode is a node over MemNet with a bbolt history, closed at
// cleanup.
func boltBenchNode(b *testing.B) *bus.Node {
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
	b.Cleanup(func() { tr.Close() })
	n, err := bus.New(tr, &bus.Config{History: h, Heartbeat: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}
