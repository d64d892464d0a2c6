package host_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/plugins/builtin"
	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/plugins/serializer/zstdjson"
)

// runLaneYard is the helper yard of TestLaneSerializerPlugin: the yard
// "echo" in the directory RAET_LANE_DIR, whose own host runs the zstdjson
// plugin, sending with it and decoding with it; it echoes every message
// back, or an error message when one did not come as zstdjson. It prints
// READY once bound and ends when its stdin closes (or after a minute).
func runLaneYard() int {
	h, ser, err := helperZstdJSON()
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := lane.New(&lane.Config{Dir: os.Getenv("RAET_LANE_DIR"), Name: "echo", Serializer: ser})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	if err := s.Start(); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer s.Close()
	fmt.Println("READY")
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	for {
		select {
		case <-ctx.Done():
			return 0
		case m := <-s.Receive():
			if m.Kind != codec.PackKindZstdJSON {
				m.Body = map[string]any{"error": "received pack kind " + m.Kind.String()}
			}
			if err := s.Send(ctx, m.From, m.Body); err != nil {
				fmt.Fprintln(os.Stderr, "echo:", err)
			}
		}
	}
}

// startHelper runs this test binary as the helper mode, with env, and
// waits for its READY line; the helper ends when the test does.
func startHelper(t *testing.T, mode string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), helperEnv+"="+mode, "RAET_PLUGINS_TEST_BIN="+binDir), env...)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == "READY" {
			go io.Copy(io.Discard, stdout)
			return
		}
		t.Fatalf("%s: %s", mode, sc.Text())
	}
	t.Fatalf("%s ended before it was ready", mode)
}

// laneDir is a short directory for lane sockets (a socket path is at most
// about 104 bytes), removed when the test ends.
func laneDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "rlp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startLane(t *testing.T, cfg lane.Config) *lane.Stack {
	t.Helper()
	s, err := lane.New(&cfg)
	return started(t, s, err)
}

func laneRecv(t *testing.T, s *lane.Stack, d time.Duration) lane.Message {
	t.Helper()
	return received(t, s.Name(), s.Receive(), d)
}

