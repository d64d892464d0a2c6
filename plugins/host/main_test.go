package host_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/plugins/internal/plugintest"
)

// init keeps the main goroutine on the main thread, so that the thread a
// test locks and leaves is never the main one (Go does not end that one;
// see TestPluginOutlivesStartingThread).
func init() { runtime.LockOSThread() }

// binDir holds the plugin binaries TestMain builds.
var binDir string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	dir, err := os.MkdirTemp("", "raet-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	names := make([]string, 0, len(plugintest.Mains))
	for n := range plugintest.Mains {
		names = append(names, n)
	}
	if err := plugintest.Build(dir, names...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	if benchH != nil {
		benchH.Close()
	}
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(leakOpts...); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakOpts ignore goroutines that are not the host's: gRPC's and the
// runtime's process-wide helpers.
var leakOpts = []goleak.Option{
	goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/grpcsync.(*CallbackSerializer).run"),
	goleak.IgnoreAnyFunction("google.golang.org/grpc/internal/resolver/dns.(*dnsResolver).watcher"),
	goleak.IgnoreAnyFunction("os/signal.signal_recv"),
	goleak.IgnoreAnyFunction("os/signal.loop"),
}

func bin(name string) string { return filepath.Join(binDir, name) }

// logBuf is a concurrency-safe buffer for a test's slog output.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newHost makes a host of specs, closed when the test ends, logging into
// the returned buffer (and to the test log on failure).
func newHost(t testing.TB, cfg host.Config, specs ...host.Spec) (*host.Host, *logBuf) {
	t.Helper()
	logs := &logBuf{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg.Plugins = append(cfg.Plugins, specs...)
	h, err := host.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		h.Close()
		if t.Failed() {
			t.Log("host logs:\n" + logs.String())
		}
	})
	return h, logs
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// alive reports whether pid is a live process (a zombie is dead).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i > 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pidOf(t testing.TB, h *host.Host, name string) int {
	t.Helper()
	st, err := h.Status(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.PID == 0 {
		t.Fatalf("%s is not running", name)
	}
	return st.PID
}

func mustContain(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

// filepathTemp makes a directory removed with binDir's parent cleanup.
func filepathTemp() (string, error) { return os.MkdirTemp(binDir, "bench-") }
