//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/internal/testutil"
	"github.com/raet-go/raet/lane"
)

// The subprocess tests run this test binary as the raet command: with
// RAET_LANE_HELPER=1, TestLaneHelperProcess runs raet with the arguments
// after "--" and exits with its status.
func TestLaneHelperProcess(t *testing.T) {
	if os.Getenv("RAET_LANE_HELPER") != "1" {
		t.Skip("helper process for the subprocess tests")
	}
	args := os.Args
	for i, a := range args {
		if a == "--" {
			args = args[i+1:]
			break
		}
	}
	os.Exit(run(args, os.Stdout, os.Stderr))
}

// raetCmd returns a command running raet with args in a subprocess.
func raetCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestLaneHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "RAET_LANE_HELPER=1")
	return cmd
}

// raet runs raet in a subprocess and returns its stdout and status.
func raet(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := raetCmd(t, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	go func() { <-ctx.Done(); _ = cmd.Process.Kill() }()
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("raet %v: %v", args, err)
	}
	if stderr.Len() > 0 {
		t.Logf("raet %s stderr:\n%s", args[1], stderr.String())
	}
	return stdout.String(), cmd.ProcessState.ExitCode()
}

// server is a `raet lane serve` subprocess.
type server struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr bytes.Buffer
	done   chan struct{} // closed when the process has exited
	code   int
}

// serve starts `raet lane serve` in dir as yard name and waits for its
// socket; it is stopped with SIGINT when the test ends.
func serve(t *testing.T, dir, name string, extra ...string) *server {
	t.Helper()
	s := &server{cmd: raetCmd(t, append([]string{"lane", "serve", "--dir", dir, "--name", name}, extra...)...),
		lines: make(chan string, 20_000), done: make(chan struct{})}
	pr, pw := io.Pipe()
	s.cmd.Stdout = pw
	s.cmd.Stderr = &s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	go func() {
		s.cmd.Wait() // copies all of stdout first
		s.code = s.cmd.ProcessState.ExitCode()
		pw.Close()
		close(s.done)
	}()
	t.Cleanup(func() { s.stop(t) })
	path := lane.SocketPath(dir, "lane", name)
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Lstat(path); err == nil {
			return s
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("serve did not bind %s", path)
		}
	}
}

// wait waits for the server to exit and returns its status.
func (s *server) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		t.Errorf("serve did not exit")
	}
	return s.code
}

// stop interrupts the server and returns its exit status.
func (s *server) stop(t *testing.T) int {
	t.Helper()
	select {
	case <-s.done:
		return s.code
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	return s.wait(t)
}

// line returns the server's next output line.
func (s *server) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			t.Fatal("serve ended")
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("no line from serve within 30s")
	}
	return ""
}

func sendSummary(t *testing.T, out string) laneSummary {
	t.Helper()
	var s laneSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	return s
}

// Two yards in two processes: a small message and its echo. serve prints
// it as the reference wrote it.
func TestLaneSendServe(t *testing.T) {
	dir := testutil.ShortTempDir(t, "rl")
	srv := serve(t, dir, "beta", "--echo")
	out, code := raet(t, "lane", "send", "--dir", dir, "--name", "alpha", "--to", "beta",
		"--body-json", `{"subject":"lane hello","n":1}`, "--expect-echo", "--timeout", "30s")
	if code != exitOK {
		t.Fatalf("send exited %d: %s", code, out)
	}
	if s := sendSummary(t, out); s.Sent != 1 || s.Done != 1 || s.Echoed != 1 || s.Pages != 1 || s.Error != "" {
		t.Fatalf("summary %+v", s)
	}
	if l := srv.line(t); l != `{"from":"alpha","body":{"subject":"lane hello","n":1}}` {
		t.Fatalf("serve printed %s", l)
	}
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("serve exited %d", code)
	}
	if _, err := os.Lstat(lane.SocketPath(dir, "lane", "beta")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("serve left its socket: %v", err)
	}
}

// A 150 kB message goes in 3 pages and comes back whole; with msgpack
// and cbor too.
func TestLaneLargeMessage(t *testing.T) {
	dir := testutil.ShortTempDir(t, "rl")
	srv := serve(t, dir, "beta", "--echo")
	for _, pack := range []string{"json", "msgpack", "cbor"} {
		out, code := raet(t, "lane", "send", "--dir", dir, "--name", "alpha", "--to", "beta",
			"--size", "150000", "--expect-echo", "--body", pack, "--timeout", "30s")
		if code != exitOK {
			t.Fatalf("%s: send exited %d: %s", pack, code, out)
		}
		if s := sendSummary(t, out); s.Done != 1 || s.Echoed != 1 || s.Pages != 3 {
			t.Fatalf("%s: summary %+v", pack, s)
		}
		var got struct {
			From string
			Body struct{ Data string }
		}
		if err := json.Unmarshal([]byte(srv.line(t)), &got); err != nil || got.From != "alpha" || len(got.Body.Data) != 150000 {
			t.Fatalf("%s: serve printed from %q %d bytes: %v", pack, got.From, len(got.Body.Data), err)
		}
	}
}

