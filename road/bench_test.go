package road_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/nacl/box"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

var benchSizes = []struct {
	name string
	n    int
}{{"64B", 64}, {"1KiB", 1024}, {"16KiB", 16 << 10}, {"256KiB", 256 << 10}}

// BenchmarkRoad measures messages/s and round trips (Send until done) over
// loopback UDP between two stacks, 16 messages in flight: "stack" with the
// reference-compatible profile (native heads, JSON bodies, Ed25519 on every
// packet of at most 1024 bytes), "fast" with the profile two raet-go estates
// negotiate (binary heads, an AEAD coat, 1400-byte packets). Beside each size, "ceiling" is the crypto
// the same message costs on one goroutine: the body's box seal and open, and
// an Ed25519 sign and verify for each of its packets and for the done.
func BenchmarkRoad(b *testing.B) {
	m, o := joinedB(b, road.ProfileReference, road.AEADPrefer)
	fm, fo := joinedB(b, road.ProfileAuto, road.AEADPrefer)
	for _, sz := range benchSizes {
		body := map[string]any{"data": strings.Repeat("x", sz.n)}
		b.Run(sz.name+"/stack", func(b *testing.B) { benchSend(b, m, o, body, sz.n) })
		b.Run(sz.name+"/fast", func(b *testing.B) { benchSend(b, fm, fo, body, sz.n) })
		b.Run(sz.name+"/ceiling", func(b *testing.B) { cryptoCeiling(b, sz.n) })
	}
}

// BenchmarkFastCoats compares the fast profile's two coats side by side in
// one run, as BenchmarkRoad measures them (16 in flight): "mac", the NaCl
// coat sealed once per message with a MAC foot on every packet, and
// "aead", an AEAD coat sealing every packet on its own with no foot
// (docs/aead.md). mallocs/msg and mallocs/pkt are the whole process's: a
// 16 KiB message is a dozen packets, and costs no more allocations per
// packet than it has segments to reassemble.
func BenchmarkFastCoats(b *testing.B) {
	mm, mo := joinedB(b, road.ProfileAuto, road.AEADRefuse)
	am, ao := joinedB(b, road.ProfileAuto, road.AEADPrefer)
	for _, sz := range benchSizes[:3] {
		body := map[string]any{"data": strings.Repeat("x", sz.n)}
		b.Run(sz.name+"/mac", func(b *testing.B) { benchSend(b, mm, mo, body, sz.n) })
		b.Run(sz.name+"/aead", func(b *testing.B) { benchSend(b, am, ao, body, sz.n) })
	}
}

// benchSend sends b.N messages from o to m, 16 in flight. Beside the
// rates it reports the packets both stacks sent per message and the heap
// allocations of the whole process per message and per packet
// ("mallocs/msg", "mallocs/pkt") and the bytes they take per message
// ("heapB/msg"): comparing sizes shows what a packet
// costs beyond its message.
func benchSend(b *testing.B, m, o *road.Stack, body map[string]any, size int) {
	{
		{
			ctx := context.Background()
			pkts0 := packetsOut(b, m) + packetsOut(b, o)
			var ms0 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			go drain(ctx, m, b.N)
			var mu sync.Mutex
			rtts := make([]time.Duration, 0, b.N)
			sem := make(chan struct{}, 16)
			var wg sync.WaitGroup
			b.SetBytes(int64(size))
			b.ResetTimer()
			for range b.N {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-sem; wg.Done() }()
					t0 := time.Now()
					if err := o.Send(ctx, "main", body); err != nil {
						b.Error(err)
					}
					mu.Lock()
					rtts = append(rtts, time.Since(t0))
					mu.Unlock()
				}()
			}
			wg.Wait()
			b.StopTimer()
			var ms1 runtime.MemStats
			runtime.ReadMemStats(&ms1)
			pkts := packetsOut(b, m) + packetsOut(b, o) - pkts0
			b.ReportMetric(float64(pkts)/float64(b.N), "pkts/op")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(pkts), "mallocs/pkt")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "mallocs/msg")
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(b.N), "heapB/msg")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			slices.Sort(rtts)
			b.ReportMetric(float64(rtts[len(rtts)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(rtts[len(rtts)*99/100].Microseconds()), "p99-µs")
		}
	}
}

// packetsOut is how many packets s has sent.
func packetsOut(b *testing.B, s *road.Stack) uint64 {
	c, err := s.Counters(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var n uint64
	for _, v := range c.PacketsOut {
		n += v
	}
	return n + c.Retransmits
}

func drain(ctx context.Context, s *road.Stack, n int) {
	for range n {
		select {
		case <-s.Receive():
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
			return
		}
	}
}

// cryptoCeiling does, on one goroutine, the crypto of one message of n
// bytes: seal and open of the body, and sign and verify of each packet
// (segments of at most 1024 bytes, and the done).
func cryptoCeiling(b *testing.B, n int) {
	pubA, privA, _ := box.GenerateKey(rand.Reader)
	pubB, privB, _ := box.GenerateKey(rand.Reader)
	var kA, kB [32]byte
	box.Precompute(&kA, pubB, privA)
	box.Precompute(&kB, pubA, privB)
	_, sk, _ := ed25519.GenerateKey(rand.Reader)
	pk := sk.Public().(ed25519.PublicKey)
	body := make([]byte, n+12) // {"data":"…"}
	var nonce [24]byte
	const segPayload = 1024 - 72 - 27 - 64
	segs := (len(body) + 40 + segPayload - 1) / segPayload
	pkt := make([]byte, 1024)
	done := make([]byte, 72+64)
	sealed := make([]byte, 0, len(body)+64)
	opened := make([]byte, 0, len(body)+64)
	b.SetBytes(int64(n))
	b.ReportMetric(float64(segs), "packets")
	for b.Loop() {
		s := box.SealAfterPrecomputation(sealed[:0], body, &nonce, &kA)
		for range segs {
			sig := ed25519.Sign(sk, pkt)
			if !ed25519.Verify(pk, pkt, sig) {
				b.Fatal("verify")
			}
		}
		if _, ok := box.OpenAfterPrecomputation(opened[:0], s, &nonce, &kB); !ok {
			b.Fatal("open")
		}
		sig := ed25519.Sign(sk, done)
		if !ed25519.Verify(pk, done, sig) {
			b.Fatal("verify")
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func joinedB(b *testing.B, prof road.Profile, aead road.AEADMode) (*road.Stack, *road.Stack) {
	b.Helper()
	mk := func(cfg road.Config) *road.Stack {
		cfg.Auto, cfg.AlivePeriod = 2, -1
		cfg.HeadKind, cfg.BodyKind, cfg.Profile, cfg.AEAD = codec.HeadKindRaet, codec.BodyKindJSON, prof, aead
		return roadtest.Start(b, cfg)
	}
	m := mk(road.Config{Name: "main", Main: true})
	o := mk(road.Config{Name: "other"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := o.Join(ctx, m.Addr().String()); err != nil {
		b.Fatal(fmt.Errorf("join: %w", err))
	}
	return m, o
}
