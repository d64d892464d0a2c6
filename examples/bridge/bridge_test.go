//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/internal/testutil"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

// asMainEnv makes this test binary run as the bridge command (TestMain), so
// that tests can start worker and serve processes.
const asMainEnv = "RAET_BRIDGE_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// wait bounds every wait of these tests.
const wait = 20 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// newEstate starts a road estate on loopback, closed when the test ends.
func newEstate(t *testing.T, name string, main bool) *road.Stack {
	t.Helper()
	return roadtest.Start(t, road.Config{Name: name, Main: main, Auto: keep.AutoAlways, AlivePeriod: -1})
}

// newYard starts a lane yard, closed when the test ends.
func newYard(t *testing.T, dir, name string, mod func(*lane.Config)) *lane.Stack {
	t.Helper()
	cfg := &lane.Config{Dir: dir, Name: name}
	if mod != nil {
		mod(cfg)
	}
	s, err := lane.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fixture is a bridge (estate and yard "bridge") in a new lane directory.
type fixture struct {
	dir    string
	road   *road.Stack
	lane   *lane.Stack
	bridge *Bridge
}

func newFixture(t *testing.T, mod func(*BridgeConfig)) *fixture {
	t.Helper()
	f := &fixture{dir: testutil.ShortTempDir(t, "rb")}
	f.road = newEstate(t, "bridge", true)
	f.lane = newYard(t, f.dir, "bridge", nil)
	cfg := BridgeConfig{Road: f.road, Lane: f.lane}
	if mod != nil {
		mod(&cfg)
	}
	b, err := NewBridge(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() }) // before the stacks close
	f.bridge = b
	return f
}

// waitCounters waits for the bridge's counters to be want: a count
// changes when a send is done, which can be after the message arrived.
func (f *fixture) waitCounters(t *testing.T, want BridgeCounters) {
	t.Helper()
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		c := f.bridge.Counters()
		if c == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v, want %+v", c, want)
		}
	}
}

