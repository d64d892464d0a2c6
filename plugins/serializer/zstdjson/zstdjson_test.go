package zstdjson_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/raet-go/raet/plugins/internal/plugintest"
	"github.com/raet-go/raet/plugins/sdk"
	"github.com/raet-go/raet/plugins/sdk/sdktest"
	"github.com/raet-go/raet/plugins/serializer/zstdjson"
)

func newS(t testing.TB) *zstdjson.Serializer {
	s, err := zstdjson.New(zstd.SpeedDefault)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestContract(t *testing.T) { sdktest.Serializer(t, newS(t)) }

// The contract through go-plugin's in-process gRPC connection: the
// adapters and error translation.
func TestContractGRPC(t *testing.T) {
	s := plugintest.GRPC[sdk.Serializer](t, sdk.KindSerializer, &sdk.SerializerPlugin{Impl: newS(t), Version: sdk.LatestVersion})
	sdktest.Serializer(t, s)
}

// A small body that would decompress past MaxBodySize is refused.
func TestDecompressionBomb(t *testing.T) {
	s := newS(t)
	big := append([]byte(`{"x":"`), bytes.Repeat([]byte("a"), zstdjson.MaxBodySize+1)...)
	big = append(big, `"}`...)
	enc, err := s.Encode(context.Background(), [][]byte{big})
	if err != nil || enc[0].Err != nil {
		t.Fatal(err, enc[0].Err)
	}
	if len(enc[0].Data) > 1<<20 {
		t.Fatalf("%d bytes compressed", len(enc[0].Data))
	}
	dec, err := s.Decode(context.Background(), [][]byte{enc[0].Data})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(dec[0].Err, sdk.ErrMalformed) {
		t.Fatalf("a bomb decoded: %v", dec[0].Err)
	}
}

func TestNotMapping(t *testing.T) {
	s := newS(t)
	rs, _ := s.Encode(context.Background(), [][]byte{[]byte(`[1,2]`)})
	if !errors.Is(rs[0].Err, sdk.ErrNotMapping) {
		t.Fatalf("an array encoded: %v", rs[0].Err)
	}
}

// FuzzDecode: any body decodes to a JSON object or fails with
// ErrMalformed or ErrNotMapping, without panicking; what Encode made
// decodes back to itself.
func FuzzDecode(f *testing.F) {
	s := newS(f)
	for _, seed := range []string{`{"a":1}`, `{"route":{"src":["a",null,"y"]},"body":"` + strings.Repeat("x", 300) + `"}`, `[]`, `{`} {
		enc, _ := s.Encode(context.Background(), [][]byte{[]byte(seed)})
		f.Add(enc[0].Data)
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := s.Decode(context.Background(), [][]byte{b})
		if err != nil || len(rs) != 1 {
			t.Fatalf("%v %d", err, len(rs))
		}
		if r := rs[0]; r.Err != nil {
			if !errors.Is(r.Err, sdk.ErrMalformed) && !errors.Is(r.Err, sdk.ErrNotMapping) {
				t.Fatalf("an unclassified error: %v", r.Err)
			}
			return
		}
		if len(b) > 0 && (!json.Valid(rs[0].Data) || bytes.TrimLeft(rs[0].Data, " \t\r\n")[0] != '{') {
			t.Fatalf("decoded to %q", rs[0].Data)
		}
		enc, _ := s.Encode(context.Background(), [][]byte{rs[0].Data})
		back, _ := s.Decode(context.Background(), [][]byte{enc[0].Data})
		if !bytes.Equal(back[0].Data, rs[0].Data) {
			t.Fatal("no round trip")
		}
	})
}
