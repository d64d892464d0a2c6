package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/plugins/queue/boltqueue"
)

// queuedBodies lists the bodies of the messages the bolt database at path
// holds.
func queuedBodies(t *testing.T, path string) [][]byte {
	t.Helper()
	q, err := boltqueue.Open(path, boltqueue.Options{LockTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ms, err := q.Pending(context.Background(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(ms))
	for i, m := range ms {
		out[i] = m.Body
	}
	return out
}

// queuedSeqs lists the generated messages (run id and seq) the bolt
// database at path holds.
func queuedSeqs(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, body := range queuedBodies(t, path) {
		var b struct {
			Run string `json:"run"`
			Seq int    `json:"seq"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatalf("queued body %q: %v", body, err)
		}
		out[msgName(b.Run, b.Seq)] = true
	}
	return out
}

func msgName(run string, seq int) string { return fmt.Sprintf("%s/%d", run, seq) }

// raet send with the bolt queue, killed with SIGKILL in the middle of a
// stream of messages and started again on the same keep and queue: the
// restarted sender sends what its queue holds, and the receiver gets every
// message exactly once: those delivered before the kill whose done the
// sender never recorded are answered done by their message ids and not
// delivered again.
func TestSendSurvivesSIGKILL(t *testing.T) {
	dir := buildPlugins(t)
	db := filepath.Join(dir, "raet-queue.db")
	addr, saddr := freePort(t), freePort(t)
	keepB := filepath.Join(t.TempDir(), "b")
	serve := raetCmd(t, "serve", "--listen", addr, "--main", "--auto", "always", "--for", "150s")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })
	type line struct {
		From string         `json:"from"`
		Body map[string]any `json:"body"`
	}
	lines := make(chan line, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l line // a message; serve's event and counters lines have no body
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Body != nil {
				lines <- l
			}
		}
		close(lines)
	}()
	got := map[string]int{}
	take := func(l line) {
		if l.From != "beta" {
			t.Fatalf("a message from %q", l.From)
		}
		run, _ := l.Body["run"].(string)
		seq, _ := l.Body["seq"].(float64)
		if run == "" {
			run, seq = "after restart", 0
		}
		got[msgName(run, int(seq))]++
	}
	send := func(args ...string) []string {
		return append([]string{"send", "--keep", keepB, "--name", "beta", "--listen", saddr, "--to", addr,
			"--plugins", dir, "--queue", "plugin:bolt", "--timeout", "90s"}, args...)
	}

	// The first run: killed once the receiver has 40 of its messages.
	first := raetCmd(t, send("--size", "300", "--count", "400", "--window", "16")...)
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(60 * time.Second)
	for n := 0; n < 40; n++ {
		select {
		case l := <-lines:
			take(l)
		case <-deadline:
			first.Process.Kill()
			t.Fatalf("the receiver got %d messages of the first run", n)
		}
	}
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	// What was on its way when it died arrives, or does not.
	for drained := false; !drained; {
		select {
		case l := <-lines:
			take(l)
		case <-time.After(time.Second):
			drained = true
		}
	}
	before := len(got)
	queued := queuedSeqs(t, db)
	overlap := 0
	for name := range queued {
		if got[name] > 0 {
			overlap++ // delivered, but the sender died before its queue forgot it
		}
	}
	t.Logf("killed: %d messages delivered, %d still queued, %d of them delivered already", before, len(queued), overlap)
	if len(queued) == 0 {
		t.Fatal("the first run left nothing queued: it was not killed mid-stream")
	}

	// The second run sends what the first left, and one message of its own.
	out, code := raet(t, send("--body-json", `{"after":"restart"}`)...)
	var sum summary
	if code != exitOK || json.Unmarshal([]byte(out), &sum) != nil || sum.Done != 1 || sum.Resent != len(queued) {
		t.Fatalf("restarted send: exit %d, %q; want %d resent", code, out, len(queued))
	}
	want := len(got) + len(queued) - overlap + 1
	deadline = time.After(30 * time.Second)
	for len(got) < want {
		select {
		case l := <-lines:
			take(l)
		case <-deadline:
			for name := range queued {
				if got[name] == 0 {
					t.Errorf("queued message %s never came", name)
				}
			}
			t.Fatalf("%d distinct messages received, want %d: %v", len(got), want, got)
		}
	}
	select {
	case l := <-lines:
		take(l)
	case <-time.After(time.Second):
	}
	for name, n := range got {
		if n != 1 {
			t.Errorf("message %s delivered %d times", name, n)
		}
	}
	for name := range queued {
		if got[name] != 1 {
			t.Errorf("queued message %s delivered %d times", name, got[name])
		}
	}
	if left := queuedSeqs(t, db); len(left) != 0 {
		t.Fatalf("the queue still holds %d messages", len(left))
	}
}
