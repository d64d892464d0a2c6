// Package sdktest holds the contract tests of the plugin interfaces: run
// them on an implementation in-process, through go-plugin's test
// connection, or against a real plugin subprocess, and it behaves as an
// estate needs. Plugin authors call them from their own tests:
//
//	func TestContract(t *testing.T) { sdktest.Serializer(t, mySerializer{}) }
package sdktest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/sdk"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// samples are mappings every serializer must carry.
func samples() []map[string]any {
	return []map[string]any{
		{"a": int64(1)},
		{"route": map[string]any{"src": []any{"alpha", nil, "yard"}, "dst": []any{"beta", nil, "x"}}, "content": "hi"},
		{"unicode": "héllo ✓ 日本", "f": 1.5, "t": true, "n": nil, "neg": int64(-7)},
		{"big": strings.Repeat("raet ", 4000)},
	}
}

// Serializer checks s: its Info, round trips of sample mappings through
// its interchange kind, empty bodies, per-item errors in a mixed batch,
// malformed input, and concurrent use.
func Serializer(t *testing.T, s sdk.Serializer) {
	t.Helper()
	ctx := ctxT(t)
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	switch info.Kind {
	case codec.BodyKindNada, codec.BodyKindJSON, codec.BodyKindRaw, codec.BodyKindMsgpack, codec.BodyKindCBOR:
		t.Fatalf("Info: body kind %v is built in", info.Kind)
	}
	inter, err := packet.Builtin(info.Interchange)
	if err != nil || (info.Interchange != codec.BodyKindJSON && info.Interchange != codec.BodyKindMsgpack && info.Interchange != codec.BodyKindCBOR) {
		t.Fatalf("Info: interchange %v is not json, msgpack or cbor", info.Interchange)
	}
	var in [][]byte
	var want []map[string]any
	for _, m := range samples() {
		b, err := inter.Marshal(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, b)
		var back map[string]any
		if err := inter.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		want = append(want, back)
	}
	t.Run("roundtrip", func(t *testing.T) {
		enc := results(t, "Encode", len(in))(s.Encode(ctx, in))
		dec := results(t, "Decode", len(in))(s.Decode(ctx, enc))
		for i := range dec {
			var got map[string]any
			if err := inter.Unmarshal(dec[i], &got); err != nil {
				t.Fatalf("item %d: the decoded body is not %v: %v", i, info.Interchange, err)
			}
			if !reflect.DeepEqual(got, want[i]) {
				t.Fatalf("item %d: got %v, want %v", i, got, want[i])
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		for _, op := range []struct {
			name string
			fn   func(context.Context, [][]byte) ([]sdk.Result, error)
		}{{"Encode", s.Encode}, {"Decode", s.Decode}} {
			out := results(t, op.name, 2)(op.fn(ctx, [][]byte{nil, {}}))
			if len(out[0])+len(out[1]) != 0 {
				t.Fatalf("%s: the empty mapping gave %d and %d bytes", op.name, len(out[0]), len(out[1]))
			}
		}
		rs, err := s.Encode(ctx, nil)
		if err != nil || len(rs) != 0 {
			t.Fatalf("Encode of no items: %v, %v", rs, err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		enc := results(t, "Encode", 1)(s.Encode(ctx, in[:1]))
		junk := [][]byte{enc[0], []byte("\x00\xffnot a body at all"), enc[0]}
		rs, err := s.Decode(ctx, junk)
		if err != nil {
			t.Fatalf("Decode: a bad item failed the whole batch: %v", err)
		}
		if len(rs) != 3 {
			t.Fatalf("Decode: %d results for 3 items", len(rs))
		}
		if rs[0].Err != nil || rs[2].Err != nil {
			t.Fatalf("Decode: good items failed: %v, %v", rs[0].Err, rs[2].Err)
		}
		if !errors.Is(rs[1].Err, sdk.ErrMalformed) && !errors.Is(rs[1].Err, sdk.ErrNotMapping) {
			t.Fatalf("Decode of junk: %v, want an error wrapping sdk.ErrMalformed", rs[1].Err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		concurrently(t, func() error {
			enc, err := s.Encode(ctx, in[:2])
			if err != nil {
				return err
			}
			dec, err := s.Decode(ctx, [][]byte{enc[0].Data, enc[1].Data})
			if err != nil {
				return err
			}
			var got map[string]any
			if err := inter.Unmarshal(dec[1].Data, &got); err != nil {
				return err
			}
			if !reflect.DeepEqual(got, want[1]) {
				return fmt.Errorf("concurrent round trip: got %v", got)
			}
			return nil
		})
	})
}

// results checks a batch call and returns the data of its items.
func results(t *testing.T, op string, n int) func([]sdk.Result, error) [][]byte {
	return func(rs []sdk.Result, err error) [][]byte {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if len(rs) != n {
			t.Fatalf("%s: %d results for %d items", op, len(rs), n)
		}
		out := make([][]byte, n)
		for i, r := range rs {
			if r.Err != nil {
				t.Fatalf("%s: item %d: %v", op, i, r.Err)
			}
			out[i] = r.Data
		}
		return out
	}
}

// concurrently runs fn from 8 goroutines, 20 times each.
func concurrently(t *testing.T, fn func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if err := fn(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func randomKey(t *testing.T) *sdk.SessionKey {
	var k sdk.SessionKey
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	return &k
}

// Coat checks c: its Info, round trips, sizes, fresh nonces, empty
// bodies, tampered and short coats, a wrong key, a zero key, and
// concurrent use.
func Coat(t *testing.T, c sdk.Coat) {
	t.Helper()
	ctx := ctxT(t)
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Kind == codec.CoatKindNada || info.Kind == codec.CoatKindNaCl {
		t.Fatalf("Info: coat kind %v is built in", info.Kind)
	}
	key := randomKey(t)
	bodies := [][]byte{[]byte("a"), []byte(`{"hello":"world"}`), bytes.Repeat([]byte{7}, 64<<10)}
	t.Run("roundtrip", func(t *testing.T) {
		coats := results(t, "Seal", len(bodies))(c.Seal(ctx, key, bodies))
		for i := range coats {
			if len(coats[i]) != len(bodies[i])+info.Overhead {
				t.Fatalf("item %d: a coat of %d bytes for %d, overhead %d", i, len(coats[i]), len(bodies[i]), info.Overhead)
			}
			if bytes.Contains(coats[i], bodies[i][:min(len(bodies[i]), 16)]) && len(bodies[i]) >= 16 {
				t.Fatalf("item %d: the coat shows the body", i)
			}
		}
		again := results(t, "Seal", 1)(c.Seal(ctx, key, bodies[1:2]))
		if bytes.Equal(again[0], coats[1]) {
			t.Fatal("two seals of one body are equal: no fresh nonce")
		}
		plain := results(t, "Open", len(coats))(c.Open(ctx, key, coats))
		for i := range plain {
			if !bytes.Equal(plain[i], bodies[i]) {
				t.Fatalf("item %d: opened %q", i, plain[i][:min(len(plain[i]), 32)])
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		for _, op := range []struct {
			name string
			fn   func(context.Context, *sdk.SessionKey, [][]byte) ([]sdk.Result, error)
		}{{"Seal", c.Seal}, {"Open", c.Open}} {
			out := results(t, op.name, 1)(op.fn(ctx, key, [][]byte{nil}))
			if len(out[0]) != 0 {
				t.Fatalf("%s: empty gave %d bytes", op.name, len(out[0]))
			}
		}
	})
	t.Run("tampered", func(t *testing.T) {
		coats := results(t, "Seal", 1)(c.Seal(ctx, key, bodies[1:2]))
		bad := bytes.Clone(coats[0])
		bad[0] ^= 1
		short := coats[0][:info.Overhead-1]
		rs, err := c.Open(ctx, key, [][]byte{coats[0], bad, short})
		if err != nil || len(rs) != 3 {
			t.Fatalf("Open: %v (%d results)", err, len(rs))
		}
		if rs[0].Err != nil {
			t.Fatalf("a good coat failed: %v", rs[0].Err)
		}
		if !errors.Is(rs[1].Err, sdk.ErrCoatOpen) {
			t.Fatalf("tampered: %v, want sdk.ErrCoatOpen", rs[1].Err)
		}
		if !errors.Is(rs[2].Err, sdk.ErrCoatShort) {
			t.Fatalf("short: %v, want sdk.ErrCoatShort", rs[2].Err)
		}
		rs, err = c.Open(ctx, randomKey(t), coats)
		if err == nil && (len(rs) != 1 || !errors.Is(rs[0].Err, sdk.ErrCoatOpen)) {
			t.Fatalf("wrong key: %+v", rs)
		}
	})
	t.Run("zerokey", func(t *testing.T) {
		rs, err := c.Seal(ctx, &sdk.SessionKey{}, bodies[:1])
		if err == nil && (len(rs) != 1 || rs[0].Err == nil) {
			t.Fatal("a zero key sealed")
		}
		if err != nil && !errors.Is(err, sdk.ErrWeakKey) {
			t.Fatalf("zero key: %v, want sdk.ErrWeakKey", err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		concurrently(t, func() error {
			k := randomKey(t)
			rs, err := c.Seal(ctx, k, bodies[:2])
			if err != nil {
				return err
			}
			back, err := c.Open(ctx, k, [][]byte{rs[0].Data, rs[1].Data})
			if err != nil {
				return err
			}
			if !bytes.Equal(back[1].Data, bodies[1]) {
				return fmt.Errorf("opened %q", back[1].Data)
			}
			return nil
		})
	})
}

// Queue checks q, which must be empty: ids that grow, Pending in order
// and paged, Done (repeated and unknown ids too), atomic batches, and
// concurrent puts. It leaves q empty.
func Queue(t *testing.T, q sdk.Queue) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := q.Info(ctx); err != nil {
		t.Fatalf("Info: %v", err)
	}
	pending := func() []sdk.Message {
		t.Helper()
		ms, err := q.Pending(ctx, 0, 0)
		if err != nil {
			t.Fatalf("Pending: %v", err)
		}
		return ms
	}
	if n := len(pending()); n != 0 {
		t.Fatalf("the queue under test holds %d messages; give it an empty one", n)
	}
	msgs := []sdk.Message{
		{Remote: "alpha", Kind: codec.BodyKindJSON, Body: []byte(`{"n":1}`)},
		{Remote: "beta", Kind: codec.BodyKindZstdJSON, Body: bytes.Repeat([]byte{0, 1, 2}, 1000)},
		{Remote: "alpha", Kind: codec.BodyKindMsgpack, Body: nil},
	}
	ids, err := q.Put(ctx, msgs)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if len(ids) != 3 || !(ids[0] < ids[1] && ids[1] < ids[2]) {
		t.Fatalf("Put: ids %v do not grow", ids)
	}
	got := pending()
	if len(got) != 3 {
		t.Fatalf("Pending: %d messages, want 3", len(got))
	}
	for i, m := range got {
		if m.ID != ids[i] || m.Remote != msgs[i].Remote || m.Kind != msgs[i].Kind || !bytes.Equal(m.Body, msgs[i].Body) {
			t.Fatalf("Pending[%d] = %+v, want %+v with id %d", i, m, msgs[i], ids[i])
		}
	}
	page, err := q.Pending(ctx, ids[0], 1)
	if err != nil || len(page) < 1 || page[0].ID != ids[1] {
		t.Fatalf("Pending after %d limit 1: %+v, %v", ids[0], page, err)
	}
	if err := q.Done(ctx, []uint64{ids[1]}); err != nil {
		t.Fatalf("Done: %v", err)
	}
	if err := q.Done(ctx, []uint64{ids[1], 1 << 60}); err != nil {
		t.Fatalf("Done of an id done already or unknown: %v", err)
	}
	got = pending()
	if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[2] {
		t.Fatalf("after Done: %+v", got)
	}
	more, err := q.Put(ctx, msgs[:1])
	if err != nil || len(more) != 1 || more[0] <= ids[2] {
		t.Fatalf("a later Put: %v, %v (want an id above %d)", more, err, ids[2])
	}
	if err := q.Done(ctx, []uint64{ids[0], ids[2], more[0]}); err != nil {
		t.Fatal(err)
	}
	t.Run("concurrent", func(t *testing.T) {
		var mu sync.Mutex
		seen := map[uint64]bool{}
		concurrently(t, func() error {
			ids, err := q.Put(ctx, msgs[:2])
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if seen[id] {
					return fmt.Errorf("id %d given twice", id)
				}
				seen[id] = true
			}
			return nil
		})
		var all []uint64
		for id := range seen {
			all = append(all, id)
		}
		if n := len(pending()); n != len(all) {
			t.Fatalf("%d pending after %d puts", n, len(all))
		}
		if err := q.Done(ctx, all); err != nil {
			t.Fatal(err)
		}
	})
	if n := len(pending()); n != 0 {
		t.Fatalf("%d messages left", n)
	}
}