// 10 000 messages from one process to another, echoed back: none lost,
// all in order, on both sides.
func TestLaneManyInOrder(t *testing.T) {
	dir := testutil.ShortTempDir(t, "rl")
	srv := serve(t, dir, "beta", "--echo")
	const n = 10_000
	out, code := raet(t, "lane", "send", "--dir", dir, "--name", "alpha", "--to", "beta",
		"--size", "64", "--count", fmt.Sprint(n), "--expect-echo", "--timeout", "90s")
	if code != exitOK {
		t.Fatalf("send exited %d: %s", code, out)
	}
	if s := sendSummary(t, out); s.Sent != n || s.Done != n || s.Echoed != n || s.Failed != 0 {
		t.Fatalf("summary %+v", s)
	}
	for i := range n {
		var got struct {
			From string
			Body struct{ Seq int }
		}
		if err := json.Unmarshal([]byte(srv.line(t)), &got); err != nil || got.From != "alpha" || got.Body.Seq != i {
			t.Fatalf("line %d: %+v %v", i, got, err)
		}
	}
}

// This process's lane stack and a serve process: the library against the
// command, both ways.
func TestLaneStackToServe(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	serve(t, dir, "beta", "--echo", "--body", "msgpack")
	st, err := lane.New(&lane.Config{Dir: dir, Name: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 100 {
		if err := st.Send(ctx, "beta", map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		select {
		case m := <-st.Receive():
			if m.From != "beta" || m.Body["i"] != int64(i) || m.Kind.String() != "pack" {
				t.Fatalf("echo %d: %+v", i, m)
			}
		case <-ctx.Done():
			t.Fatal("echoes missing")
		}
	}
}

func TestLaneFailures(t *testing.T) {
	dir := testutil.ShortTempDir(t, "rl")
	// Nobody there: the summary says so, exit 1.
	out, code := raet(t, "lane", "send", "--dir", dir, "--to", "nobody", "--size", "10")
	if s := sendSummary(t, out); code != exitFailure || s.Failed != 1 || !strings.Contains(s.Error, "gone") {
		t.Fatalf("send to nobody: exit %d, %+v", code, s)
	}
	// A live yard's socket is not taken: exit 3.
	serve(t, dir, "beta")
	if _, code := raet(t, "lane", "serve", "--dir", dir, "--name", "beta"); code != exitSetup {
		t.Fatalf("second serve exited %d, want %d", code, exitSetup)
	}
	// The echo never comes: exit 1 after the timeout.
	out, code = raet(t, "lane", "send", "--dir", dir, "--to", "beta", "--size", "10", "--expect-echo", "--timeout", "300ms")
	if s := sendSummary(t, out); code != exitFailure || s.Echoed != 0 || s.Error == "" {
		t.Fatalf("send without echo: exit %d, %+v", code, s)
	}
}

// serve --count N exits by itself after N messages.
func TestLaneServeCount(t *testing.T) {
	dir := testutil.ShortTempDir(t, "rl")
	srv := serve(t, dir, "beta", "--count", "2")
	if out, code := raet(t, "lane", "send", "--dir", dir, "--to", "beta", "--size", "5", "--count", "2"); code != exitOK {
		t.Fatalf("send exited %d: %s", code, out)
	}
	if code := srv.wait(t); code != exitOK {
		t.Fatalf("serve exited %d", code)
	}
	srv.line(t)
	srv.line(t)
	if l, ok := <-srv.lines; ok {
		t.Fatalf("a third line: %s", l)
	}
}

// Usage errors exit 2 without starting anything; in this process.
func TestLaneUsage(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	for _, args := range [][]string{
		{"lane"},
		{"lane", "bogus"},
		{"lane", "serve", "--bogus"},
		{"lane", "serve", "extra"},
		{"lane", "serve", "--dir", dir, "--name", "a.b"},
		{"lane", "serve", "--dir", dir, "--body", "xml"},
		{"lane", "serve", "--dir", dir, "--coat", "nacl"}, // a lane has no coat
		{"lane", "serve", "--dir", dir, "--body", "msgpack", "--serializer", "cbor"},
		{"lane", "send", "--dir", dir},
		{"lane", "send", "--dir", dir, "--to", "b"},
		{"lane", "send", "--dir", dir, "--to", "b", "--size", "5", "--body-json", "{}"},
		{"lane", "send", "--dir", dir, "--to", "b", "--body-json", "[1]"},
		{"lane", "send", "--dir", dir, "--to", "b", "--body-json", "{"},
		{"lane", "send", "--dir", dir, "--to", "b", "--size", "5", "--count", "0"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage {
			t.Errorf("raet %q exited %d, want %d", args, code, exitUsage)
		}
		if stdout.Len() != 0 {
			t.Errorf("raet %q printed %q on stdout", args, stdout.String())
		}
	}
	var stdout bytes.Buffer
	if code := run([]string{"lane", "help"}, &stdout, io.Discard); code != exitOK || !strings.Contains(stdout.String(), "raet lane serve") {
		t.Errorf("lane help: %d %q", code, stdout.String())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("usage errors left files: %v", entries)
	}
}