// worker starts a worker yard in this process (serveWorker), stopped when
// the test ends.
func (f *fixture) worker(t *testing.T, name string) {
	t.Helper()
	st := newYard(t, f.dir, name, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveWorker(ctx, st, testLogger(t))
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// remote starts an estate that joins the bridge.
func (f *fixture) remote(t *testing.T, name string) *road.Stack {
	t.Helper()
	s := newEstate(t, name, false)
	if _, err := s.Join(ctxT(t), f.road.Addr().String()); err != nil {
		t.Fatalf("%s join: %v", name, err)
	}
	return s
}

func testLogger(t *testing.T) *slog.Logger { return newLogger(testWriter{t}, false) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// syncBuffer is a bytes.Buffer for several writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func roadRecv(t *testing.T, s *road.Stack) road.Message {
	t.Helper()
	select {
	case m := <-s.Receive():
		return m
	case <-time.After(wait):
		t.Fatalf("%s: no message within %v", s.Name(), wait)
	}
	return road.Message{}
}

func laneRecv(t *testing.T, s *lane.Stack) lane.Message {
	t.Helper()
	select {
	case m, ok := <-s.Receive():
		if !ok {
			t.Fatalf("%s: closed", s.Name())
		}
		return m
	case <-time.After(wait):
		t.Fatalf("%s: no message within %v", s.Name(), wait)
	}
	return lane.Message{}
}

func num(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case uint64:
		return int64(x)
	case float64:
		return int64(x)
	case int:
		return int64(x)
	}
	return -1
}

// Two remote estates send to three yards behind the bridge, and every
// yard's answer comes back to the estate that asked, naming the yard, in
// order per estate and yard.
func TestBridgeEstatesToYards(t *testing.T) {
	testutil.CheckLeaks(t)
	f := newFixture(t, nil)
	yards := []string{"worker1", "worker2", "worker3"}
	for _, y := range yards {
		f.worker(t, y)
	}
	estates := []*road.Stack{f.remote(t, "alpha"), f.remote(t, "beta")}
	const rounds = 20
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, len(estates))
	for _, e := range estates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				for _, y := range yards {
					env := map[string]any{"yard": y, "body": map[string]any{"seq": i, "asker": e.Name()}}
					if err := e.Send(ctx, "bridge", env); err != nil {
						errs <- fmt.Errorf("%s to %s: %w", e.Name(), y, err)
						return
					}
				}
			}
		}()
	}
	for _, e := range estates {
		next := map[string]int64{} // by yard: the next seq expected
		for range rounds * len(yards) {
			m := roadRecv(t, e)
			yard, body, ok := envelope(m.Body, keyYard)
			if m.From != "bridge" || !ok {
				t.Fatalf("%s got %+v from %s", e.Name(), m.Body, m.From)
			}
			echo, _ := body["echo"].(map[string]any)
			if body["yard"] != yard || echo["asker"] != e.Name() || num(body["pid"]) != int64(os.Getpid()) {
				t.Fatalf("%s got %+v", e.Name(), m.Body)
			}
			if seq := num(echo["seq"]); seq != next[yard] {
				t.Fatalf("%s: from %s seq %d, want %d", e.Name(), yard, seq, next[yard])
			}
			next[yard]++
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := uint64(len(estates) * len(yards) * rounds)
	f.waitCounters(t, BridgeCounters{FromRoad: n, ToLane: n, FromLane: n, ToRoad: n})
}

// Shutdown passes on every envelope the bridge has taken before it stops:
// the counters it leaves count them all, and nothing taken is lost.
func TestBridgeShutdownPassesOnTaken(t *testing.T) {
	testutil.CheckLeaks(t)
	f := newFixture(t, nil)
	sink := newYard(t, f.dir, "sink", nil)
	alpha := f.remote(t, "alpha")
	const n = 40
	ctx := ctxT(t)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- alpha.Send(ctx, "bridge", map[string]any{"yard": "sink", "body": map[string]any{"i": i}})
		}()
	}
	for range n { // each is done once the bridge has taken it
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(wait); f.bridge.Counters().FromRoad < n; time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the bridge took %d of %d", f.bridge.Counters().FromRoad, n)
		}
	}
	if err := f.bridge.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if c := f.bridge.Counters(); c.FromRoad != n || c.ToLane != n || c.Failed != 0 {
		t.Fatalf("after Shutdown: %+v, want %d taken and delivered", c, n)
	}
	got := map[int64]bool{}
	for range n {
		m := laneRecv(t, sink)
		_, body, ok := envelope(m.Body, keyEstate)
		if !ok || got[num(body["i"])] {
			t.Fatalf("sink got %+v", m.Body)
		}
		got[num(body["i"])] = true
	}
	// Stopped: what comes now is not taken.
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	alpha.Send(sctx, "bridge", map[string]any{"yard": "sink", "body": map[string]any{"i": -1}})
	if c := f.bridge.Counters(); c.FromRoad != n {
		t.Fatalf("taken after Shutdown: %+v", c)
	}
}

// A yard starts a conversation with an estate, which answers it.
func TestBridgeYardToEstate(t *testing.T) {
	testutil.CheckLeaks(t)
	f := newFixture(t, nil)
	task := newYard(t, f.dir, "task", func(c *lane.Config) { c.PackKind = codec.PackKindPack }) // yards may use any pack kind
	alpha := f.remote(t, "alpha")
	ctx := ctxT(t)
	if err := task.Send(ctx, "bridge", map[string]any{"estate": "alpha", "body": map[string]any{"q": "status?"}}); err != nil {
		t.Fatal(err)
	}
	m := roadRecv(t, alpha)
	yard, body, ok := envelope(m.Body, keyYard)
	if m.From != "bridge" || !ok || yard != "task" || body["q"] != "status?" {
		t.Fatalf("alpha got %+v from %s", m.Body, m.From)
	}
	// The answer: the same envelope, back, with a new body.
	if err := alpha.Send(ctx, m.From, map[string]any{"yard": yard, "body": map[string]any{"a": "fine"}}); err != nil {
		t.Fatal(err)
	}
	lm := laneRecv(t, task)
	estate, body, ok := envelope(lm.Body, keyEstate)
	if lm.From != "bridge" || !ok || estate != "alpha" || body["a"] != "fine" {
		t.Fatalf("task got %+v from %s", lm.Body, lm.From)
	}
}

