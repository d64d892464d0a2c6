package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
)

// The default traffic of raet-go, as a new user captures it: make demo's
// and the bus commands' (pub/sub with a replay and a policy, req/rep,
// push/pull over the road, with the default AEAD coat), each process
// writing its own capture with --pcap (the stack's writer) and its session
// keys with --keylog, and tshark capturing the same traffic on lo, where
// the stacks' UDP GSO super-datagrams are seen before the kernel cuts
// them. raetdump decodes every capture with no error, opens every message
// body, and names every bus envelope.
//
// It runs on 127.35.0.1 (all of 127/8 is lo), so that the capture holds
// this test's traffic only. Without tshark, or without the root a live
// capture needs, it fails in CI (CI set; scripts/deps.sh installs tshark)
// and is skipped elsewhere.
func TestDefaultTraffic(t *testing.T) {
	tshark := needTool(t, "tshark")
	if os.Geteuid() != 0 {
		needFail(t, "a live capture on lo needs root")
	}
	raet, demo := tools(t)
	dir := t.TempDir()
	if d := os.Getenv("RAETDUMP_KEEP_TRAFFIC"); d != "" {
		dir = d // to look at the captures after the test
	}
	keylog := filepath.Join(dir, "keys.log")
	live := filepath.Join(dir, "lo.pcapng")
	stop := captureLo(t, tshark, live, "udp and host "+testHost)

	// make demo, with its own capture, key log and keeps.
	demoPcap, keeps := filepath.Join(dir, "demo.pcapng"), filepath.Join(dir, "keeps")
	runTool(t, demo, "-host", testHost, "-pcap", demoPcap, "-keylog", keylog, "-keeps", keeps)
	// The bus commands, each with its capture.
	caps := busTraffic(t, raet, dir, keylog)
	stop()

	keyArgs := []string{"-keylog", keylog, "-keep", filepath.Join(keeps, "alpha"), "-keep", filepath.Join(keeps, "beta")}
	envelopes := 0
	for _, c := range append([]string{demoPcap, live}, caps...) {
		st, n := checkCapture(t, c, keyArgs)
		envelopes += n
		name := filepath.Base(c)
		t.Logf("%s: %d records, %d road packets, %d AEAD coats opened, %d bodies read, %d envelopes, %d GSO super-datagrams",
			name, st.Records, st.Road, st.AEADOpened, st.Opened, n, st.GSO)
		switch name {
		case "lo.pcapng":
			// The demo's 100 KB message goes in runs of equal segments,
			// which the stack sends as GSO super-datagrams.
			if st.GSO == 0 {
				t.Errorf("%s: no GSO super-datagram in the capture on lo", name)
			}
		case "sub.pcapng":
			// The subscription's replay mode and policy, by name.
			_, js, _ := raetdump(t, nil, append([]string{"-r", c, "-json", "-q"}, keyArgs...)...)
			for _, want := range []string{`"kind":"sub"`, `"filters":["orders.>"]`, `"policy":"drop_newest","hwm":100,"replay":"last","replay_arg":10`,
				`"kind":"pub"`, `"subject":"orders.new","seq":1`, `"html":"<b>&</b>"`} {
				if !strings.Contains(js, want) {
					t.Errorf("%s: no %s in the JSON view", name, want)
				}
			}
		case "demo.pcapng":
			if st.AEAD == 0 || st.AEADOpened != st.AEAD {
				t.Errorf("%s: %d AEAD coats, %d opened", name, st.AEAD, st.AEADOpened)
			}
		}
	}
	if envelopes == 0 {
		t.Fatal("no bus envelope in the captures")
	}
}

// testHost is the loopback address of the captured traffic.
const testHost = "127.35.0.1"

