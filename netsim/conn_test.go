package netsim

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// readResult is what a ReadFrom in a goroutine returned.
type readResult struct {
	n    int
	from net.Addr
	err  error
}

// blockedRead starts a ReadFrom on c in a goroutine.
func blockedRead(c net.PacketConn) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		var b [64]byte
		n, from, err := c.ReadFrom(b[:])
		ch <- readResult{n, from, err}
	}()
	return ch
}

// await returns the read's result, failing the test after readTimeout.
func await(t *testing.T, ch <-chan readResult) readResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(readTimeout):
		t.Fatal("ReadFrom still blocked")
		return readResult{}
	}
}

// assertStillBlocked fails if the read returns within quietPeriod.
func assertStillBlocked(t *testing.T, ch <-chan readResult) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("ReadFrom returned %+v, want it still blocked", r)
	case <-time.After(quietPeriod):
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) && errors.As(err, &ne) && ne.Timeout()
}

func TestConnReadDeadlineUnblocks(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	b := listen(t, netw, addrB, Impairment{})
	ch := blockedRead(b)
	assertStillBlocked(t, ch)
	if err := b.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch); !isTimeout(r.err) {
		t.Fatalf("ReadFrom = %+v, want a timeout net.Error matching os.ErrDeadlineExceeded", r)
	}
	// The deadline stays passed until moved.
	if r := await(t, blockedRead(b)); !isTimeout(r.err) {
		t.Fatalf("ReadFrom after the deadline = %+v, want a timeout", r)
	}
}

func TestConnDeadlineMovedWhileBlocked(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	b := listen(t, netw, addrB, Impairment{})

	// A far deadline, then a near one: the blocked read times out.
	if err := b.SetDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	ch := blockedRead(b)
	assertStillBlocked(t, ch)
	if err := b.SetReadDeadline(time.Now().Add(10 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch); !isTimeout(r.err) {
		t.Fatalf("ReadFrom = %+v, want a timeout", r)
	}

	// A passed deadline, then none: reads block and get data again.
	if err := b.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	ch = blockedRead(b)
	assertStillBlocked(t, ch)
	sendSeq(t, a, addrB, 9)
	r := await(t, ch)
	if r.err != nil || r.n != 4 || r.from.String() != addrA.String() {
		t.Fatalf("ReadFrom = %+v, want 4 bytes from %v", r, addrA)
	}
	if _, ok := r.from.(*net.UDPAddr); !ok {
		t.Errorf("ReadFrom address is %T, want *net.UDPAddr", r.from)
	}

	// A deadline in the past fails at once, even with data queued.
	sendSeq(t, a, addrB, 10)
	if err := b.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, blockedRead(b)); !isTimeout(r.err) {
		t.Fatalf("ReadFrom with a past deadline = %+v, want a timeout", r)
	}
	if seq, _ := readSeq(t, b, readTimeout); seq != 10 {
		t.Fatalf("read %d after clearing the deadline, want 10", seq)
	}
}

func TestConnCloseUnblocksRead(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	c, err := netw.Listen(addrB, Impairment{})
	if err != nil {
		t.Fatal(err)
	}
	ch := blockedRead(c)
	assertStillBlocked(t, ch)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch); !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("blocked ReadFrom after Close = %+v, want net.ErrClosed", r)
	}
	if r := await(t, blockedRead(c)); !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("ReadFrom after Close = %+v, want net.ErrClosed", r)
	}
	if _, err := c.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(addrA)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("WriteTo after Close = %v, want net.ErrClosed", err)
	}
	if err := c.SetDeadline(time.Now()); !errors.Is(err, net.ErrClosed) {
		t.Errorf("SetDeadline after Close = %v, want net.ErrClosed", err)
	}
	if err := c.Close(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("second Close = %v, want net.ErrClosed", err)
	}
}

func TestConnManyReadersOneClose(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	c, err := netw.Listen(addrB, Impairment{})
	if err != nil {
		t.Fatal(err)
	}
	chs := make([]<-chan readResult, 4)
	for i := range chs {
		chs[i] = blockedRead(c)
	}
	if err := netw.Close(); err != nil { // closes c too
		t.Fatal(err)
	}
	for _, ch := range chs {
		if r := await(t, ch); !errors.Is(r.err, net.ErrClosed) {
			t.Errorf("ReadFrom = %+v, want net.ErrClosed", r)
		}
	}
}

func TestConnDatagramSemantics(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	b := listen(t, netw, addrB, Impairment{})

	// The sender may reuse its buffer at once; a short read truncates.
	msg := []byte("hello, estate")
	if _, err := a.WriteTo(msg, net.UDPAddrFromAddrPort(addrB)); err != nil {
		t.Fatal(err)
	}
	copy(msg, "XXXXX")
	var small [5]byte
	if err := b.SetReadDeadline(time.Now().Add(readTimeout)); err != nil {
		t.Fatal(err)
	}
	n, _, err := b.ReadFrom(small[:])
	if err != nil || string(small[:n]) != "hello" {
		t.Fatalf("short read = %q, %v; want %q", small[:n], err, "hello")
	}

	// Any net.Addr that prints as IP:port is a destination.
	if _, err := a.WriteTo([]byte("ab"), stringAddr(addrB.String())); err != nil {
		t.Errorf("WriteTo with a plain net.Addr: %v", err)
	}
	for _, bad := range []net.Addr{nil, stringAddr("not an address"), &net.UDPAddr{}} {
		if _, err := a.WriteTo([]byte("x"), bad); err == nil {
			t.Errorf("WriteTo(%v) succeeded", bad)
		}
	}
	if _, err := a.WriteToUDPAddrPort(make([]byte, MaxDatagram+1), addrB); err == nil {
		t.Error("oversized write succeeded")
	}

	// A passed write deadline fails writes.
	if err := a.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteToUDPAddrPort([]byte("x"), addrB); !isTimeout(err) {
		t.Errorf("write past the deadline = %v, want a timeout", err)
	}
	if got := a.LocalAddr().String(); got != addrA.String() {
		t.Errorf("LocalAddr = %s, want %v", got, addrA)
	}
}

// stringAddr is a net.Addr that is not a *net.UDPAddr.
type stringAddr string

func (s stringAddr) Network() string { return "udp" }
func (s stringAddr) String() string  { return string(s) }
