//go:build unix

package lane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/internal/testutil"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/builtin"
)

// The serializer of a plugin's kind in these tests is in-process and
// light, so that the package's test binary (and BenchmarkLane) carries no
// plugin machinery; plugins/host runs the lane with host.Serializer over
// the zstdjson plugin, in-process and as a subprocess.

// reverseKind is the body kind of reverse: a plugin's kind that no spec
// declares (the lane carries it by number).
const reverseKind codec.BodyKind = 200

var reversePK = codec.PackKind(reverseKind)

// reverse is a packet.Serializer of kind 200: compact JSON, reversed.
type reverse struct{}

func (reverse) Kind() codec.BodyKind { return reverseKind }

func (reverse) Marshal(dst []byte, v any) ([]byte, error) {
	n := len(dst)
	out, err := packet.JSONBody{}.Marshal(dst, v)
	if err != nil {
		return dst[:n], err
	}
	slices.Reverse(out[n:])
	return out, nil
}

func (reverse) Unmarshal(data []byte, v any) error {
	b := slices.Clone(data)
	slices.Reverse(b)
	return packet.JSONBody{}.Unmarshal(b, v)
}

// batchReverse is reverse with the batch calls of a plugin's adapter
// (host.Serializer), a packet.BatchSerializer.
type batchReverse struct {
	reverse
	calls atomic.Int32
	gate  chan struct{} // when set, the first call waits until it is closed
	hang  bool          // calls wait for the end of their context
}

var _ packet.BatchSerializer = (*batchReverse)(nil)

func (r *batchReverse) MarshalBatch(ctx context.Context, vs []any) ([][]byte, error) {
	out := make([][]byte, len(vs))
	for i, v := range vs {
		var err error
		if out[i], err = r.Marshal(nil, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (r *batchReverse) UnmarshalBatch(ctx context.Context, bodies [][]byte, vs []any) error {
	if r.calls.Add(1) == 1 && r.gate != nil {
		<-r.gate
	}
	if r.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	errs := make(itemErrors, len(bodies))
	failed := false
	for i := range bodies {
		if errs[i] = r.Unmarshal(bodies[i], vs[i]); errs[i] != nil {
			failed = true
		}
	}
	if failed {
		return errs
	}
	return nil
}

// itemErrors is a batch error with one entry per item, as host.BatchError.
type itemErrors []error

func (e itemErrors) Error() string       { return "some items failed" }
func (e itemErrors) ItemErrors() []error { return e }

// rawPage is one page of pack kind pk, book bi, from a raw yard.
func rawPage(t testing.TB, from, to string, pk codec.PackKind, bi uint32, body []byte) []byte {
	t.Helper()
	h := codeclane.Head{PackKind: pk, Source: from, Destination: to, SessionID: sidA, BookID: bi, PageCount: 1}
	p, err := codeclane.Append(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	return append(p, body...)
}

func writeTo(t testing.TB, c *net.UnixConn, s *Stack, p []byte) {
	t.Helper()
	if _, err := c.WriteToUnix(p, &net.UnixAddr{Name: s.Path(), Net: "unixgram"}); err != nil {
		t.Fatal(err)
	}
}

// logSink collects a stack's logs.
type logSink struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logSink) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logSink) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// Two yards exchange messages serialized by a plugin's kind (one page and
// many pages), each decoding with its Config.Serializer, unregistered, in
// batches or one by one.
func TestSerializerPlugin(t *testing.T) {
	for _, batch := range []bool{true, false} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			testutil.CheckLeaks(t)
			var ser packet.Serializer = reverse{}
			if batch {
				ser = &batchReverse{}
			}
			alpha, beta := pair(t, func(c *Config) { c.Serializer = ser })
			if alpha.Config().PackKind != reversePK {
				t.Fatalf("pack kind %v", alpha.Config().PackKind)
			}
			ctx := ctxT(t)
			const n = 30
			bodies := make([]map[string]any, n)
			for i := range bodies {
				text := strings.Repeat(fmt.Sprintf("message %d ", i), 10)
				if i%10 == 9 {
					text = strings.Repeat("y", 150_000) // 3 pages
				}
				bodies[i] = map[string]any{"seq": int64(i), "text": text, "nested": map[string]any{"ok": true}}
				if err := alpha.Send(ctx, "beta", bodies[i]); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			for i := range n {
				m := receive(t, beta)
				if m.From != "alpha" || m.Kind != reversePK || !reflect.DeepEqual(m.Body, bodies[i]) {
					t.Fatalf("message %d: from %s kind %v body %.100v", i, m.From, m.Kind, m.Body)
				}
				if m.Raw[0] != '}' {
					t.Fatalf("raw %.20q: not reversed", m.Raw)
				}
			}
			if err := beta.Send(ctx, "alpha", map[string]any{"re": "ok"}); err != nil {
				t.Fatal(err)
			}
			if m := receive(t, alpha); m.Body["re"] != "ok" || m.Kind != reversePK {
				t.Fatalf("got %+v", m)
			}
			ca, cb := alpha.Counters(), beta.Counters()
			if ca.MessagesOut != n || cb.MessagesIn != n || cb.Dropped() != 0 || cb.PagesIn != n+6 || (cb.DecodeBatches == 0) == batch {
				t.Fatalf("counters alpha %+v beta %+v", ca, cb)
			}
		})
	}
}

