package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/plugins/sdk"
	"github.com/raet-go/raet/plugins/sdk/sdktest"
	"github.com/raet-go/raet/road"
)

func zstdSpec() host.Spec {
	return host.Spec{Name: "zstdjson", Provides: sdk.KindSerializer, Path: bin("raet-serializer-zstdjson")}
}

func xchachaSpec() host.Spec {
	return host.Spec{Name: "xchacha", Provides: sdk.KindCoat, Path: bin("raet-coat-xchacha")}
}

func boltSpec(db string) host.Spec {
	return host.Spec{Name: "bolt", Provides: sdk.KindQueue, Path: bin("raet-queue-bolt"), Args: []string{"--db", db}}
}

func faultySpec(mode string) host.Spec {
	return host.Spec{Name: "faulty", Provides: sdk.KindSerializer, Path: bin("raet-test-faulty"), Env: []string{"RAET_FAULTY=" + mode}}
}

// The contract tests against the example plugins as real subprocesses,
// through the host's guarded interfaces, on the latest protocol version.
func TestSubprocessContract(t *testing.T) {
	h, _ := newHost(t, host.Config{}, zstdSpec(), xchachaSpec(), boltSpec(filepath.Join(t.TempDir(), "q.db")))
	ctx := ctxT(t, time.Minute)
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"zstdjson", "xchacha", "bolt"} {
		if st, _ := h.Status(name); st.Version != sdk.LatestVersion || !st.Running {
			t.Fatalf("%s: %+v", name, st)
		}
	}
	t.Run("serializer", func(t *testing.T) {
		s, err := h.SerializerPlugin(ctx, "zstdjson")
		if err != nil {
			t.Fatal(err)
		}
		sdktest.Serializer(t, s)
	})
	t.Run("coat", func(t *testing.T) {
		c, err := h.CoatPlugin(ctx, "xchacha")
		if err != nil {
			t.Fatal(err)
		}
		sdktest.Coat(t, c)
	})
	t.Run("queue", func(t *testing.T) {
		q, err := h.QueuePlugin(ctx, "bolt")
		if err != nil {
			t.Fatal(err)
		}
		sdktest.Queue(t, q)
	})
}

// The packet.Serializer adapter over the plugin: mapping rules, the empty
// mapping without a call, errors that keep their identity, batches.
func TestSerializerAdapter(t *testing.T) {
	h, _ := newHost(t, host.Config{}, zstdSpec())
	ctx := ctxT(t, time.Minute)
	s, err := h.Serializer(ctx, "zstdjson")
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind() != codec.BodyKindZstdJSON {
		t.Fatalf("kind %v", s.Kind())
	}
	body := map[string]any{"content": strings.Repeat("compress me ", 200), "n": int64(3)}
	b, err := s.Marshal([]byte("prefix"), body)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:6]) != "prefix" || len(b) > 300 {
		t.Fatalf("%d bytes: not appended or not compressed", len(b))
	}
	var got map[string]any
	if err := s.Unmarshal(b[6:], &got); err != nil || got["n"] != int64(3) || got["content"] != body["content"] {
		t.Fatalf("%v %v", got, err)
	}
	if e, err := s.Marshal(nil, map[string]any{}); err != nil || len(e) != 0 {
		t.Fatalf("the empty mapping: %d bytes, %v", len(e), err)
	}
	if err := s.Unmarshal(nil, &got); err != nil || len(got) != 0 {
		t.Fatalf("zero bytes: %v %v", got, err)
	}
	_, err = s.Marshal(nil, []int{1})
	var be *packet.BodyError
	if !errors.As(err, &be) || be.Kind != codec.BodyKindZstdJSON || !errors.Is(err, packet.ErrNotMapping) {
		t.Fatalf("a non-mapping: %v", err)
	}
	if err := s.Unmarshal([]byte("not zstd at all"), &got); !errors.Is(err, packet.ErrMalformedBody) {
		t.Fatalf("junk: %v", err)
	}
	out, err := s.MarshalBatch(ctx, []any{body, 42, map[string]any{"x": "y"}})
	var bat *host.BatchError
	if !errors.As(err, &bat) || bat.Errs[0] != nil || bat.Errs[1] == nil || bat.Errs[2] != nil || len(out[2]) == 0 {
		t.Fatalf("mixed batch: %v", err)
	}
	vs := []any{new(map[string]any), new(map[string]any)}
	if err := s.UnmarshalBatch(ctx, [][]byte{out[0], out[2]}, vs); err != nil {
		t.Fatal(err)
	}
	if (*vs[1].(*map[string]any))["x"] != "y" {
		t.Fatalf("%v", vs[1])
	}
}

