//go:build unix

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// runIn runs raet in this process. Its stderr is written by the stack's
// goroutines (logs) too, as os.Stderr would be.
func runIn(args ...string) (stdout, stderr string, code int) {
	var o, e syncBuf
	code = run(args, &o, &e)
	return o.String(), e.String(), code
}

func TestHelpVersionAndUsageErrors(t *testing.T) {
	out, _, code := runIn("--help")
	if code != exitOK {
		t.Fatalf("raet --help exited %d", code)
	}
	for _, c := range subcommands {
		if !strings.Contains(out, c.name+" ") || !strings.Contains(out, c.summary) {
			t.Fatalf("raet --help does not list %s:\n%s", c.name, out)
		}
	}
	if again, _, code := runIn("help"); code != exitOK || again != out {
		t.Fatalf("raet help exited %d", code)
	}
	if _, errOut, code := runIn(); code != exitUsage || !strings.Contains(errOut, "usage: raet COMMAND") {
		t.Fatalf("raet with no command exited %d: %q", code, errOut)
	}
	if out, _, code := runIn("--version"); code != exitOK || !strings.HasPrefix(out, "raet ") {
		t.Fatalf("raet --version: %d %q", code, out)
	}
	for _, args := range [][]string{
		{"keygen", "--help"}, {"serve", "--help"}, {"send", "-h"}, {"keys", "--help"}, {"keys", "list", "--help"},
		{"keys", "accept", "--help"}, {"lane", "serve", "--help"}, {"lane", "send", "--help"},
		{"plugins", "list", "--help"}, {"bench", "--help"}, {"help", "send"}, {"status", "--help"},
	} {
		out, errOut, code := runIn(args...)
		if code != exitOK || errOut != "" {
			t.Fatalf("raet %v exited %d, stderr %q", args, code, errOut)
		}
		for _, part := range []string{"usage:", "example:", "exit status: 0 success"} {
			if !strings.Contains(out, part) {
				t.Fatalf("raet %v has no %q:\n%s", args, part, out)
			}
		}
	}
	if out, _, code := runIn("lane", "--help"); code != exitOK || !strings.Contains(out, "raet lane serve") {
		t.Fatalf("raet lane --help: %d", code)
	}
	for _, args := range [][]string{
		{"nonsense"},
		{"serve", "127.0.0.1:17535", "--for", "1s"}, // a positional argument: nothing is served
		{"serve", "--nonsense"},
		{"send", "--to", "127.0.0.1:1"},                       // no body
		{"send", "--to", "127.0.0.1:1", "--body-json", "[1]"}, // not an object
		{"send", "--to", "127.0.0.1:1", "--size", "10", "--profile", "quick"},
		{"send", "--to", "127.0.0.1:1", "--size", "10", "--aead", "maybe"},
		{"keys"}, {"keys", "frobnicate", "--keep", t.TempDir()}, {"keys", "accept", "--keep", t.TempDir()},
		{"keygen", "--keep", t.TempDir(), "--name", "a", "extra"},
		{"lane", "send", "--to", "beta", "--size", "1", "extra"},
	} {
		if _, errOut, code := runIn(args...); code != exitUsage || errOut == "" {
			t.Fatalf("raet %v exited %d, stderr %q; want %d and a message", args, code, errOut, exitUsage)
		}
	}
	// A command that only reads a keep refuses a missing one, and makes none.
	missing := filepath.Join(t.TempDir(), "typo")
	if _, errOut, code := runIn("keys", "list", "--keep", missing); code != exitSetup || !strings.Contains(errOut, "no such file") {
		t.Fatalf("keys list of a missing keep: %d %q", code, errOut)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("keys list made the missing keep: %v", err)
	}
}

// syncBuf is a buffer written by a subprocess and read by the test.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// roadServer is a `raet serve` subprocess; stop sends SIGINT and returns
// its stdout lines.
type roadServer struct {
	lines  chan string
	stderr syncBuf
	stop   func() (lines []string, code int)
}

func startServe(t *testing.T, args ...string) *roadServer {
	t.Helper()
	s := &roadServer{lines: make(chan string, 1000)}
	cmd := raetCmd(t, append([]string{"serve"}, args...)...)
	cmd.Stderr = &s.stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	var once sync.Once
	var lines []string
	code := -1
	s.stop = func() ([]string, int) {
		once.Do(func() {
			cmd.Process.Signal(syscall.SIGINT)
			<-read
			cmd.Wait()
			code = cmd.ProcessState.ExitCode()
			for l := range s.lines {
				lines = append(lines, l)
			}
		})
		return lines, code
	}
	t.Cleanup(func() { s.stop() })
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.stderr.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s", s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return s
}

// --body-json arrives as written, integers and key order kept, and comes
// back identical; serve prints the events and, at exit, its counters; a
// second serve on the same keep is refused while the first runs.
func TestServeAndSendKeepTheBody(t *testing.T) {
	keepA := t.TempDir()
	addr := freePort(t)
	srv := startServe(t, "--keep", keepA, "--name", "alpha", "--main", "--listen", addr, "--echo")

	_, errOut, code := runIn("serve", "--keep", keepA, "--listen", freePort(t), "--for", "1s")
	if code != exitSetup || !strings.Contains(errOut, "in use by another stack") {
		t.Fatalf("a second serve on the keep: exit %d, %q", code, errOut)
	}

	const body = `{"z":1,"a":[2,3],"big":9007199254740993,"f":1.5}`
	out, errOut, code := runIn("send", "--keep", t.TempDir(), "--name", "beta", "--to", addr,
		"--body-json", body, "--expect-echo", "--timeout", "30s")
	var sum summary
	if code != exitOK || json.Unmarshal([]byte(out), &sum) != nil || sum.Done != 1 || sum.Echoed != 1 {
		t.Fatalf("send: %d %q %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "raet send: beta joining "+addr) {
		t.Fatalf("send did not say what it does: %q", errOut)
	}
	lines, code := srv.stop()
	if code != exitOK {
		t.Fatalf("serve exited %d: %s", code, srv.stderr.String())
	}
	var gotMsg, gotJoined, gotCounters bool
	for _, l := range lines {
		switch {
		case l == `{"from":"beta","body":`+body+`}`:
			gotMsg = true
		case strings.HasPrefix(l, `{"event":"joined","remote":"beta"`):
			gotJoined = true
		case strings.HasPrefix(l, `{"counters":{"messages_in":1,"messages_out":1,`):
			gotCounters = true
		}
	}
	if !gotMsg || !gotJoined || !gotCounters {
		t.Fatalf("serve printed (message %v, joined %v, counters %v):\n%s", gotMsg, gotJoined, gotCounters, strings.Join(lines, "\n"))
	}
	if !strings.Contains(srv.stderr.String(), "level=INFO msg=\"raet: joined\" remote=beta") {
		t.Fatalf("serve did not log the join:\n%s", srv.stderr.String())
	}
}