// A yard without a Serializer decodes the bodies of a plugin's kind
// registered with packet.RegisterSerializer; one whose PackKind names it
// sends with it.
func TestRegisteredPluginDecodes(t *testing.T) {
	testutil.CheckLeaks(t)
	if err := packet.RegisterSerializer(&batchReverse{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { packet.UnregisterSerializer(reverseKind) })
	dir := testutil.ShortTempDir(t, "rl")
	alpha := newStack(t, dir, "alpha", func(c *Config) { c.PackKind = reversePK }) // found by the registry
	beta := newStack(t, dir, "beta", nil)
	ctx := ctxT(t)
	if err := alpha.Send(ctx, "beta", map[string]any{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, beta); m.Kind != reversePK || m.Body["a"] != "b" || string(m.Raw) != `}"b":"a"{` {
		t.Fatalf("got %+v", m)
	}
	if err := beta.Send(ctx, "alpha", map[string]any{"c": "d"}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, alpha); m.Kind != codec.PackKindJSON || m.Body["c"] != "d" {
		t.Fatalf("got %+v", m)
	}
}

// A yard's own registry (Config.Serializers) decodes a plugin's kind that
// the process-wide one does not know, and serves its PackKind.
func TestStackRegistryDecodes(t *testing.T) {
	testutil.CheckLeaks(t)
	reg := packet.NewRegistry()
	if err := reg.Register(&batchReverse{}); err != nil {
		t.Fatal(err)
	}
	dir := testutil.ShortTempDir(t, "rl")
	alpha := newStack(t, dir, "alpha", func(c *Config) { c.PackKind, c.Serializers = reversePK, reg })
	beta := newStack(t, dir, "beta", func(c *Config) { c.Serializers = reg })
	gamma := newStack(t, dir, "gamma", nil) // the process-wide registry
	ctx := ctxT(t)
	if err := alpha.Send(ctx, "beta", map[string]any{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, beta); m.Kind != reversePK || m.Body["a"] != "b" {
		t.Fatalf("got %+v", m)
	}
	if err := alpha.Send(ctx, "gamma", map[string]any{"a": "b"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return gamma.Counters().Drops[DropPackKind] == 1 })
	if _, err := packet.SerializerFor(reverseKind); err == nil {
		t.Fatal("the process-wide registry has the kind")
	}
}

// Bodies of a plugin's kind decode in batches, off the reader, and every
// message keeps its place among those of built-in kinds.
func TestPluginBatchesKeepOrder(t *testing.T) {
	testutil.CheckLeaks(t)
	ser := &batchReverse{gate: make(chan struct{})}
	dir := testutil.ShortTempDir(t, "rl")
	beta := newStack(t, dir, "beta", func(c *Config) { c.Serializer = ser })
	raw := rawYard(t, dir, "alpha")
	const n = 120
	for i := range n {
		body := fmt.Appendf(nil, `{"seq":%d}`, i)
		pk := codec.PackKindJSON
		switch i % 3 {
		case 0:
			pk = reversePK
			slices.Reverse(body)
		case 1:
			pk = codec.PackKindPack
			body, _ = packet.MsgpackBody{}.Marshal(nil, map[string]any{"seq": i})
		}
		writeTo(t, raw, beta, rawPage(t, "alpha", "beta", pk, uint32(i+1), body))
	}
	// The reader goes on while the first decode call is held.
	waitCounters(t, beta, func(c Counters) bool { return c.PagesIn == n })
	close(ser.gate)
	for i := range n {
		m := receive(t, beta)
		if m.Body["seq"] != int64(i) {
			t.Fatalf("message %d: %v (kind %v)", i, m.Body, m.Kind)
		}
	}
	c := beta.Counters()
	if c.MessagesIn != n || c.Dropped() != 0 || c.DecodeBatches > 5 {
		t.Fatalf("counters %+v: want %d messages in at most 5 batches", c, n)
	}
	t.Logf("%d plugin bodies in %d calls", n/3, c.DecodeBatches)
}

// A body of a plugin's kind that does not decode is counted and logged,
// never delivered; the messages around it are (in one batch or not).
func TestPluginBadBody(t *testing.T) {
	testutil.CheckLeaks(t)
	ser := &batchReverse{gate: make(chan struct{})}
	var logs logSink
	dir := testutil.ShortTempDir(t, "rl")
	beta := newStack(t, dir, "beta", func(c *Config) { c.Serializer = ser; c.Logger = logs.logger() })
	raw := rawYard(t, dir, "alpha")
	pages := [][]byte{
		rawPage(t, "alpha", "beta", reversePK, 1, []byte(`,1:"a"{`)), // {"a":1, cut short
		rawPage(t, "alpha", "beta", reversePK, 2, []byte(`}eurt:"ko"{`)),
		rawPage(t, "alpha", "beta", reversePK, 3, []byte(`]2,1[`)), // [1,2]: not a mapping
		rawPage(t, "alpha", "beta", 7, 4, []byte("a kind nobody decodes")),
		rawPage(t, "alpha", "beta", codec.PackKindJSON, 5, []byte(`{"last":1}`)),
	}
	for _, p := range pages {
		writeTo(t, raw, beta, p)
	}
	waitCounters(t, beta, func(c Counters) bool { return c.PagesIn == uint64(len(pages)) })
	close(ser.gate)
	if m := receive(t, beta); m.Body["ok"] != true {
		t.Fatalf("got %+v", m)
	}
	if m := receive(t, beta); m.Body["last"] != int64(1) {
		t.Fatalf("got %+v", m)
	}
	noMessage(t, beta)
	c := beta.Counters()
	if c.MessagesIn != 2 || c.Drops[DropBadBody] != 1 || c.Drops[DropNotMapping] != 1 || c.Drops[DropPackKind] != 1 {
		t.Fatalf("counters %+v", c)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "does not decode") || !strings.Contains(l, "kind=PackKind(200)") {
		t.Fatalf("logs:\n%s", l)
	}
}

// A hung plugin holds up neither the reader nor Close: its bodies are
// dropped after DecodeTimeout, the messages behind them then come in
// order.
func TestPluginHung(t *testing.T) {
	testutil.CheckLeaks(t)
	ser := &batchReverse{hang: true}
	dir := testutil.ShortTempDir(t, "rl")
	const deadline = time.Second
	beta := newStack(t, dir, "beta", func(c *Config) { c.Serializer = ser; c.DecodeTimeout = deadline })
	raw := rawYard(t, dir, "alpha")
	writeTo(t, raw, beta, rawPage(t, "alpha", "beta", reversePK, 1, []byte("}{")))
	for i := range 50 {
		writeTo(t, raw, beta, rawPage(t, "alpha", "beta", codec.PackKindJSON, uint32(i+2), fmt.Appendf(nil, `{"n":%d}`, i)))
	}
	start := time.Now()
	waitCounters(t, beta, func(c Counters) bool { return c.PagesIn == 51 })
	if n := len(beta.Receive()); n != 0 || time.Since(start) > deadline/2 {
		t.Fatalf("%d messages delivered, %v: the reader waited for the hung call", n, time.Since(start))
	}
	for i := range 50 {
		if m := receive(t, beta); m.Body["n"] != int64(i) {
			t.Fatalf("got %+v", m)
		}
	}
	if el := time.Since(start); el < deadline*8/10 {
		t.Fatalf("delivered after %v, before the hung call's deadline", el)
	}
	if c := beta.Counters(); c.Drops[DropBadBody] != 1 {
		t.Fatalf("counters %+v", c)
	}

	// Close does not wait for the deadline of a hung call.
	gamma := newStack(t, dir, "gamma", func(c *Config) { c.Serializer = ser; c.DecodeTimeout = time.Minute })
	writeTo(t, raw, gamma, rawPage(t, "alpha", "gamma", reversePK, 1, []byte("}{")))
	waitCounters(t, gamma, func(c Counters) bool { return c.PagesIn == 1 })
	time.Sleep(20 * time.Millisecond)
	start = time.Now()
	if err := gamma.Close(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("Close took %v", el)
	}
}

// builtin.MemQueue: a message is done once sent; one to a missing yard
// stays queued, with the later ones, and a new stack with the queue sends
// them in order once the yard is there.
func TestQueue(t *testing.T) {
	testutil.CheckLeaks(t)
	q := builtin.NewMemQueue(0, 0)
	var logs logSink
	dir := testutil.ShortTempDir(t, "rl")
	mod := func(c *Config) { c.Queue = q; c.Logger = logs.logger() }
	alpha := newStack(t, dir, "alpha", mod)
	beta := newStack(t, dir, "beta", nil)
	ctx := ctxT(t)
	if err := alpha.Send(ctx, "beta", map[string]any{"n": 0}); err != nil {
		t.Fatal(err)
	}
	receive(t, beta)
	if q.Len() != 0 {
		t.Fatalf("%d messages queued after a send", q.Len())
	}
	for i := range 3 {
		err := alpha.Send(ctx, "gamma", map[string]any{"n": i + 1, "big": strings.Repeat("x", i*70_000)})
		var se *SendError
		if !errors.As(err, &se) || !errors.Is(err, ErrYardGone) || !se.Queued {
			t.Fatalf("send to a missing yard: %v", err)
		}
	}
	if err := alpha.Send(ctx, "beta", packet.OrderedMap{{Key: "n", Value: 9}}); err != nil {
		t.Fatal(err)
	}
	receive(t, beta)
	if q.Len() != 3 {
		t.Fatalf("%d messages queued, want 3", q.Len())
	}
	if err := alpha.Close(); err != nil {
		t.Fatal(err)
	}

	// Still no gamma: nothing is sent, the messages stay, the failure is logged.
	alpha2 := newStack(t, dir, "alpha", mod)
	waitFor(t, func() bool { return strings.Contains(logs.String(), "left_queued=3") })
	if q.Len() != 3 || alpha2.Counters().Resent != 0 || !strings.Contains(logs.String(), "stays queued") {
		t.Fatalf("queue %d, counters %+v, logs:\n%s", q.Len(), alpha2.Counters(), logs.String())
	}
	alpha2.Close()

	gamma := newStack(t, dir, "gamma", nil)
	alpha3 := newStack(t, dir, "alpha", mod)
	for i := range 3 {
		m := receive(t, gamma)
		if m.From != "alpha" || m.Body["n"] != int64(i+1) || len(m.Body["big"].(string)) != i*70_000 {
			t.Fatalf("message %d: %.100v", i, m.Body)
		}
	}
	waitFor(t, func() bool { return q.Len() == 0 })
	if c := alpha3.Counters(); c.Resent != 3 {
		t.Fatalf("counters %+v", c)
	}
	noMessage(t, gamma)
}

// A queue that refuses a message fails the Send before any page.
func TestQueueFull(t *testing.T) {
	testutil.CheckLeaks(t)
	q := builtin.NewMemQueue(1, 0)
	alpha, beta := pair(t, func(c *Config) { c.Queue = q })
	ctx := ctxT(t)
	if err := alpha.Send(ctx, "gamma", map[string]any{"n": 1}); !errors.Is(err, ErrYardGone) {
		t.Fatal(err)
	}
	err := alpha.Send(ctx, "beta", map[string]any{"n": 2})
	var se *SendError
	if !errors.As(err, &se) || !errors.Is(err, ErrQueue) || !errors.Is(err, builtin.ErrQueueFull) || se.Queued || se.Page != -1 {
		t.Fatalf("got %v", err)
	}
	noMessage(t, beta)
}

func TestSerializerConfig(t *testing.T) {
	dir := testutil.ShortTempDir(t, "rl")
	for _, tc := range []struct {
		name string
		cfg  Config
		ok   bool
		pk   codec.PackKind
	}{
		{"builtin msgpack", Config{Serializer: packet.MsgpackBody{}}, true, codec.PackKindPack},
		{"agrees", Config{Serializer: packet.CBORBody{}, PackKind: codec.PackKindCBOR}, true, codec.PackKindCBOR},
		{"disagrees", Config{Serializer: packet.CBORBody{}, PackKind: codec.PackKindPack}, false, 0},
		{"raw", Config{Serializer: packet.RawBody{}}, false, 0},
		{"plugin kind unregistered", Config{PackKind: codec.PackKindZstdJSON}, false, 0},
		{"no such kind", Config{PackKind: 3}, false, 0},
		{"negative decode timeout", Config{DecodeTimeout: -1}, false, 0},
	} {
		tc.cfg.Dir = dir
		s, err := New(&tc.cfg)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidConfig)) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err == nil && s.Config().PackKind != tc.pk {
			t.Fatalf("%s: pack kind %v", tc.name, s.Config().PackKind)
		}
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gatedMarshal is a batch serializer whose Marshal of a body with the key
// "wait" blocks until gate is closed.
type gatedMarshal struct {
	batchReverse
	gate    chan struct{}
	waiting chan struct{}
}

func (g *gatedMarshal) Marshal(dst []byte, v any) ([]byte, error) {
	if m, ok := v.(map[string]any); ok && m["wait"] != nil {
		close(g.waiting)
		<-g.gate
	}
	return g.batchReverse.Marshal(dst, v)
}

// A costly serializer (a plugin's) serializes before the yard is taken: a
// Send whose serialization hangs does not hold up the others to that yard.
func TestSlowMarshalOutsideTheYard(t *testing.T) {
	testutil.CheckLeaks(t)
	g := &gatedMarshal{gate: make(chan struct{}), waiting: make(chan struct{})}
	alpha, beta := pair(t, func(c *Config) { c.Serializer = g })
	ctx := ctxT(t)
	first := make(chan error, 1)
	go func() { first <- alpha.Send(ctx, "beta", map[string]any{"wait": true}) }()
	<-g.waiting
	if err := alpha.Send(ctx, "beta", map[string]any{"n": int64(2)}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, beta); m.Body["n"] != int64(2) {
		t.Fatalf("got %v, want the second message first", m.Body)
	}
	close(g.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if m := receive(t, beta); m.Body["wait"] != true {
		t.Fatalf("got %v", m.Body)
	}
}
