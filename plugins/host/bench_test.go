package host_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/builtin"
	"github.com/raet-go/raet/plugins/coat/xchacha"
	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/plugins/queue/boltqueue"
	"github.com/raet-go/raet/plugins/sdk"
	"github.com/raet-go/raet/plugins/serializer/zstdjson"
	"github.com/raet-go/raet/road"
)

// The benchmarks compare, in one run, each kind's built-in in-process
// implementation, the example plugin's implementation in-process (through
// the same adapter), and the plugin as a subprocess, one message per call
// and 64 per call, with 1 KiB messages. They report msgs/s.

const batch = 64

var (
	benchOnce sync.Once
	benchH    *host.Host
	benchErr  error
)

// benchHost is one host with the three example plugins for every
// benchmark (closed by the process's end; plugins die with it).
func benchHost(b *testing.B) *host.Host {
	benchOnce.Do(func() {
		dir, err := filepathTemp()
		if err != nil {
			benchErr = err
			return
		}
		benchH, benchErr = host.New(&host.Config{Plugins: []host.Spec{zstdSpec(), xchachaSpec(),
			boltSpec(filepath.Join(dir, "bench.db"))}})
		if benchErr == nil {
			benchErr = benchH.Start(context.Background())
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchH
}

func body1K(i int) map[string]any {
	return map[string]any{"seq": int64(i), "route": "alpha→beta",
		"data": strings.Repeat(fmt.Sprintf("payload %02d, ", i%97), 90)[:980]}
}

func report(b *testing.B, per int, start time.Time) {
	b.ReportMetric(float64(b.N*per)/time.Since(start).Seconds(), "msgs/s")
}

// BenchmarkSerializer measures each direction: marshal (a Go mapping to
// the body on the wire) and unmarshal (back), and for the plugin also
// its own work alone (encode: the interchange JSON to the body; what the
// process boundary adds to in-process zstd).
func BenchmarkSerializer(b *testing.B) {
	ctx := context.Background()
	inproc, err := zstdjson.New(zstd.SpeedFastest)
	if err != nil {
		b.Fatal(err)
	}
	defer inproc.Close()
	inAdapter, _ := host.NewSerializer(ctx, inproc, 0)
	get := func(b *testing.B, name string) packet.Serializer {
		switch name {
		case "builtin-json":
			return packet.JSONBody{}
		case "zstdjson-inproc":
			return inAdapter
		}
		s, err := benchHost(b).Serializer(ctx, "zstdjson")
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	vs := make([]any, batch)
	for i := range vs {
		vs[i] = body1K(i)
	}
	for _, name := range []string{"builtin-json", "zstdjson-inproc", "zstdjson-plugin"} {
		b.Run(name+"/marshal/single", func(b *testing.B) {
			s := get(b, name)
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := s.Marshal(nil, vs[i%batch]); err != nil {
					b.Fatal(err)
				}
			}
			report(b, 1, start)
		})
		b.Run(name+"/unmarshal/single", func(b *testing.B) {
			s := get(b, name)
			enc, _ := s.Marshal(nil, vs[0])
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var m map[string]any
				if err := s.Unmarshal(enc, &m); err != nil {
					b.Fatal(err)
				}
			}
			report(b, 1, start)
		})
		if name == "builtin-json" {
			continue // no batch API: batching buys nothing in-process
		}
		b.Run(name+"/marshal/batch64", func(b *testing.B) {
			s := get(b, name).(*host.Serializer)
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := s.MarshalBatch(ctx, vs); err != nil {
					b.Fatal(err)
				}
			}
			report(b, batch, start)
		})
		b.Run(name+"/unmarshal/batch64", func(b *testing.B) {
			s := get(b, name).(*host.Serializer)
			enc, _ := s.MarshalBatch(ctx, vs)
			start := time.Now()
			for i := 0; i < b.N; i++ {
				out := make([]any, batch)
				for j := range out {
					out[j] = new(map[string]any)
				}
				if err := s.UnmarshalBatch(ctx, enc, out); err != nil {
					b.Fatal(err)
				}
			}
			report(b, batch, start)
		})
	}
	// The plugin's own work, without the host's JSON: interchange bytes in,
	// body bytes out, in-process and across the process boundary.
	jsons := make([][]byte, 4*batch)
	for i := range jsons {
		jsons[i], _ = packet.JSONBody{}.Marshal(nil, body1K(i))
	}
	for _, name := range []string{"inproc", "plugin"} {
		for _, n := range []int{1, batch, 4 * batch} {
			b.Run(fmt.Sprintf("zstdjson-%s/encode-only/batch%d", name, n), func(b *testing.B) {
				var s sdkSerializer = inproc
				if name == "plugin" {
					if s, err = benchHost(b).SerializerPlugin(ctx, "zstdjson"); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if _, err := s.Encode(ctx, jsons[:n]); err != nil {
						b.Fatal(err)
					}
				}
				report(b, n, start)
			})
		}
	}
}

type sdkSerializer = interface {
	Encode(context.Context, [][]byte) ([]sdk.Result, error)
}

func BenchmarkCoat(b *testing.B) {
	ctx := context.Background()
	aPriv, aPub := keyPair(b)
	bPriv, bPub := keyPair(b)
	msg := make([]byte, 1024)
	rand.Read(msg)
	inCoat, _ := host.NewCoat(ctx, xchacha.New(nil), 0)
	for _, name := range []string{"builtin-nacl", "xchacha-inproc", "xchacha-plugin"} {
		var sealer, opener packet.Coat
		var bs, bo *host.SessionCoat
		setup := func(b *testing.B) {
			switch name {
			case "builtin-nacl":
				sealer, _ = builtin.NaClCoat(aPriv, bPub)
				opener, _ = builtin.NaClCoat(bPriv, aPub)
				return
			case "xchacha-inproc":
				bs, _ = inCoat.Session(aPriv, bPub)
				bo, _ = inCoat.Session(bPriv, aPub)
			default:
				c, err := benchHost(b).Coat(ctx, "xchacha")
				if err != nil {
					b.Fatal(err)
				}
				bs, _ = c.Session(aPriv, bPub)
				bo, _ = c.Session(bPriv, aPub)
			}
			sealer, opener = bs, bo
		}
		b.Run(name+"/single", func(b *testing.B) {
			setup(b)
			var buf, out []byte
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var err error
				if buf, err = sealer.Seal(buf[:0], msg); err != nil {
					b.Fatal(err)
				}
				if out, err = opener.Open(out[:0], buf); err != nil {
					b.Fatal(err)
				}
			}
			report(b, 1, start)
		})
		if name == "builtin-nacl" {
			continue
		}
		b.Run(name+"/batch64", func(b *testing.B) {
			setup(b)
			msgs := make([][]byte, batch)
			for i := range msgs {
				msgs[i] = msg
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				coats, err := bs.SealBatch(ctx, msgs)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := bo.OpenBatch(ctx, coats); err != nil {
					b.Fatal(err)
				}
			}
			report(b, batch, start)
		})
	}
}

