package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// The README's pub/sub over a road with two Block subscribers, one stopped
// with SIGINT while the publisher publishes: the publisher goes on to the
// other, and its summary says that subscription ended, unsubscribed. Flags
// may follow the FILTER.
func TestCLISubInterruptReleases(t *testing.T) {
	const n = 3000 // beyond the default HWM of 1000
	ls := make([]string, n)
	for i := range ls {
		ls[i] = fmt.Sprintf(`{"n":%d}`, i)
	}
	in := writeLines(t, ls...)
	var pout, perr, sout, serr lines
	pub := start("pub --main --listen 127.0.0.1:0 --name p --wait-subs 2 --subject t.x --policies drop_newest,block --for 2m --input "+in, &pout, &perr)
	addr := pout.wait(t, 1)[0]["addr"].(string)
	s1 := raetCmd(t, "sub", "--listen", "127.0.0.1:0", "--name", "s1", "--join", addr, "t.>", "--hwm", "100", "--policy", "block")
	out1, err := s1.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.Start(); err != nil {
		t.Fatal(err)
	}
	defer s1.Process.Kill()
	sub := start("sub --listen 127.0.0.1:0 --name s2 --join "+addr+fmt.Sprintf(" --count %d t.>", n), &sout, &serr)
	sc := bufio.NewScanner(out1)
	for i := 0; i < 3 && sc.Scan(); i++ { // the ready line and two messages
	}
	if err := s1.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := s1.Wait(); err != nil {
		t.Fatalf("raet sub after SIGINT: %v", err)
	}
	if code := exitCode(t, sub, &serr); code != exitOK {
		t.Fatalf("s2 exit %d: %s", code, serr.buf.String())
	}
	if code := exitCode(t, pub, &perr); code != exitOK {
		t.Fatalf("pub exit %d: %s", code, perr.buf.String())
	}
	got := pout.wait(t, n+2)
	sum := got[len(got)-1]
	ended, _ := sum["ended"].([]any)
	why := map[any]any{}
	for _, e := range ended {
		why[e.(map[string]any)["peer"]] = e.(map[string]any)["reason"]
	}
	if sum["summary"] != true || sum["published"] != float64(n) || why["s1"] != "unsubscribed" {
		t.Fatalf("pub summary %v", sum)
	}
	if msgs := sout.wait(t, n+1); msgs[n]["seq"] != float64(n) || msgs[n]["epoch"] == nil {
		t.Fatalf("s2's last line %v", msgs[n])
	}
}

// Flags may follow the FILTER: in raet sub 't.>' --last 2 --count 3, t.>
// alone is the filter and the flags count.
func TestCLISubFlagsAfterFilter(t *testing.T) {
	dir := laneTestDir(t)
	in := writeLines(t, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	var pout, perr, sout, serr lines
	pub := start(fmt.Sprintf("pub --over lane --dir %s --name p --subject t.x --input %s --wait-subs 1 --for 20s", dir, in), &pout, &perr)
	pout.wait(t, 1)
	sub := start(fmt.Sprintf("sub --over lane --dir %s --name s --from p t.> --last 2 --count 3", dir), &sout, &serr)
	if code := exitCode(t, sub, &serr); code != exitOK {
		t.Fatalf("sub exit %d: %s", code, serr.buf.String())
	}
	got := sout.wait(t, 4)
	for i, l := range got[1:] {
		if l["subject"] != "t.x" || l["seq"] != float64(i+1) {
			t.Fatalf("sub printed %v", got)
		}
	}
	if code := exitCode(t, pub, &perr); code != exitOK {
		t.Fatalf("pub exit %d: %s", code, perr.buf.String())
	}
}

// raet pub stopped with Ctrl-C (SIGINT) while its input is still open
// prints its summary, and says it was interrupted.
func TestCLIPubSummaryOnInterrupt(t *testing.T) {
	dir := laneTestDir(t)
	pub := raetCmd(t, "pub", "--over", "lane", "--dir", dir, "--name", "p", "--subject", "t.x")
	stdin, err := pub.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	out, err := pub.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Start(); err != nil {
		t.Fatal(err)
	}
	defer time.AfterFunc(30*time.Second, func() { pub.Process.Kill() }).Stop() // fail, not hang
	sc := bufio.NewScanner(out)
	fmt.Fprintln(stdin, `{"n":1}`)
	for i := 0; i < 2 && sc.Scan(); i++ { // ready, published
	}
	if err := pub.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Wait(); err != nil {
		t.Fatalf("raet pub after SIGINT: %v", err)
	}
	if last["summary"] != true || last["published"] != 1.0 || last["interrupted"] != true {
		t.Fatalf("last line %v", last)
	}
}
