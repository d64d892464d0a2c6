//go:build unix

package lane

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/internal/testutil"
)

// Close lets a Send in progress write the rest of its book: a receiver
// that was busy when Close began still gets every page.
func TestCloseLetsSendsInProgressFinish(t *testing.T) {
	dir := testutil.ShortTempDir(t, "rl")
	raw := rawYard(t, dir, "beta") // reads nothing until told
	alpha := newStack(t, dir, "alpha", func(c *Config) { c.Linger = 20 * time.Second })
	sent := make(chan error, 1)
	go func() { sent <- alpha.Send(ctxT(t), "beta", map[string]any{"data": strings.Repeat("x", 1<<20)}) }()
	waitCounters(t, alpha, func(c Counters) bool { return c.Retries > 0 }) // beta's queue is full
	closed := make(chan error, 1)
	go func() { closed <- alpha.Close() }()
	for deadline := time.Now().Add(10 * time.Second); alpha.state.Load() != stateClosed; { // Close has begun
		if time.Now().After(deadline) {
			t.Fatal("Close never began")
		}
		time.Sleep(time.Millisecond)
	}
	if err := alpha.Send(ctxT(t), "beta", map[string]any{"n": 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("a Send after Close began: %v", err)
	}
	// Read beta's queue: the book's pages must all be there, and the Send
	// must succeed.
	var h codeclane.Head
	if _, err := codeclane.Decode(readPage(t, raw), &h); err != nil {
		t.Fatal(err)
	}
	pages := 1
	for ; pages < int(h.PageCount); pages++ {
		readPage(t, raw)
	}
	if err := <-sent; err != nil {
		t.Fatalf("the Send in progress failed: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if c := alpha.Counters(); c.PagesOut != uint64(pages) || c.MessagesOut != 1 || pages < 16 {
		t.Fatalf("%d pages written, %d read, %d messages sent", c.PagesOut, pages, c.MessagesOut)
	}
}

// A socket that fails for good stops the yard, with the error.
func TestFailingSocketStopsTheYard(t *testing.T) {
	alpha, _ := pair(t, nil)
	alpha.sock.conn.Close() // under the stack's feet
	select {
	case <-alpha.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the yard did not stop")
	}
	if err := alpha.Err(); !errors.Is(err, ErrSocket) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Err() = %v", err)
	}
	if err := alpha.Send(ctxT(t), "beta", map[string]any{"n": 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send on a stopped yard: %v", err)
	}
}
