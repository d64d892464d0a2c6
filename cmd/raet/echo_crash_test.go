package main

import (
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// raet serve --echo with the bolt queue, killed with SIGKILL in the middle
// of a stream: every message it said done for has its echo either received
// already or kept in its queue (for its next run to send), but for the few
// the road holds acknowledged and unread (ReceiveQueue 1 under a durable
// queue: at most 3). Before, serve echoed from a goroutine per message, and
// the road held up to 1,152 acknowledged messages unread: 1,212 of 10,000
// echoes were lost.
func TestServeEchoSurvivesSIGKILL(t *testing.T) {
	dir := buildPlugins(t)
	db := filepath.Join(dir, "raet-queue.db")
	addr := freePort(t)
	serve := raetCmd(t, "serve", "--keep", filepath.Join(t.TempDir(), "a"), "--listen", addr, "--main",
		"--auto", "always", "--echo", "--plugins", dir, "--queue", "plugin:bolt", "--for", "150s")
	serve.Stdout, serve.Stderr = io.Discard, io.Discard
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { serve.Process.Kill(); serve.Wait() })

	s, err := road.New(&road.Config{Name: "beta", KeepDir: filepath.Join(t.TempDir(), "b"),
		Listen: "127.0.0.1:0", Auto: keep.AutoAlways, SendQueue: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	remote := joinServe(t, ctx, s, addr)

	var mu sync.Mutex
	acked, echoed := map[int]bool{}, map[int]bool{}
	enough := make(chan struct{})
	sendCtx, stopSending := context.WithCancel(ctx)
	done := make(chan *road.Call, 128)
	go func() { // the sender
		for i := 0; sendCtx.Err() == nil && i < 20_000; i++ {
			if _, err := s.Go(sendCtx, remote.Name, map[string]any{"seq": i}, done); err != nil {
				return
			}
		}
	}()
	go func() { // the outcomes: a message done is one serve acknowledged
		for c := range done {
			if c.Err == nil {
				mu.Lock()
				acked[int(c.Body.(map[string]any)["seq"].(int))] = true
				if len(acked) == 500 {
					close(enough)
				}
				mu.Unlock()
			}
		}
	}()
	go func() { // the echoes
		for m := range s.Receive() {
			var b struct {
				Seq *int `json:"seq"`
			}
			if raw, err := json.Marshal(m.Body); err == nil && json.Unmarshal(raw, &b) == nil && b.Seq != nil {
				mu.Lock()
				echoed[*b.Seq] = true
				mu.Unlock()
			}
		}
	}()
	select {
	case <-enough:
	case <-ctx.Done():
		t.Fatalf("serve acknowledged %d messages", len(acked))
	}
	if err := serve.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	serve.Wait()
	stopSending()
	time.Sleep(2 * time.Second) // what was on its way arrives
	mu.Lock()
	ackedN, echoedN := len(acked), len(echoed)
	var missing []int
	for seq := range acked {
		if !echoed[seq] {
			missing = append(missing, seq)
		}
	}
	mu.Unlock()
	queued := queuedSeqs(t, db) // an echo has no run: msgName("", seq)
	lost := 0
	for _, seq := range missing {
		if !queued[msgName("", seq)] {
			lost++
		}
	}
	t.Logf("killed: %d messages acknowledged, %d echoes received, %d queued, %d lost", ackedN, echoedN, len(queued), lost)
	if lost > 3 {
		t.Fatalf("%d acknowledged messages have no echo, received or queued; want at most the 3 the road holds", lost)
	}
}