// Seal with the coat plugin in one process, open with it in another: two
// hosts, each with its own xchacha subprocess, and the two ends' keys.
func TestCoatAcrossProcesses(t *testing.T) {
	ha, _ := newHost(t, host.Config{}, xchachaSpec())
	hb, _ := newHost(t, host.Config{}, xchachaSpec())
	ctx := ctxT(t, time.Minute)
	ca, err := ha.Coat(ctx, "xchacha")
	if err != nil {
		t.Fatal(err)
	}
	cb, err := hb.Coat(ctx, "xchacha")
	if err != nil {
		t.Fatal(err)
	}
	if pidOf(t, ha, "xchacha") == pidOf(t, hb, "xchacha") {
		t.Fatal("one process")
	}
	aPriv, aPub := keyPair(t)
	bPriv, bPub := keyPair(t)
	sa, err := ca.Session(aPriv, bPub)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := cb.Session(bPriv, aPub)
	if err != nil {
		t.Fatal(err)
	}
	coat, err := sa.Seal(nil, []byte("over the road"))
	if err != nil || len(coat) != len("over the road")+sa.Overhead() {
		t.Fatalf("%d %v", len(coat), err)
	}
	plain, err := sb.Open([]byte("x"), coat)
	if err != nil || string(plain) != "xover the road" {
		t.Fatalf("%q %v", plain, err)
	}
	coat[3] ^= 0x80
	if _, err := sb.Open(nil, coat); !errors.Is(err, packet.ErrCoatOpen) {
		t.Fatalf("tampered: %v", err)
	}
	var low [32]byte // a low-order point
	if _, err := ca.Session(aPriv, &low); !errors.Is(err, packet.ErrWeakKey) {
		t.Fatalf("low-order key: %v", err)
	}
}

func TestDiscover(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"raet-serializer-zstdjson", "raet-coat-xchacha"} {
		if err := os.Symlink(bin(n), filepath.Join(dir, n)); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "raet-bogus-thing"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "README"), []byte("not a plugin"), 0o644)
	specs, err := host.Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Name != "xchacha" || specs[0].Provides != "coat" || specs[1].Name != "zstdjson" {
		t.Fatalf("%+v", specs)
	}
	// A plugins.yaml names the plugins instead.
	cfg := "plugins:\n  - name: zip\n    provides: serializer\n    path: raet-serializer-zstdjson\n    timeout: 2s\n    env: [A=b]\n"
	os.WriteFile(filepath.Join(dir, host.ConfigFile), []byte(cfg), 0o644)
	h, _ := newHost(t, host.Config{Dir: dir})
	specs = h.Specs()
	if len(specs) != 1 || specs[0].Name != "zip" || specs[0].Timeout != 2*time.Second || specs[0].Path != filepath.Join(dir, "raet-serializer-zstdjson") {
		t.Fatalf("%+v", specs)
	}
	ctx := ctxT(t, time.Minute)
	if _, err := h.Serializer(ctx, "zip"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Queue(ctx, "zip"); !errors.Is(err, host.ErrWrongKind) {
		t.Fatalf("wrong kind: %v", err)
	}
	if _, err := h.Serializer(ctx, "nope"); !errors.Is(err, host.ErrUnknownPlugin) {
		t.Fatalf("unknown: %v", err)
	}
	for _, bad := range []string{
		"plugins:\n  - name: a\n    provides: serializer\n    path: raet-serializer-zstdjson\n    colour: red\n",
		"plugins:\n  - name: a\n    provides: compressor\n    path: raet-serializer-zstdjson\n",
		"plugins:\n  - name: a\n    provides: coat\n    path: raet-coat-xchacha\n  - name: a\n    provides: coat\n    path: raet-coat-xchacha\n",
		"plugins:\n  - name: a\n    provides: coat\n    path: missing\n",
		"plugins:\n  - name: Bad Name\n    provides: coat\n    path: raet-coat-xchacha\n",
	} {
		os.WriteFile(filepath.Join(dir, host.ConfigFile), []byte(bad), 0o644)
		if _, err := host.New(&host.Config{Dir: dir}); err == nil {
			t.Fatalf("accepted:\n%s", bad)
		}
	}
}

