// Package zstdjson is a serializer plugin: body kind zstdjson (5), a JSON
// mapping compressed with zstd (github.com/klauspost/compress/zstd). Large
// textual bodies shrink several times, which matters on a road of
// 1024-byte packets. Its main is cmd/raet-serializer-zstdjson; the
// package is importable so that tests and benchmarks can run it in-process.
package zstdjson

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/sdk"
)

// Version of this plugin.
const Version = "1.0.0"

// MaxBodySize bounds a decompressed body (what an estate reassembles by
// default), so that a small body cannot decompress into gigabytes.
const MaxBodySize = 64 << 20

// Serializer implements sdk.Serializer. It is safe for concurrent use.
type Serializer struct {
	enc *zstd.Encoder
	dec *zstd.Decoder
}

var _ sdk.Serializer = (*Serializer)(nil)

// New makes a Serializer compressing at level (zstd.SpeedFastest, ...).
func New(level zstd.EncoderLevel) (*Serializer, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level))
	if err != nil {
		return nil, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxBodySize), zstd.WithDecoderMaxWindow(MaxBodySize))
	if err != nil {
		enc.Close()
		return nil, err
	}
	return &Serializer{enc: enc, dec: dec}, nil
}

// Close releases the coders.
func (s *Serializer) Close() {
	s.enc.Close()
	s.dec.Close()
}

// Info implements sdk.Serializer: kind zstdjson, interchange json.
func (s *Serializer) Info(context.Context) (sdk.SerializerInfo, error) {
	return sdk.SerializerInfo{Kind: codec.BodyKindZstdJSON, Name: "zstdjson", Interchange: codec.BodyKindJSON, Version: Version}, nil
}

// Encode compresses each JSON mapping; the empty body stays empty. A large
// batch is spread over the cores.
func (s *Serializer) Encode(ctx context.Context, bodies [][]byte) ([]sdk.Result, error) {
	out := make([]sdk.Result, len(bodies))
	each(len(bodies), func(i int) {
		b := bodies[i]
		if len(b) == 0 {
			return
		}
		if !isObject(b) {
			out[i].Err = fmt.Errorf("%w: the JSON is not an object", sdk.ErrNotMapping)
			return
		}
		out[i].Data = s.enc.EncodeAll(b, make([]byte, 0, len(b)/2+64))
	})
	return out, nil
}

// Decode decompresses each body and checks that it is a JSON mapping. A
// large batch is spread over the cores.
func (s *Serializer) Decode(ctx context.Context, bodies [][]byte) ([]sdk.Result, error) {
	out := make([]sdk.Result, len(bodies))
	each(len(bodies), func(i int) {
		b := bodies[i]
		if len(b) == 0 {
			return
		}
		plain, err := s.dec.DecodeAll(b, nil)
		switch {
		case err != nil:
			out[i].Err = fmt.Errorf("%w: zstd: %w", sdk.ErrMalformed, err)
		case !isObject(plain):
			out[i].Err = fmt.Errorf("%w: the JSON is not an object", sdk.ErrNotMapping)
		case !json.Valid(plain):
			out[i].Err = fmt.Errorf("%w: invalid JSON inside", sdk.ErrMalformed)
		default:
			out[i].Data = plain
		}
	})
	return out, nil
}

// parallelFrom is the batch size from which each spreads the work.
const parallelFrom = 8

// each calls f(0) … f(n-1), on up to GOMAXPROCS goroutines when n is large.
// The coders are safe for concurrent use.
func each(n int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/parallelFrom)
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				f(i)
			}
		})
	}
	wg.Wait()
}

func isObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}
