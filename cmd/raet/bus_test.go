package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lines is an output buffer read while a command writes it.
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// wait returns the JSON lines written once there are n, or fails.
func (l *lines) wait(t *testing.T, n int) []map[string]any {
	t.Helper()
	for range 1000 {
		l.mu.Lock()
		text := l.buf.String()
		l.mu.Unlock()
		var out []map[string]any
		for _, s := range strings.Split(strings.TrimSpace(text), "\n") {
			if s == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				t.Fatalf("output line %q: %v", s, err)
			}
			out = append(out, m)
		}
		if len(out) >= n {
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("fewer than %d lines: %s", n, l.buf.String())
	return nil
}

// start runs the command line in a goroutine; the channel gets its exit code.
func start(args string, out, errb *lines) chan int {
	c := make(chan int, 1)
	go func() { c <- run(strings.Fields(args), out, errb) }()
	return c
}

func exitCode(t *testing.T, c chan int, errb *lines) int {
	t.Helper()
	select {
	case code := <-c:
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("the command did not end; stderr: %s", errb.buf.String())
	}
	return -1
}

func writeLines(t *testing.T, ls ...string) string {
	p := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(ls, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func laneTestDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "rbus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// raet pub and raet sub over a lane: the subscriber prints exactly the
// matching messages, with their sequence numbers and origins.
func TestCLIPubSubLane(t *testing.T) {
	dir := laneTestDir(t)
	in := writeLines(t, `{"subject":"orders.new","body":{"n":1},"origin":"web"}`, `{"subject":"stock.x","body":{"n":2}}`,
		`{"subject":"orders.paid","body":{"n":3}}`)
	var pout, perr, sout, serr lines
	pub := start(fmt.Sprintf("pub --over lane --dir %s --name p --wait-subs 1 --input %s", dir, in), &pout, &perr)
	pout.wait(t, 1)
	sub := start(fmt.Sprintf("sub --over lane --dir %s --name s --from p --count 2 orders.>", dir), &sout, &serr)
	if code := exitCode(t, sub, &serr); code != exitOK {
		t.Fatalf("sub exit %d: %s", code, serr.buf.String())
	}
	if code := exitCode(t, pub, &perr); code != exitOK {
		t.Fatalf("pub exit %d: %s", code, perr.buf.String())
	}
	got := sout.wait(t, 3)
	if got[0]["ready"] != true || got[0]["name"] != "s" {
		t.Fatalf("ready line %v", got[0])
	}
	m1, m2 := got[1], got[2]
	if m1["kind"] != "message" || m1["subject"] != "orders.new" || m1["seq"] != 1.0 || m1["origin"] != "web" ||
		m1["body"].(map[string]any)["n"] != 1.0 || m2["subject"] != "orders.paid" || m2["seq"] != 3.0 {
		t.Fatalf("sub printed %v", got)
	}
	summary := pout.wait(t, 5)[4]
	if summary["summary"] != true || summary["published"] != 3.0 {
		t.Fatalf("pub summary %v", summary)
	}
}

// raet rep (echo) and raet req over a road: the replies come back.
func TestCLIReqRepRoad(t *testing.T) {
	var rout, rerr, qout, qerr lines
	rep := start("rep --main --listen 127.0.0.1:0 --name server --count 2 svc.>", &rout, &rerr)
	addr := rout.wait(t, 1)[0]["addr"].(string)
	req := start("req --listen 127.0.0.1:0 --name client --join "+addr+` --subject svc.echo --count 2 --body-json {"x":1}`, &qout, &qerr)
	if code := exitCode(t, req, &qerr); code != exitOK {
		t.Fatalf("req exit %d: %s", code, qerr.buf.String())
	}
	if code := exitCode(t, rep, &rerr); code != exitOK {
		t.Fatalf("rep exit %d: %s", code, rerr.buf.String())
	}
	got := qout.wait(t, 3)
	for _, r := range got[1:] {
		if r["from"] != "server" || r["body"].(map[string]any)["x"] != 1.0 {
			t.Fatalf("req printed %v", got)
		}
	}
}

// raet push and raet pull over a lane, the puller running a command.
func TestCLIPushPullLane(t *testing.T) {
	dir := laneTestDir(t)
	in := writeLines(t, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	var pout, perr, lout, lerr lines
	push := start(fmt.Sprintf("push --over lane --dir %s --name boss --subject resize --input %s", dir, in), &pout, &perr)
	pout.wait(t, 1)
	pull := start(fmt.Sprintf("pull --over lane --dir %s --name worker --from boss --count 3 --credit 2 --exec cat", dir), &lout, &lerr)
	if code := exitCode(t, push, &perr); code != exitOK {
		t.Fatalf("push exit %d: %s", code, perr.buf.String())
	}
	if code := exitCode(t, pull, &lerr); code != exitOK {
		t.Fatalf("pull exit %d: %s", code, lerr.buf.String())
	}
	got := pout.wait(t, 4)
	seen := map[float64]bool{}
	for _, r := range got[1:] {
		body := r["body"].(map[string]any) // cat echoes the command's input
		if r["puller"] != "worker" || body["subject"] != "resize" || body["id"] != r["id"] {
			t.Fatalf("push printed %v", got)
		}
		seen[body["body"].(map[string]any)["n"].(float64)] = true
	}
	if len(seen) != 3 {
		t.Fatalf("results %v", got)
	}
}

func TestCLIBusUsage(t *testing.T) {
	for _, args := range [][]string{{"sub"}, {"req", "--to", "x"}, {"rep"}, {"push"}, {"sub", "--policy", "nope", "a"}, {"pub", "--over", "smoke"}} {
		var out, errb lines
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errb.buf.String())
		}
	}
	for _, c := range []string{"pub", "sub", "req", "rep", "push", "pull"} {
		var out, errb lines
		if code := run([]string{c, "--help"}, &out, &errb); code != exitOK {
			t.Fatalf("%s --help: exit %d", c, code)
		}
		if h := out.buf.String(); !strings.Contains(h, "example:\n  raet "+c) || !strings.Contains(h, "exit status:") ||
			!strings.Contains(h, "--over lane") {
			t.Fatalf("%s --help: %s", c, h)
		}
	}
}
