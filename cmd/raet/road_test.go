package main

import (
	"bufio"
	"encoding/json"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func freePort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// keygen, serve with keys pending for an operator, send waiting, keys list
// showing the pending role, keys accept, and the message arriving.
func TestRoadCommandsWithOperator(t *testing.T) {
	dirA, dirB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	out, code := raet(t, "keygen", "--keep", dirA, "--name", "alpha")
	var kg map[string]string
	if code != 0 || json.Unmarshal([]byte(out), &kg) != nil || len(kg["verhex"]) != 64 || kg["name"] != "alpha" {
		t.Fatalf("keygen: %d %q", code, out)
	}
	if _, code := raet(t, "keygen", "--keep", dirA, "--name", "alpha"); code != exitFailure {
		t.Fatalf("keygen over existing keys exited %d", code)
	}
	addr := freePort(t)
	serve := raetCmd(t, "serve", "--keep", dirA, "--listen", addr, "--main", "--auto", "never", "--for", "60s")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	type result struct {
		out  string
		code int
	}
	sent := make(chan result, 1)
	go func() {
		out, code := raet(t, "send", "--keep", dirB, "--name", "beta", "--listen", "127.0.0.1:0", "--to", addr,
			"--body-json", `{"subject":"let me in"}`, "--timeout", "40s")
		sent <- result{out, code}
	}()

	// The operator sees beta's keys pending, and accepts them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, code := raet(t, "keys", "list", "--keep", dirA)
		if code == 0 && strings.Contains(out, `"role":"beta"`) && strings.Contains(out, `"acceptance":"pending"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("beta never pending: %d %q", code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, code := raet(t, "keys", "accept", "--keep", dirA, "beta"); code != 0 || !strings.Contains(out, "accepted") {
		t.Fatalf("keys accept: %d %q", code, out)
	}
	r := <-sent
	var sum summary
	if r.code != 0 || json.Unmarshal([]byte(r.out), &sum) != nil || sum.Done != 1 {
		t.Fatalf("send: %d %q", r.code, r.out)
	}
	// serve prints the events (beta pending, then joined and allowed) and
	// the message.
	var events []string
	for msg := false; !msg; {
		select {
		case line := <-lines:
			var ev eventLine
			switch {
			case strings.HasPrefix(line, `{"from":`):
				if line != `{"from":"beta","body":{"subject":"let me in"}}` {
					t.Fatalf("serve printed %q", line)
				}
				msg = true
			case json.Unmarshal([]byte(line), &ev) == nil && ev.Event != "":
				events = append(events, ev.Event+":"+ev.Remote+":"+ev.Reason)
			default:
				t.Fatalf("serve printed %q", line)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("serve printed no message; events %q", events)
		}
	}
	if len(events) < 2 || events[0] != "pending:beta:pending-ours" || !slices.Contains(events, "joined:beta:") {
		t.Fatalf("serve's events: %q", events)
	}
	if _, code := raet(t, "keys", "reject", "--keep", dirA); code != exitUsage {
		t.Fatalf("keys reject without a name exited %d", code)
	}
	if _, code := raet(t, "send", "--to", addr); code != exitUsage {
		t.Fatalf("send without a body exited %d", code)
	}
}