// What cannot be delivered is answered with a notice; what is not an
// envelope, notices included, is dropped and counted, never answered.
func TestBridgeNoticesAndMalformed(t *testing.T) {
	testutil.CheckLeaks(t)
	f := newFixture(t, nil)
	task := newYard(t, f.dir, "task", nil)
	alpha := f.remote(t, "alpha")
	ctx := ctxT(t)

	// No such yard.
	if err := alpha.Send(ctx, "bridge", map[string]any{"yard": "ghost", "body": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	m := roadRecv(t, alpha)
	if m.Body["yard"] != "ghost" || m.Body["body"] != nil || !strings.Contains(fmt.Sprint(m.Body["error"]), "gone") {
		t.Fatalf("notice %+v", m.Body)
	}
	// The bridge's own yard, or a name no yard can have.
	for _, y := range []string{"bridge", "a.b"} {
		if err := alpha.Send(ctx, "bridge", map[string]any{"yard": y, "body": map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		if m := roadRecv(t, alpha); m.Body["yard"] != y || m.Body["error"] == nil {
			t.Fatalf("notice %+v", m.Body)
		}
	}
	// No such estate.
	if err := task.Send(ctx, "bridge", map[string]any{"estate": "nobody", "body": map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	lm := laneRecv(t, task)
	if lm.Body["estate"] != "nobody" || lm.Body["body"] != nil || lm.Body["error"] == nil {
		t.Fatalf("notice %+v", lm.Body)
	}

	// Not envelopes, from the road, then a good one: the bridge reads in
	// order, so when the good one is there the others were dropped.
	for _, bad := range []map[string]any{
		{"body": map[string]any{}},                     // no yard
		{"yard": 7, "body": map[string]any{}},          // not a name
		{"yard": "task", "body": "text"},               // not a mapping
		{"yard": "task"},                               // no body
		{"yard": "task", "error": "a notice of yours"}, // a notice
	} {
		if err := alpha.Send(ctx, "bridge", bad); err != nil {
			t.Fatal(err)
		}
	}
	if err := alpha.Send(ctx, "bridge", map[string]any{"yard": "task", "body": map[string]any{"ok": true}}); err != nil {
		t.Fatal(err)
	}
	if lm := laneRecv(t, task); lm.Body["estate"] != "alpha" || lm.Body["body"].(map[string]any)["ok"] != true {
		t.Fatalf("task got %+v", lm.Body)
	}
	// And from the lane.
	for _, bad := range []map[string]any{
		{"body": map[string]any{}},
		{"estate": "alpha"},
		{"estate": "alpha", "error": "x"},
	} {
		if err := task.Send(ctx, "bridge", bad); err != nil {
			t.Fatal(err)
		}
	}
	if err := task.Send(ctx, "bridge", map[string]any{"estate": "alpha", "body": map[string]any{"ok": 1}}); err != nil {
		t.Fatal(err)
	}
	if m := roadRecv(t, alpha); m.Body["yard"] != "task" || m.Body["error"] != nil {
		t.Fatalf("alpha got %+v", m.Body)
	}
	f.waitCounters(t, BridgeCounters{FromRoad: 4, ToLane: 1, FromLane: 2, ToRoad: 1, Malformed: 8, Failed: 4, Notices: 4})
	// Nothing else came.
	select {
	case m := <-alpha.Receive():
		t.Fatalf("alpha got %+v", m.Body)
	case m := <-task.Receive():
		t.Fatalf("task got %+v", m.Body)
	case <-time.After(50 * time.Millisecond):
	}
}

// A yard that does not read: deliveries to it fail after LaneTimeout, one
// at a time, each answered with a notice; every envelope is accounted for.
func TestBridgeBusyYard(t *testing.T) {
	testutil.CheckLeaks(t)
	f := newFixture(t, func(c *BridgeConfig) { c.LaneTimeout = 50 * time.Millisecond })
	newYard(t, f.dir, "stuck", func(c *lane.Config) { c.ReceiveQueue = 1 }) // never read
	alpha := f.remote(t, "alpha")
	ctx := ctxT(t)
	body := map[string]any{"pad": strings.Repeat("x", 16<<10)}
	const n = 40 // more than the socket and the stack hold
	for range n {
		if err := alpha.Send(ctx, "bridge", map[string]any{"yard": "stuck", "body": body}); err != nil {
			t.Fatal(err)
		}
	}
	var c BridgeCounters
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Millisecond) {
		if c = f.bridge.Counters(); c.ToLane+c.Failed == n && c.Notices == c.Failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters %+v", c)
		}
	}
	if c.Failed == 0 || c.ToLane == 0 || c.FromRoad != n {
		t.Fatalf("counters %+v", c)
	}
	for range c.Failed {
		m := roadRecv(t, alpha)
		if m.Body["yard"] != "stuck" || !strings.Contains(fmt.Sprint(m.Body["error"]), "busy") {
			t.Fatalf("alpha got %+v", m.Body)
		}
	}
	t.Logf("%d delivered, %d refused as busy", c.ToLane, c.Failed)
}

// Close returns at once with sends in flight (a delivery waiting for a
// busy yard, envelopes queued behind it) and leaves no goroutine; so does
// Shutdown when its context ends first, and it says so.
func TestBridgeCloseInFlight(t *testing.T) {
	stops := map[string]func(*Bridge) error{
		"Close": (*Bridge).Close,
		"Shutdown": func(b *Bridge) error {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("Shutdown with a stuck yard: %v, want the deadline", err)
			}
			return nil
		},
	}
	for name, stop := range stops {
		t.Run(name, func(t *testing.T) {
			testutil.CheckLeaks(t)
			f := newFixture(t, func(c *BridgeConfig) { c.LaneTimeout = time.Hour; c.Workers = 1; c.Queue = 1 })
			newYard(t, f.dir, "stuck", func(c *lane.Config) { c.ReceiveQueue = 1 })
			alpha := f.remote(t, "alpha")
			ctx := ctxT(t)
			body := map[string]any{"pad": strings.Repeat("x", 4000)}
			for range 60 { // more than the socket and the stack hold
				if err := alpha.Send(ctx, "bridge", map[string]any{"yard": "stuck", "body": body}); err != nil {
					t.Fatal(err)
				}
			}
			for deadline := time.Now().Add(wait); f.lane.Counters().Retries == 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the bridge never waited for the stuck yard")
				}
			}
			start := time.Now()
			if err := stop(f.bridge); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d > 2*time.Second {
				t.Fatalf("%s took %v", name, d)
			}
			if err := f.bridge.Start(); err == nil {
				t.Fatalf("Start after %s worked", name)
			}
		})
	}
}

func TestNewBridgeErrors(t *testing.T) {
	if _, err := NewBridge(BridgeConfig{}); err == nil {
		t.Fatal("no stacks: no error")
	}
	dir := testutil.ShortTempDir(t, "rb")
	ls := newYard(t, dir, "b", nil)
	rs := newEstate(t, "b", true)
	if _, err := NewBridge(BridgeConfig{Road: rs, Lane: ls, Workers: -1}); err == nil {
		t.Fatal("negative workers: no error")
	}
	b, err := NewBridge(BridgeConfig{Road: rs, Lane: ls})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil { // never started
		t.Fatal(err)
	}
}

// The demo: worker processes (this test binary as the command), the
// bridge and alpha; every worker answers from its own process, the ghost
// yard with a notice; the capture holds both road datagrams and lane pages
// with envelopes.
func TestDemo(t *testing.T) {
	testutil.CheckLeaks(t)
	capture := filepath.Join(t.TempDir(), "bridge.pcapng")
	var out bytes.Buffer
	var logs syncBuffer // the worker processes' stderr too
	err := demo(demoConfig{Workers: 3, Pcap: capture, Timeout: wait, Out: &out,
		Log: newLogger(&logs, false), StartWorker: workerProcess(os.Args[0], []string{asMainEnv + "=1"}, &logs)})
	t.Logf("demo output:\n%s\nlogs:\n%s", out.String(), logs.String())
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]bool{}
	for i := 1; i <= 3; i++ {
		re := regexp.MustCompile(`alpha <- bridge: \{"body":\{"echo":\{"task":` + fmt.Sprint(i) +
			`,"text":"hello worker` + fmt.Sprint(i) + `"\},"n":1,"pid":(\d+),"yard":"worker` + fmt.Sprint(i) + `"\},"yard":"worker` + fmt.Sprint(i) + `"\}`)
		sm := re.FindStringSubmatch(out.String())
		if sm == nil {
			t.Fatalf("no answer from worker%d", i)
		}
		pids[sm[1]] = true
	}
	if len(pids) != 3 || pids[fmt.Sprint(os.Getpid())] {
		t.Fatalf("worker pids %v (this process %d)", pids, os.Getpid())
	}
	if !regexp.MustCompile(`alpha <- bridge: \{"error":"(?:[^"\\]|\\.)*gone(?:[^"\\]|\\.)*","yard":"ghost"\}`).MatchString(out.String()) {
		t.Fatal("no notice for ghost")
	}

	fh, err := os.Open(capture)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	cr, err := dissect.NewCaptureReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(nil)
	var roadN, laneN, envelopes int
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := d.Decode(rec)
		switch {
		case p == nil || p.Err != nil:
			t.Fatalf("packet %+v", p)
		case p.Lane:
			laneN++
			if e, _ := p.Body.Get("estate"); p.HasBody && e == "alpha" {
				envelopes++
			}
		default:
			roadN++
		}
	}
	if roadN == 0 || laneN != 6 || envelopes != 6 {
		t.Fatalf("capture: %d road packets, %d lane pages, %d with envelopes", roadN, laneN, envelopes)
	}
}