func BenchmarkQueue(b *testing.B) {
	ctx := context.Background()
	body := make([]byte, 1024)
	for _, name := range []string{"builtin-memory", "bolt-inproc", "bolt-plugin"} {
		var q road.Queue
		var hq *host.Queue
		setup := func(b *testing.B) {
			switch name {
			case "builtin-memory":
				q = builtin.NewMemQueue(0, 0)
				return
			case "bolt-inproc":
				bq, err := boltqueue.Open(filepath.Join(b.TempDir(), "q.db"), boltqueue.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { bq.Close() })
				hq, _ = host.NewQueue(ctx, bq, 0)
			default:
				var err error
				if hq, err = benchHost(b).Queue(ctx, "bolt"); err != nil {
					b.Fatal(err)
				}
			}
			q = hq
		}
		b.Run(name+"/single", func(b *testing.B) {
			setup(b)
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				id, err := q.Put("remote", codec.BodyKindJSON, body)
				if err != nil {
					b.Fatal(err)
				}
				if err := q.Done(id); err != nil {
					b.Fatal(err)
				}
			}
			report(b, 1, start)
		})
		if name == "builtin-memory" {
			continue
		}
		b.Run(name+"/batch64", func(b *testing.B) {
			setup(b)
			msgs := make([]road.QueuedMessage, batch)
			for i := range msgs {
				msgs[i] = road.QueuedMessage{Remote: "remote", Kind: codec.BodyKindJSON, Body: body}
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				ids, err := hq.PutBatch(ctx, msgs)
				if err != nil {
					b.Fatal(err)
				}
				if err := hq.DoneBatch(ctx, ids); err != nil {
					b.Fatal(err)
				}
			}
			report(b, batch, start)
		})
	}
}
