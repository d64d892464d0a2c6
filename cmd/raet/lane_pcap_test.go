//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/raet-go/raet/internal/testutil"
	"github.com/raet-go/raet/lane"
)

// laneDumpLine is what raetdump -json prints for a lane page (the fields
// the test looks at).
type laneDumpLine struct {
	Lane     bool
	Src, Dst string
	Len      int
	Head     struct {
		SN, DN string
		PN, PC int
	}
	Names    struct{ PK string }
	Body     map[string]any
	BodyNote string `json:"body_note"`
	Error    string
}

// raet lane serve --pcap writes what it sends and receives as a pcapng
// capture that raetdump reads: every page with its socket paths and head,
// the body of each book with the page that completes it.
func TestLaneServePcap(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to run raetdump:", err)
	}
	dir := testutil.ShortTempDir(t, "rl")
	capture := filepath.Join(dir, "beta.pcapng")
	srv := serve(t, dir, "beta", "--echo", "--pcap", capture)
	if out, code := raet(t, "lane", "send", "--dir", dir, "--name", "alpha", "--to", "beta",
		"--body-json", `{"subject":"lane hello","n":1}`, "--expect-echo", "--timeout", "30s"); code != exitOK {
		t.Fatalf("send exited %d: %s", code, out)
	}
	if out, code := raet(t, "lane", "send", "--dir", dir, "--name", "alpha", "--to", "beta",
		"--size", "150000", "--body", "msgpack", "--expect-echo", "--timeout", "30s"); code != exitOK {
		t.Fatalf("send exited %d: %s", code, out)
	}
	srv.line(t)
	srv.line(t)
	if code := srv.stop(t); code != exitOK {
		t.Fatalf("serve exited %d: %s", code, srv.stderr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goCmd, "run", "./cmd/raetdump", "-r", capture, "-json")
	cmd.Dir = filepath.Join("..", "..") // the module's root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("raetdump: %v\n%s", err, stderr.String())
	}
	t.Logf("raetdump stderr:\n%s", stderr.String())

	alpha, beta := lane.SocketPath(dir, "lane", "alpha"), lane.SocketPath(dir, "lane", "beta")
	type want struct {
		in       bool // alpha to beta, else the echo
		pn, pc   int
		pk, body string // the body's "subject", or the length of its "data"; "" no body yet
	}
	wants := []want{
		{true, 0, 1, "json", "lane hello"}, {false, 0, 1, "json", "lane hello"},
		{true, 0, 3, "pack", ""}, {true, 1, 3, "pack", ""}, {true, 2, 3, "pack", "150000"},
		{false, 0, 3, "json", ""}, {false, 1, 3, "json", ""}, {false, 2, 3, "json", "150000"},
	}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	var n int
	for ; sc.Scan(); n++ {
		var l laneDumpLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d: %v: %.300s", n, err, sc.Bytes())
		}
		if n >= len(wants) {
			t.Fatalf("more lines than pages: %.300s", sc.Bytes())
		}
		w := wants[n]
		src, dst, sn, dn := alpha, beta, "alpha", "beta"
		if !w.in {
			src, dst, sn, dn = beta, alpha, "beta", "alpha"
		}
		if !l.Lane || l.Src != src || l.Dst != dst || l.Error != "" {
			t.Fatalf("line %d: lane %v %s > %s, error %q", n, l.Lane, l.Src, l.Dst, l.Error)
		}
		if l.Head.SN != sn || l.Head.DN != dn || l.Head.PN != w.pn || l.Head.PC != w.pc || l.Names.PK != w.pk {
			t.Fatalf("line %d: head %+v %+v, want %+v", n, l.Head, l.Names, w)
		}
		var body string
		switch {
		case l.Body == nil && l.BodyNote == "":
			t.Fatalf("line %d: neither body nor body_note", n)
		case l.Body == nil:
		case l.Body["subject"] != nil:
			body, _ = l.Body["subject"].(string)
		default:
			d, _ := l.Body["data"].(string)
			body = strconv.Itoa(len(d))
		}
		if body != w.body {
			t.Fatalf("line %d: body %q, want %q (note %q)", n, body, w.body, l.BodyNote)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(wants) {
		t.Fatalf("raetdump showed %d pages, want %d", n, len(wants))
	}
	if fi, err := os.Stat(capture); err != nil || fi.Size() == 0 {
		t.Fatalf("capture: %v", err)
	}
}

// A capture file that cannot be created is a setup error, and nothing is
// bound.
func TestLaneServePcapError(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	var stderr bytes.Buffer
	code := run([]string{"lane", "serve", "--dir", dir, "--name", "beta", "--pcap", filepath.Join(dir, "no", "such", "dir")},
		&bytes.Buffer{}, &stderr)
	if code != exitSetup {
		t.Fatalf("exit %d, want %d: %s", code, exitSetup, stderr.String())
	}
	if _, err := os.Lstat(lane.SocketPath(dir, "lane", "beta")); err == nil {
		t.Fatal("the socket was bound")
	}
}