// checkCapture runs raetdump over a capture with the keys (it must exit 0),
// then dissects it to check that no message body stays sealed and that
// every body that is a bus envelope is shown as one, named. It returns the
// stats and the number of envelopes.
func checkCapture(t *testing.T, path string, keyArgs []string) (*dissect.Stats, int) {
	t.Helper()
	code, out, errOut := raetdump(t, nil, append([]string{"-r", path, "-T"}, keyArgs...)...)
	if code != exitOK {
		t.Fatalf("raetdump -r %s: exit %d\n%s%s", path, code, out, errOut)
	}
	// The JSON view names every envelope: no "ek" key, nothing escaped.
	_, js, _ := raetdump(t, nil, append([]string{"-r", path, "-json", "-q"}, keyArgs...)...)
	if strings.Contains(js, `"ek":`) || strings.Contains(js, `\u003e`) {
		t.Errorf("%s: a raw or escaped envelope in the JSON view", path)
	}
	keys := dissect.NewKeyRing()
	for i := 0; i+1 < len(keyArgs); i += 2 {
		switch keyArgs[i] {
		case "-keylog":
			if err := keys.AddKeyLogFile(keyArgs[i+1]); err != nil {
				t.Fatal(err)
			}
		case "-keep":
			if err := keys.AddKeep(keyArgs[i+1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := dissect.NewCaptureReader(f)
	if err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(&dissect.Config{Keys: keys})
	var p dissect.Packet
	envelopes, messages := 0, 0
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for ok := d.DecodeInto(rec, &p); ok; ok = d.Next(&p) {
			if p.Err != nil {
				t.Errorf("%s: record %d: %v", path, p.N, p.Err)
			}
			h := &p.Head
			if !p.HeadOK || p.Lane || h.TransactionKind != codec.TransactionKindMessage {
				continue
			}
			switch h.PacketKind {
			case codec.PacketKindMessage, codec.PacketKindBundle:
				messages++
			}
			if strings.HasPrefix(p.BodyNote, "sealed") {
				t.Errorf("%s: record %d (%s %s): %s", path, p.N, h.TransactionKind, h.PacketKind, p.BodyNote)
			}
			envelopes += envelopesOf(t, path, &p)
		}
	}
	d.Flush()
	st := d.Stats()
	// Every frame is RAET (the captures hold this test's traffic only).
	if st.Errors != 0 || st.Sealed != 0 || messages == 0 || st.Other != 0 {
		t.Errorf("%s: %d errors %v, %d bodies sealed, %d message packets, %d frames not taken as RAET",
			path, st.Errors, st.ErrorReasons, st.Sealed, messages, st.Other)
	}
	return st, envelopes
}

// envelopesOf counts p's bus envelopes (its own body's, its bundled
// messages'), failing for a body with the envelope's version key that is
// not shown as one.
func envelopesOf(t *testing.T, path string, p *dissect.Packet) int {
	n := 0
	check := func(has bool, body interface{ Get(string) (any, bool) }, bus *dissect.BusInfo) {
		if !has {
			return
		}
		if _, isEnv := body.Get("bv"); isEnv {
			if bus == nil || bus.Envelope.Kind.String() == "" || strings.HasPrefix(bus.Envelope.Kind.String(), "BusKind(") {
				t.Errorf("%s: record %d: an envelope not named", path, p.N)
			}
			n++
		}
	}
	check(p.HasBody, p.Body, p.Bus)
	for i := range p.Bundle {
		m := &p.Bundle[i]
		check(m.HasBody, m.Body, m.Bus)
	}
	return n
}

// busTraffic runs the bus commands over the road on testHost, pairs that
// end by themselves, each with --pcap and --keylog, and returns their
// captures.
func busTraffic(t *testing.T, raet, dir, keylog string) []string {
	t.Helper()
	write := func(name string, lines ...string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	orders := write("orders.jsonl", `{"subject":"orders.new","body":{"n":1,"html":"<b>&</b>"}}`, `{"subject":"orders.paid","body":{"n":2}}`,
		`{"subject":"stock.x","body":{"n":3}}`)
	jobs := write("jobs.jsonl", `{"n":1}`, `{"n":2}`, `{"n":3}`)
	var caps []string
	flags := func(name string) []string {
		c := filepath.Join(dir, name+".pcapng")
		caps = append(caps, c)
		return []string{"--listen", testHost + ":0", "--name", name, "--pcap", c, "--keylog", keylog, "--for", "60s"}
	}
	pairs := []struct{ server, client []string }{
		{append([]string{"pub", "--main", "--wait-subs", "1", "--input", orders}, flags("pub")...),
			append([]string{"sub", "--count", "2", "--last", "10", "--policy", "drop_newest", "--hwm", "100"}, flags("sub")...)},
		{append([]string{"rep", "--main", "--count", "2"}, flags("rep")...),
			append([]string{"req", "--subject", "svc.echo", "--count", "2", `--body-json`, `{"x":"a>b"}`}, flags("req")...)},
		{append([]string{"push", "--main", "--subject", "resize", "--input", jobs}, flags("push")...),
			append([]string{"pull", "--count", "3", "--credit", "2"}, flags("pull")...)},
	}
	for _, p := range pairs {
		server := p.server
		if server[0] == "rep" {
			server = append(server, "svc.>")
		}
		srv, addr := startTool(t, raet, server...)
		client := append(p.client, "--join", addr)
		if client[0] == "sub" {
			client = append(client, "orders.>")
		}
		runTool(t, raet, client...)
		if err := srv.wait(); err != nil {
			t.Fatalf("raet %s: %v\n%s", server[0], err, srv.stderr.String())
		}
	}
	return caps
}

// tool is a command started by startTool.
type tool struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	exited chan struct{} // closed when it ended, with err
	err    error
}

func (c *tool) wait() error {
	select {
	case <-c.exited:
		return c.err
	case <-time.After(90 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("did not end")
	}
}

// startTool starts a bus command and returns it with the road address of
// its ready line.
func startTool(t *testing.T, bin string, args ...string) (*tool, string) {
	t.Helper()
	c := &tool{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	c.cmd.Stderr = &c.stderr
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var ready struct{ Addr string }
	ok := sc.Scan() && json.Unmarshal(sc.Bytes(), &ready) == nil && ready.Addr != ""
	go func() {
		io.Copy(io.Discard, out)
		c.err = c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() { c.cmd.Process.Kill(); <-c.exited })
	if !ok {
		c.cmd.Process.Kill()
		<-c.exited
		t.Fatalf("%s: no ready line (%q)\n%s", strings.Join(args, " "), sc.Text(), c.stderr.String())
	}
	return c, ready.Addr
}

// runTool runs a command to its end; it must succeed.
func runTool(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	cmd.Stdout = io.Discard
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, errb.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %s did not end\n%s", filepath.Base(bin), strings.Join(args, " "), errb.String())
	}
}

var (
	buildOnce           sync.Once
	builtRaet, builtDem string
	buildErr            error
	buildDir            string
)

// tools builds raet and the demo (make demo's program) once for the test
// binary.
func tools(t *testing.T) (raet, demo string) {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "raetdump-tools"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", buildDir+"/", "../raet", "../../examples/demo")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out.String())
		}
		builtRaet, builtDem = filepath.Join(buildDir, "raet"), filepath.Join(buildDir, "demo")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtRaet, builtDem
}

// needTool returns the path of a program the test needs. Without it the
// test fails in CI (CI set), where scripts/deps.sh installs it, and is
// skipped elsewhere.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		needFail(t, name+" is not installed (scripts/deps.sh installs it)")
	}
	return path
}

func needFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatal(why + "; CI must have it")
	}
	t.Skip(why)
}

// captureLo starts tshark capturing on lo with the capture filter into
// path, and returns the function that stops it and waits until the file
// is written.
func captureLo(t *testing.T, tshark, path, filter string) (stop func()) {
	t.Helper()
	cmd := exec.Command(tshark, "-n", "-q", "-i", "lo", "-f", filter, "-w", path)
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	started := make(chan bool, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		sc := bufio.NewScanner(errp)
		said := false
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if !said && strings.HasPrefix(sc.Text(), "Capturing on") {
				said = true
				started <- true
			}
		}
		if !said {
			started <- false
		}
	}()
	select {
	case ok := <-started:
		if !ok {
			cmd.Wait()
			t.Fatalf("tshark did not start capturing")
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("tshark did not start capturing in 30 s")
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			// What the stacks sent last is on lo by now; tshark writes
			// what it has when interrupted.
			time.Sleep(500 * time.Millisecond)
			cmd.Process.Signal(syscall.SIGINT)
			<-drained
			if err := cmd.Wait(); err != nil {
				t.Logf("tshark: %v\n%s", err, log.String())
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