// rawLanePage is a one-page book of pack kind pk from yard "raw".
func rawLanePage(t *testing.T, to string, pk codec.PackKind, bi uint32, body []byte) []byte {
	t.Helper()
	h := codeclane.Head{PackKind: pk, Source: "raw", Destination: to, SessionID: "aaaaaaaaaaaaaaaaaa", BookID: bi, PageCount: 1}
	p, err := codeclane.Append(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	return append(p, body...)
}

// rawLaneYard binds yard "raw" by hand, to write pages no stack would.
func rawLaneYard(t *testing.T, dir string) (write func(to *lane.Stack, page []byte)) {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: lane.SocketPath(dir, lane.DefaultLane, "raw"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return func(to *lane.Stack, page []byte) {
		t.Helper()
		if _, err := c.WriteToUnix(page, &net.UnixAddr{Name: to.Path(), Net: "unixgram"}); err != nil {
			t.Fatal(err)
		}
	}
}

// Two lane stacks of this process exchange messages serialized by
// host.Serializer over the zstdjson plugin's implementation, in-process
// (no subprocess): one page and several, decoded in batches; the sender
// keeps each message in a builtin.MemQueue until sent.
func TestLaneInProcessSerializer(t *testing.T) {
	z, err := zstdjson.New(zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	ser, err := host.NewSerializer(context.Background(), z, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	dir := laneDir(t)
	q := builtin.NewMemQueue(0, 0)
	alpha := startLane(t, lane.Config{Dir: dir, Name: "alpha", Serializer: ser, Queue: q})
	beta := startLane(t, lane.Config{Dir: dir, Name: "beta", Serializer: ser})
	ctx := ctxT(t, time.Minute)
	const n = 50
	sent := make([]map[string]any, n)
	for i := range n {
		text := strings.Repeat(fmt.Sprintf("message %d ", i), 100)
		if i%10 == 9 {
			text = noisyText(150_000)
		}
		sent[i] = map[string]any{"seq": int64(i), "text": text}
		if err := alpha.Send(ctx, "beta", sent[i]); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i := range n {
		m := laneRecv(t, beta, 10*time.Second)
		if m.From != "alpha" || m.Kind != codec.PackKindZstdJSON || !reflect.DeepEqual(m.Body, sent[i]) {
			t.Fatalf("message %d: from %s kind %v: %.100v", i, m.From, m.Kind, m.Body)
		}
	}
	if q.Len() != 0 {
		t.Fatalf("%d messages left queued", q.Len())
	}
	if c := beta.Counters(); c.MessagesIn != n || c.Dropped() != 0 || c.DecodeBatches == 0 || c.DecodeBatches > n {
		t.Fatalf("counters %+v", c)
	}
	t.Logf("%d messages decoded in %d calls", n, beta.Counters().DecodeBatches)
}

// Two lane yards in two processes, each with its own zstdjson plugin
// subprocess, exchange messages (of one page and of several): each sends
// with the plugin's pack kind and decodes with its plugin. A body of that
// kind that is junk is counted and logged, not delivered.
func TestLaneSerializerPlugin(t *testing.T) {
	dir := laneDir(t)
	startHelper(t, "laneyard", "RAET_LANE_DIR="+dir)

	h, logs := newHost(t, host.Config{}, zstdSpec())
	ctx := ctxT(t, time.Minute)
	ser, err := h.Serializer(ctx, "zstdjson")
	if err != nil {
		t.Fatal(err)
	}
	s := startLane(t, lane.Config{Dir: dir, Name: "asker", Serializer: ser, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	const n = 20
	sent := make([]map[string]any, n)
	for i := range n {
		text := strings.Repeat(fmt.Sprintf("message %d ", i), 100)
		if i == n-1 {
			text = noisyText(200_000) // several pages, even compressed
		}
		sent[i] = map[string]any{"seq": int64(i), "text": text, "nested": map[string]any{"ok": true}}
		if err := s.Send(ctx, "echo", sent[i]); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for i := range n {
		m := laneRecv(t, s, 20*time.Second)
		if m.From != "echo" || m.Kind != codec.PackKindZstdJSON || !reflect.DeepEqual(m.Body, sent[i]) {
			t.Fatalf("echo %d: from %s kind %v: %.200v", i, m.From, m.Kind, m.Body)
		}
		if i < n-1 && len(m.Raw) > 200 { // ~1.1 KiB of JSON, compressed on the wire
			t.Fatalf("a body of %d bytes on the wire: not compressed", len(m.Raw))
		}
		if i == n-1 && len(m.Raw) < 2*lane.MaxPageSize {
			t.Fatalf("the large body is %d bytes on the wire: fewer than 3 pages", len(m.Raw))
		}
	}

	write := rawLaneYard(t, dir)
	write(s, rawLanePage(t, "asker", codec.PackKindZstdJSON, 1, []byte("\x28\xb5\x2f\xfd junk after the zstd magic")))
	good, err := ser.Marshal(nil, map[string]any{"after": "junk"})
	if err != nil {
		t.Fatal(err)
	}
	write(s, rawLanePage(t, "asker", codec.PackKindZstdJSON, 2, good))
	if m := laneRecv(t, s, 10*time.Second); m.From != "raw" || m.Body["after"] != "junk" {
		t.Fatalf("got %+v", m)
	}
	c := s.Counters()
	if c.Drops[lane.DropBadBody] != 1 || c.MessagesIn != n+1 || c.DecodeBatches == 0 {
		t.Fatalf("counters %+v", c)
	}
	if !strings.Contains(logs.String(), "does not decode") {
		t.Fatalf("the bad body is not logged:\n%s", logs.String())
	}
}

// A plugin that hangs on a body holds up neither the yard's reading nor
// the messages behind it beyond the host's call deadline: the body is
// dropped as bad, the rest come in order.
func TestLaneHungSerializerPlugin(t *testing.T) {
	dir := laneDir(t)
	const deadline = time.Second
	h, logs := newHost(t, host.Config{CallTimeout: deadline}, faultySpec("serializer"))
	ctx := ctxT(t, time.Minute)
	ser, err := h.Serializer(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	s := startLane(t, lane.Config{Dir: dir, Name: "yard", Serializer: ser, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	write := rawLaneYard(t, dir)
	pk, _ := lane.PackKindOf(ser.Kind())
	start := time.Now()
	write(s, rawLanePage(t, "yard", pk, 1, []byte(`{"x":"HANG"}`)))
	for i := range 20 {
		write(s, rawLanePage(t, "yard", codec.PackKindJSON, uint32(i+2), fmt.Appendf(nil, `{"n":%d}`, i)))
	}
	waitFor(t, deadline/2, "the reader read every page", func() bool { return s.Counters().PagesIn == 21 })
	if n := len(s.Receive()); n != 0 {
		t.Fatalf("%d messages delivered before the hung call's deadline", n)
	}
	for i := range 20 {
		if m := laneRecv(t, s, 10*time.Second); m.Body["n"] != int64(i) {
			t.Fatalf("got %+v", m)
		}
	}
	if el := time.Since(start); el < deadline*8/10 || el > 10*deadline {
		t.Fatalf("the messages behind the hung body came after %v (call deadline %v)", el, deadline)
	}
	if c := s.Counters(); c.Drops[lane.DropBadBody] != 1 {
		t.Fatalf("counters %+v", c)
	}
	write(s, rawLanePage(t, "yard", pk, 30, []byte(`{"x":"fine"}`)))
	if m := laneRecv(t, s, 20*time.Second); m.Kind != pk || m.Body["x"] != "fine" {
		t.Fatalf("after the hang: %+v", m)
	}
}

// A real lane stack restart with the durable queue plugin: messages sent
// while their yard is missing stay in the queue; the sender crashes (its
// plugin is SIGKILLed, its stack closed); a new stack with a new host and
// plugin on the same database sends them, in order, once the yard is
// there. They were serialized by the zstdjson plugin, and stay so.
func TestLaneDurableQueueAcrossRestart(t *testing.T) {
	dir := laneDir(t)
	db := filepath.Join(t.TempDir(), "q.db")
	ctx := ctxT(t, 2*time.Minute)
	hz, logs := newHost(t, host.Config{}, zstdSpec())
	ser, err := hz.Serializer(ctx, "zstdjson")
	if err != nil {
		t.Fatal(err)
	}

	h1, _ := newHost(t, host.Config{}, boltSpec(db))
	q1, err := h1.Queue(ctx, "bolt")
	if err != nil {
		t.Fatal(err)
	}
	cfg := lane.Config{Dir: dir, Name: "sender", Serializer: ser, Queue: q1, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	s1 := startLane(t, cfg)
	bodies := []map[string]any{
		{"n": int64(1)},
		{"n": int64(2), "big": strings.Repeat("lane ", 60_000)},
		{"n": int64(3), "text": "the last"},
	}
	for _, b := range bodies {
		err := s1.Send(ctx, "dest", b)
		var se *lane.SendError
		if !errors.Is(err, lane.ErrYardGone) || !errors.As(err, &se) || !se.Queued {
			t.Fatalf("send to a missing yard: %v", err)
		}
	}
	p, err := q1.Pending()
	if err != nil || len(p) != len(bodies) {
		t.Fatalf("the queue holds %d messages (%v)", len(p), err)
	}
	for _, m := range p {
		if m.Remote != "dest" || m.Kind != codec.BodyKindZstdJSON {
			t.Fatalf("queued %+v", m)
		}
	}
	// The sender crashes: its queue plugin is SIGKILLed, its stack goes.
	syscall.Kill(pidOf(t, h1, "bolt"), syscall.SIGKILL)
	s1.Close()
	h1.Close()

	dest := startLane(t, lane.Config{Dir: dir, Name: "dest", Serializer: ser})
	h2, _ := newHost(t, host.Config{}, boltSpec(db))
	q2, err := h2.Queue(ctx, "bolt")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Queue = q2
	s2 := startLane(t, cfg)
	for i, b := range bodies {
		m := laneRecv(t, dest, 20*time.Second)
		if m.From != "sender" || m.Kind != codec.PackKindZstdJSON || !reflect.DeepEqual(m.Body, b) {
			t.Fatalf("message %d: from %s kind %v %.100v", i, m.From, m.Kind, m.Body)
		}
	}
	waitFor(t, 5*time.Second, "the queue emptied", func() bool {
		p, err := q2.Pending()
		return err == nil && len(p) == 0
	})
	if c := s2.Counters(); c.Resent != uint64(len(bodies)) {
		t.Fatalf("counters %+v", c)
	}
	// New messages go through the queue and leave it.
	if err := s2.Send(ctx, "dest", map[string]any{"n": int64(4)}); err != nil {
		t.Fatal(err)
	}
	if m := laneRecv(t, dest, 10*time.Second); m.Body["n"] != int64(4) {
		t.Fatalf("got %+v", m)
	}
	if p, err := q2.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("%d left, %v", len(p), err)
	}
}

// noisyText is size letters that compress little (xorshift).
func noisyText(size int) string {
	b := make([]byte, size)
	x := uint64(0x9e3779b97f4a7c15)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte('a' + x%26)
	}
	return string(b)
}
