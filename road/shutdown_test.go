package road_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road"
)

// joinedInMemory starts main and other (other's Config from oc) on an
// in-memory network, closed with the test, and joins other to main.
func joinedInMemory(t *testing.T, oc road.Config) (m, o *road.Stack) {
	t.Helper()
	network := netsim.NewNetwork(1)
	t.Cleanup(func() { network.Close() })
	mainAddr := netip.MustParseAddrPort("10.0.0.1:7530")
	connM, err := network.Listen(mainAddr, netsim.Impairment{})
	if err != nil {
		t.Fatal(err)
	}
	connO, err := network.Listen(netip.MustParseAddrPort("10.0.0.2:7530"), netsim.Impairment{})
	if err != nil {
		t.Fatal(err)
	}
	m = started(t, road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, PacketConn: connM, AlivePeriod: -1})
	oc.Name, oc.PacketConn, oc.AlivePeriod = "other", connO, -1
	o = started(t, oc)
	t.Cleanup(func() { o.Close() })
	if _, err := o.Join(t.Context(), mainAddr.String()); err != nil {
		t.Fatal(err)
	}
	return m, o
}

// After Close returns, the peer has the done of every message the closing
// stack delivered: its Sends all succeed and it never had to send a
// packet again. On an in-memory network in a synctest bubble, so that only
// a lost done could make the sender resend (time moves only when every
// goroutine waits).
func TestCloseWritesTheDonesOfDeliveredMessages(t *testing.T) {
	for _, size := range []int{100, 5000} { // one packet, and segments
		synctest.Test(t, func(t *testing.T) {
			m, o := joinedInMemory(t, road.Config{MessageTimeout: 5 * time.Second})
			ctx := t.Context()
			const n = 40
			errs := make(chan error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- o.Send(ctx, "main", map[string]any{"i": i, "pad": string(make([]byte, size))})
				}()
			}
			for range n {
				<-m.Receive()
			}
			m.Close() // right after the last delivery: its done may still be queued
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("size %d: a Send failed after the receiver closed: %v", size, err)
				}
			}
			c, err := o.Counters(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if c.Retransmits != 0 || c.MessagesOut != n {
				t.Fatalf("size %d: sender retransmitted %d packets, %d messages done", size, c.Retransmits, c.MessagesOut)
			}
		})
	}
}

// Receive's channel is closed once the stack stops, after the messages it
// had delivered: a loop ranging over it reads every one and ends (in a
// synctest bubble, a range that never ended would be a deadlock).
func TestReceiveClosedOnClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, o := joinedInMemory(t, road.Config{})
		ctx := t.Context()
		const n = 5
		for i := range n {
			if err := o.Send(ctx, "main", map[string]any{"i": i}); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // the owner has put all n on the channel
		m.Close()
		got := 0
		for msg := range m.Receive() {
			if fmt.Sprint(msg.Body["i"]) != fmt.Sprint(got) {
				t.Fatalf("message %d: %v", got, msg.Body)
			}
			got++
		}
		if got != n {
			t.Fatalf("ranging over Receive after Close read %d messages, want the %d delivered", got, n)
		}
	})
}

// failingConn is a PacketConn whose reads always fail with err.
type failingConn struct {
	err    error
	reads  atomic.Int64
	closed chan struct{}
	once   sync.Once
}

func newFailingConn(err error) *failingConn {
	return &failingConn{err: err, closed: make(chan struct{})}
}

func (f *failingConn) ReadFrom([]byte) (int, net.Addr, error) {
	select {
	case <-f.closed:
		return 0, nil, net.ErrClosed
	default:
	}
	f.reads.Add(1)
	return 0, nil, f.err
}
func (f *failingConn) WriteTo(b []byte, _ net.Addr) (int, error) { return len(b), nil }
func (f *failingConn) Close() error                              { f.once.Do(func() { close(f.closed) }); return nil }
func (f *failingConn) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7530}
}
func (f *failingConn) SetDeadline(time.Time) error      { return nil }
func (f *failingConn) SetReadDeadline(time.Time) error  { return nil }
func (f *failingConn) SetWriteDeadline(time.Time) error { return nil }

// A socket that fails for good stops the stack at once, with the error:
// one read, no spinning.
func TestFailingSocketStopsTheStack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := errors.New("the device went away")
		conn := newFailingConn(broken)
		s, err := road.New(&road.Config{Name: "alpha", PacketConn: conn})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		<-s.Done()
		if took := time.Since(start); took >= time.Second {
			t.Fatalf("the stack stopped after %v", took)
		}
		if err := s.Err(); !errors.Is(err, road.ErrSocket) || !errors.Is(err, broken) {
			t.Fatalf("Err() = %v", err)
		}
		if !errors.Is(context.Cause(s.Context()), broken) {
			t.Fatalf("Context's cause = %v", context.Cause(s.Context()))
		}
		if n := conn.reads.Load(); n > 4 { // one per reader goroutine at most
			t.Fatalf("%d reads of a failed socket", n)
		}
		if err := s.Send(t.Context(), "beta", map[string]any{"n": 1}); !errors.Is(err, road.ErrClosed) {
			t.Fatalf("Send on a stopped stack: %v", err)
		}
		s.Close()
	})
}

// A socket error that leaves the socket usable (an ICMP unreachable
// reported on a read) does not stop the stack, and is not spun on.
func TestTransientSocketErrorsAreWaitedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conn := newFailingConn(&net.OpError{Op: "read", Net: "udp", Err: syscall.ECONNREFUSED})
		s, err := road.New(&road.Config{Name: "alpha", PacketConn: conn})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		select {
		case <-s.Done():
			t.Fatalf("the stack stopped: %v", s.Err())
		default:
		}
		// Backing off from 1ms to 100ms: about 16 reads in the first second.
		if n := conn.reads.Load(); n > 40 {
			t.Fatalf("%d reads in a second of errors", n)
		}
		s.Close()
		if err := s.Err(); !errors.Is(err, road.ErrClosed) {
			t.Fatalf("Err() after Close = %v", err)
		}
	})
}
