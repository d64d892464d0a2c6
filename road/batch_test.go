package road_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// slowSerializer is a packet.BatchSerializer standing in for a serializer
// plugin: JSON behind a "slow:" prefix, every call delayed like a call to
// another process, with its calls counted. A body with the key "bad" does
// not decode; with hangDecode set, decode calls block until their context
// ends.
type slowSerializer struct {
	delay      time.Duration
	hangDecode bool
	itemized   bool         // batch errors say which items failed (ItemErrors)
	singles    atomic.Int32 // Unmarshal calls from outside

	mu                           sync.Mutex
	marshalCalls, unmarshalCalls int
	inCall                       atomic.Bool
}

var _ packet.BatchSerializer = (*slowSerializer)(nil)

const slowPrefix = "slow:"

func (s *slowSerializer) Kind() codec.BodyKind { return codec.BodyKindZstdJSON }

func (s *slowSerializer) Marshal(dst []byte, v any) ([]byte, error) {
	out, err := packet.JSONBody{}.Marshal(append(dst, slowPrefix...), v)
	if err != nil {
		return dst, err
	}
	return out, nil
}

func (s *slowSerializer) Unmarshal(data []byte, v any) error {
	s.singles.Add(1)
	return s.decode(data, v)
}

func (s *slowSerializer) decode(data []byte, v any) error {
	rest, ok := bytes.CutPrefix(data, []byte(slowPrefix))
	if !ok {
		return errors.New("slow: no prefix")
	}
	if bytes.Contains(rest, []byte(`"bad"`)) {
		return errors.New("slow: a bad body")
	}
	return packet.JSONBody{}.Unmarshal(rest, v)
}