// bridge serve as a process, with a worker process: an estate joins it
// and gets an answer; SIGINT stops it cleanly, its capture written.
func TestServeProcess(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rb")
	capture := filepath.Join(dir, "c.pcapng")
	cmd := exec.Command(os.Args[0], "serve", "-listen", "127.0.0.1:0", "-dir", dir, "-pcap", capture)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	var addr string
	re := regexp.MustCompile(`estate bridge on (\S+),`)
	for addr == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited: %v", <-exited)
			}
			if sm := re.FindStringSubmatch(l); sm != nil {
				addr = sm[1]
			}
		case <-time.After(wait):
			t.Fatal("serve did not start")
		}
	}
	stop, err := workerProcess(os.Args[0], []string{asMainEnv + "=1"}, io.Discard)(dir, "worker1")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	alpha := newEstate(t, "alpha", false)
	ctx := ctxT(t)
	if _, err := alpha.Join(ctx, addr); err != nil {
		t.Fatal(err)
	}
	if err := alpha.Send(ctx, "bridge", map[string]any{"yard": "worker1", "body": map[string]any{"x": 1}}); err != nil {
		t.Fatal(err)
	}
	if m := roadRecv(t, alpha); m.Body["yard"] != "worker1" || m.Body["body"] == nil {
		t.Fatalf("alpha got %+v", m.Body)
	}
	cmd.Process.Signal(syscall.SIGINT)
	var tail []string
	for l := range lines {
		tail = append(tail, l)
	}
	if err := <-exited; err != nil {
		t.Fatalf("serve: %v\n%s", err, strings.Join(tail, "\n"))
	}
	if !strings.Contains(strings.Join(tail, "\n"), "FromRoad:1 ToLane:1 FromLane:1") {
		t.Fatalf("serve's last words: %q", tail)
	}
	if fi, err := os.Stat(capture); err != nil || fi.Size() < 1000 {
		t.Fatalf("capture: %v %v", fi, err)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		nil, {"bogus"}, {"serve", "-bogus"}, {"serve", "extra"}, {"serve", "-auto", "maybe"},
		{"worker"}, {"demo", "-workers", "0"},
	} {
		if code := run(args, io.Discard, io.Discard); code != 2 {
			t.Errorf("bridge %q exited %d, want 2", args, code)
		}
	}
	var out bytes.Buffer
	if code := run([]string{"help"}, &out, io.Discard); code != 0 || !strings.Contains(out.String(), "bridge serve") {
		t.Errorf("help: %d %q", code, out.String())
	}
}