// A plugin built with only protocol version 1 still works with this host
// (it negotiates 1), including a Pending longer than one page.
func TestVersion1Plugin(t *testing.T) {
	spec := host.Spec{Name: "v1", Provides: sdk.KindQueue, Path: bin("raet-test-faulty"), Env: []string{"RAET_FAULTY=queue-v1"}}
	h, _ := newHost(t, host.Config{}, spec)
	ctx := ctxT(t, time.Minute)
	q, err := h.Queue(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := h.Status("v1"); st.Version != sdk.Version1 {
		t.Fatalf("negotiated version %d", st.Version)
	}
	raw, _ := h.QueuePlugin(ctx, "v1")
	sdktest.Queue(t, raw)
	msgs := make([]road.QueuedMessage, 1300)
	for i := range msgs {
		msgs[i] = road.QueuedMessage{Remote: "r", Kind: codec.BodyKindJSON, Body: []byte{byte(i)}}
	}
	ids, err := q.PutBatch(ctx, msgs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.Pending()
	if err != nil || len(got) != len(msgs) || got[len(got)-1].ID != ids[len(ids)-1] {
		t.Fatalf("%d pending, %v", len(got), err)
	}
}

// The road adapter pages through a version 2 plugin too.
func TestQueueAdapterPages(t *testing.T) {
	h, _ := newHost(t, host.Config{}, boltSpec(filepath.Join(t.TempDir(), "q.db")))
	ctx := ctxT(t, time.Minute)
	q, err := h.Queue(ctx, "bolt")
	if err != nil {
		t.Fatal(err)
	}
	if !q.Info().Durable {
		t.Fatal("bolt is durable")
	}
	msgs := make([]road.QueuedMessage, 1200)
	for i := range msgs {
		msgs[i] = road.QueuedMessage{Remote: "r", Kind: codec.BodyKindJSON, Body: []byte{byte(i)}}
	}
	if _, err := q.PutBatch(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	id, err := q.Put("s", codec.BodyKindCBOR, []byte("last"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := q.Pending()
	if err != nil || len(got) != 1201 || got[1200].ID != id || got[1200].Remote != "s" || got[1200].Kind != codec.BodyKindCBOR {
		t.Fatalf("%d %v", len(got), err)
	}
	if err := q.Done(id); err != nil {
		t.Fatal(err)
	}
}

func TestIncompatibleVersion(t *testing.T) {
	h, _ := newHost(t, host.Config{}, faultySpec("v99"))
	err := h.Start(ctxT(t, time.Minute))
	mustContain(t, err, "plugin faulty", "start", "incompatible plugin protocol version", "[1 2]")
}

func TestJunkOnStdout(t *testing.T) {
	h, _ := newHost(t, host.Config{}, faultySpec("junk"))
	err := h.Start(ctxT(t, time.Minute))
	mustContain(t, err, "handshake failed", "stdout", "hello from a plugin")
}

// A plugin that exits before its handshake fails the start, and what it
// said on stderr reaches the host's log.
func TestExitBeforeHandshake(t *testing.T) {
	h, logs := newHost(t, host.Config{}, faultySpec("exit"))
	err := h.Start(ctxT(t, time.Minute))
	mustContain(t, err, "plugin faulty", "exited")
	waitFor(t, 5*time.Second, "the plugin's stderr in the log", func() bool {
		return strings.Contains(logs.String(), "giving up at once")
	})
}

// The plugins' hclog lines arrive in the host's slog logger with their
// fields and the plugin's name.
func TestLogsForwarded(t *testing.T) {
	h, logs := newHost(t, host.Config{}, faultySpec("serializer"))
	if err := h.Start(ctxT(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the plugin's log line", func() bool {
		l := logs.String()
		return strings.Contains(l, "faulty plugin starting") && strings.Contains(l, "mode=serializer") &&
			strings.Contains(l, "plugin=faulty")
	})
}

// A hung plugin: the call fails at its deadline, and after HungRestarts
// such calls the plugin is killed and started again.
func TestHungPluginHitsDeadline(t *testing.T) {
	spec := faultySpec("serializer")
	spec.Timeout = 300 * time.Millisecond
	h, _ := newHost(t, host.Config{HungRestarts: 2}, spec)
	ctx := ctxT(t, time.Minute)
	s, err := h.SerializerPlugin(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, h, "faulty")
	for range 2 {
		start := time.Now()
		_, err := s.Encode(ctx, [][]byte{[]byte(`{"x":"HANG"}`)})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hung call: %v", err)
		}
		var ce *host.CallError
		if !errors.As(err, &ce) || ce.Plugin != "faulty" || ce.Op != "Encode" {
			t.Fatalf("not a CallError: %#v", err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("the deadline of 300ms took %v", el)
		}
	}
	waitFor(t, 10*time.Second, "restart of the hung plugin", func() bool {
		st, _ := h.Status("faulty")
		return st.Running && st.Restarts == 1 && st.PID != pid
	})
	rs, err := s.Encode(ctx, [][]byte{[]byte(`{"x":1}`)})
	if err != nil || string(rs[0].Data) != `{"x":1}` {
		t.Fatalf("after the restart: %v", err)
	}
	if alive(pid) {
		t.Fatal("the hung process still runs")
	}
}

// A plugin that exits during a call: that call fails with ErrCrashed, the
// plugin is started again, and later calls work.
func TestCrashMidCall(t *testing.T) {
	h, logs := newHost(t, host.Config{MinBackoff: 50 * time.Millisecond}, faultySpec("serializer"))
	ctx := ctxT(t, time.Minute)
	s, err := h.SerializerPlugin(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, h, "faulty")
	_, err = s.Encode(ctx, [][]byte{[]byte(`{"x":"CRASH"}`)})
	if !errors.Is(err, host.ErrCrashed) {
		t.Fatalf("call in flight: %v", err)
	}
	mustContain(t, err, "plugin faulty", "Encode", "exited during the call")
	// The next call waits for the restart instead of failing.
	rs, err := s.Encode(ctx, [][]byte{[]byte(`{"ok":true}`)})
	if err != nil || string(rs[0].Data) != `{"ok":true}` {
		t.Fatalf("after the crash: %v", err)
	}
	st, _ := h.Status("faulty")
	if st.Restarts != 1 || st.PID == pid {
		t.Fatalf("%+v", st)
	}
	if !strings.Contains(logs.String(), "plugin down") {
		t.Fatal("the crash was not logged")
	}
	// A per-item error is the plugin's answer, not a crash.
	rs, err = s.Decode(ctx, [][]byte{[]byte("BADITEM"), []byte("{}")})
	if err != nil || !errors.Is(rs[0].Err, packet.ErrMalformedBody) || rs[1].Err != nil {
		t.Fatalf("%v %+v", err, rs)
	}
}

// A plugin that never comes back: calls fail with ErrUnavailable at their
// deadline, naming the reason.
func TestUnavailable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "raet-serializer-x")
	if err := os.Symlink(bin("raet-test-faulty"), path); err != nil {
		t.Fatal(err)
	}
	spec := host.Spec{Name: "x", Provides: sdk.KindSerializer, Path: path, Env: []string{"RAET_FAULTY=serializer"}, Timeout: 500 * time.Millisecond}
	h, _ := newHost(t, host.Config{}, spec)
	ctx := ctxT(t, time.Minute)
	s, err := h.SerializerPlugin(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path) // it cannot be started again
	syscall.Kill(pidOf(t, h, "x"), syscall.SIGKILL)
	waitFor(t, 5*time.Second, "the plugin marked down", func() bool {
		st, _ := h.Status("x")
		return !st.Running
	})
	_, err = s.Encode(ctx, [][]byte{[]byte("{}")})
	if !errors.Is(err, host.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v", err)
	}
}

// Close stops every plugin; calls after it fail with ErrClosed.
func TestCloseStopsPlugins(t *testing.T) {
	h, _ := newHost(t, host.Config{}, zstdSpec(), xchachaSpec())
	ctx := ctxT(t, time.Minute)
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	s, _ := h.SerializerPlugin(ctx, "zstdjson")
	pids := []int{pidOf(t, h, "zstdjson"), pidOf(t, h, "xchacha")}
	h.Close()
	for _, pid := range pids {
		waitFor(t, 5*time.Second, "plugin process gone", func() bool { return !alive(pid) })
	}
	if _, err := s.Encode(ctx, [][]byte{[]byte("{}")}); !errors.Is(err, host.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	h.Close()
}

// Concurrent callers share one plugin process.
func TestConcurrentCalls(t *testing.T) {
	h, _ := newHost(t, host.Config{}, zstdSpec())
	ctx := ctxT(t, time.Minute)
	s, err := h.Serializer(ctx, "zstdjson")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				b, err := s.Marshal(nil, map[string]any{"i": int64(i), "j": int64(j)})
				if err != nil {
					errs <- err
					return
				}
				var m map[string]any
				if err := s.Unmarshal(b, &m); err != nil || m["j"] != int64(j) {
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

// A plugin first used from a goroutine that locks its OS thread and ends
// (so Go ends the thread) keeps running: plugins are started from the
// host's own locked thread, and Pdeathsig follows the thread that started
// the process, not the process.
func TestPluginOutlivesStartingThread(t *testing.T) {
	h, _ := newHost(t, host.Config{}, zstdSpec())
	ctx := ctxT(t, time.Minute)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // not unlocked: this thread exits with the goroutine
		_, err := h.SerializerPlugin(ctx, "zstdjson")
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, h, "zstdjson")
	time.Sleep(300 * time.Millisecond)
	if !alive(pid) {
		t.Fatal("the plugin died with the thread of its first caller")
	}
	s, _ := h.SerializerPlugin(ctx, "zstdjson")
	if _, err := s.Encode(ctx, [][]byte{[]byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.Status("zstdjson"); st.Restarts != 0 {
		t.Fatalf("restarted %d times", st.Restarts)
	}
}
