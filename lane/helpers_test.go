//go:build unix

package lane

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/raet-go/raet/internal/testutil"
)

// newStack starts a stack named name in dir and closes it when the test
// ends.
func newStack(t testing.TB, dir, name string, mod func(*Config)) *Stack {
	t.Helper()
	cfg := &Config{Dir: dir, Name: name}
	if mod != nil {
		mod(cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close %s: %v", name, err)
		}
	})
	return s
}

// pair starts yards alpha and beta in a new short directory.
func pair(t testing.TB, mod func(*Config)) (alpha, beta *Stack) {
	t.Helper()
	dir := testutil.ShortTempDir(t, "rl")
	return newStack(t, dir, "alpha", mod), newStack(t, dir, "beta", mod)
}

// receive waits for one message.
func receive(t testing.TB, s *Stack) Message {
	t.Helper()
	select {
	case m, ok := <-s.Receive():
		if !ok {
			t.Fatal("receive channel closed")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message within 10s")
	}
	return Message{}
}

// noMessage checks that nothing arrives for a short while.
func noMessage(t testing.TB, s *Stack) {
	t.Helper()
	select {
	case m := <-s.Receive():
		t.Fatalf("unexpected message %+v", m)
	case <-time.After(50 * time.Millisecond):
	}
}

// rawYard binds a plain unixgram socket as yard name in dir (a peer that
// writes and reads pages by hand).
func rawYard(t testing.TB, dir, name string) *net.UnixConn {
	t.Helper()
	path := filepath.Join(dir, "lane."+name+".uxd")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readPage reads one datagram from a raw yard.
func readPage(t testing.TB, c *net.UnixConn) []byte {
	t.Helper()
	buf := make([]byte, 1<<17)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _, err := c.ReadFromUnix(buf)
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

// waitCounters polls the stack's counters until cond holds.
func waitCounters(t testing.TB, s *Stack, cond func(Counters) bool) Counters {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := s.Counters()
		if cond(c) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("counters never met the condition: %+v", c)
		}
		time.Sleep(time.Millisecond)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