func (s *slowSerializer) call(ctx context.Context, n *int, hang bool) error {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
	s.inCall.Store(true)
	defer s.inCall.Store(false)
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case <-time.After(s.delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowSerializer) MarshalBatch(ctx context.Context, vs []any) ([][]byte, error) {
	if err := s.call(ctx, &s.marshalCalls, false); err != nil {
		return nil, err
	}
	out := make([][]byte, len(vs))
	for i, v := range vs {
		var err error
		if out[i], err = s.Marshal(nil, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *slowSerializer) UnmarshalBatch(ctx context.Context, bodies [][]byte, vs []any) error {
	if err := s.call(ctx, &s.unmarshalCalls, s.hangDecode); err != nil {
		return err
	}
	var first error
	errs := make(itemErrors, len(bodies))
	for i, b := range bodies {
		if errs[i] = s.decode(b, vs[i]); errs[i] != nil && first == nil {
			first = errs[i]
		}
	}
	if first != nil && s.itemized {
		return errs
	}
	return first
}

// itemErrors is a batch error that says which items failed.
type itemErrors []error

func (e itemErrors) Error() string       { return "some items failed" }
func (e itemErrors) ItemErrors() []error { return e }

func (s *slowSerializer) calls() (m, u int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marshalCalls, s.unmarshalCalls
}

// withSlowSerializer registers ser for received bodies of its kind and
// returns a main and an other stack, the other sending with ser.
func withSlowSerializer(t *testing.T, ser *slowSerializer) (*road.Stack, *road.Stack) {
	t.Helper()
	if err := packet.RegisterSerializer(ser); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { packet.UnregisterSerializer(ser.Kind()) })
	return joined(t, road.Config{}, road.Config{Serializer: ser})
}

// sendAll sends bodies concurrently from o to "main" and returns each
// Send's error.
func sendAll(o *road.Stack, ctx context.Context, bodies []map[string]any) []error {
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Go(func() { errs[i] = o.Send(ctx, "main", b) })
	}
	wg.Wait()
	return errs
}

// TestBatchSerializerBatchesCalls: concurrent Sends through a slow
// serializer share its calls, both to encode and to decode, and every
// message arrives decoded.
func TestBatchSerializerBatchesCalls(t *testing.T) {
	ser := &slowSerializer{delay: 5 * time.Millisecond}
	m, o := withSlowSerializer(t, ser)
	const n = 64
	bodies := make([]map[string]any, n)
	for i := range bodies {
		bodies[i] = map[string]any{"n": i, "text": fmt.Sprint("message ", i)}
	}
	for i, err := range sendAll(o, ctxT(t, 30*time.Second), bodies) {
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	seen := map[int64]bool{}
	for range n {
		msg := recvOne(t, m, 10*time.Second)
		if msg.Kind != ser.Kind() || !bytes.HasPrefix(msg.Raw, []byte(slowPrefix)) {
			t.Fatalf("message of kind %v, raw %q", msg.Kind, msg.Raw)
		}
		k, _ := msg.Body["n"].(int64)
		if msg.Body["text"] != fmt.Sprint("message ", k) || seen[k] {
			t.Fatalf("body %v (seen: %v)", msg.Body, seen[k])
		}
		seen[k] = true
	}
	mc, uc := ser.calls()
	t.Logf("%d messages: %d encode calls, %d decode calls", n, mc, uc)
	if mc > n/2 || uc > n/2 {
		t.Errorf("%d messages made %d encode and %d decode calls: not batched", n, mc, uc)
	}
}

// TestBatchSerializerBadBody: a body that does not decode is refused (its
// Send fails with ErrRejected) while the others of its batch arrive. The
// failed item is found from the batch error's ItemErrors, or else by
// decoding each body alone.
func TestBatchSerializerBadBody(t *testing.T) {
	for _, itemized := range []bool{false, true} {
		t.Run(fmt.Sprint("itemized=", itemized), func(t *testing.T) {
			ser := &slowSerializer{delay: 2 * time.Millisecond, itemized: itemized}
			m, o := withSlowSerializer(t, ser)
			bodies := []map[string]any{{"n": 0}, {"bad": true}, {"n": 2}, {"n": 3}}
			errs := sendAll(o, ctxT(t, 30*time.Second), bodies)
			for i, err := range errs {
				if (i == 1) != errors.Is(err, road.ErrRejected) || (i != 1 && err != nil) {
					t.Errorf("send %d: %v", i, err)
				}
			}
			for range 3 {
				if msg := recvOne(t, m, 10*time.Second); msg.Body["bad"] != nil {
					t.Fatalf("the bad body was delivered: %v", msg.Body)
				}
			}
			c, err := m.Counters(ctxT(t, 5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if c.MessagesIn != 3 {
				t.Errorf("MessagesIn = %d, want 3", c.MessagesIn)
			}
			if n := ser.singles.Load(); (n == 0) != itemized {
				t.Errorf("%d bodies decoded alone (itemized errors: %v)", n, itemized)
			}
		})
	}
}

// TestBatchSerializerHungDecode: while the decoding serializer hangs, the
// stack goes on answering; the call's deadline fails the message.
func TestBatchSerializerHungDecode(t *testing.T) {
	ser := &slowSerializer{hangDecode: true}
	m, o := withSlowSerializer(t, ser)
	res := make(chan error, 1)
	go func() {
		ctx := ctxT(t, 30*time.Second)
		res <- o.Send(ctx, "main", map[string]any{"n": 1})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for _, u := ser.calls(); u == 0; _, u = ser.calls() {
		if time.Now().After(deadline) {
			t.Fatal("no decode call came")
		}
		time.Sleep(time.Millisecond)
	}
	if !ser.inCall.Load() {
		t.Fatal("the decode call did not hang")
	}
	if _, err := m.Remotes(ctxT(t, time.Second)); err != nil {
		t.Fatalf("the receiving stack does not answer while its serializer hangs: %v", err)
	}
	if !ser.inCall.Load() {
		t.Fatal("the decode call ended before the stack was asked")
	}
	if err := <-res; !errors.Is(err, road.ErrRejected) {
		t.Fatalf("send through a hung decoder: %v, want ErrRejected", err)
	}
}
