package netsim

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Bounds on waiting in tests: long enough never to trip on a slow, raced
// machine, short enough that a hung test fails rather than stalls.
const (
	readTimeout = 5 * time.Second
	quietPeriod = 100 * time.Millisecond // to conclude nothing more arrives
)

var (
	addrA = netip.MustParseAddrPort("10.0.0.1:4510")
	addrB = netip.MustParseAddrPort("10.0.0.2:4510")
	addrC = netip.MustParseAddrPort("10.0.0.3:4510")
)

// udpConn is the part of *net.UDPConn that the Network's PacketConns have
// too.
type udpConn interface {
	net.PacketConn
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

func listen(t *testing.T, n *Network, addr netip.AddrPort, imp Impairment) udpConn {
	t.Helper()
	c, err := n.Listen(addr, imp)
	if err != nil {
		t.Fatalf("Listen(%v): %v", addr, err)
	}
	uc, ok := c.(udpConn)
	if !ok {
		t.Fatalf("Listen returned %T, which lacks the *net.UDPConn AddrPort methods", c)
	}
	t.Cleanup(func() { _ = c.Close() })
	return uc
}

func sendSeq(t *testing.T, c udpConn, to netip.AddrPort, seq uint32) {
	t.Helper()
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], seq)
	if _, err := c.WriteToUDPAddrPort(b[:], to); err != nil {
		t.Fatalf("write %d to %v: %v", seq, to, err)
	}
}

// readSeq reads one sequence number, failing the test after timeout.
func readSeq(t *testing.T, c udpConn, timeout time.Duration) (uint32, netip.AddrPort) {
	t.Helper()
	seq, from, err := tryReadSeq(c, timeout)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return seq, from
}

func tryReadSeq(c udpConn, timeout time.Duration) (uint32, netip.AddrPort, error) {
	if err := c.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return 0, netip.AddrPort{}, err
	}
	var b [16]byte
	n, from, err := c.ReadFromUDPAddrPort(b[:])
	if err != nil {
		return 0, from, err
	}
	if n != 4 {
		return 0, from, errors.New("datagram is not a sequence number")
	}
	return binary.BigEndian.Uint32(b[:4]), from, nil
}

// expectQuiet fails if c receives anything within quietPeriod.
func expectQuiet(t *testing.T, c udpConn) {
	t.Helper()
	if seq, from, err := tryReadSeq(c, quietPeriod); !errors.Is(err, errTimeout) {
		t.Fatalf("read = %d from %v, %v; want a timeout", seq, from, err)
	}
}

var errTimeout = os.ErrDeadlineExceeded

// transfer sends n sequence numbers from a to b over a link without delay
// and returns what b receives, in order. It reads after every batch exactly
// as many datagrams as the link forwarded, so b's queue never overflows and
// no timing is involved.
func transfer(t *testing.T, seed uint64, imp Impairment, n int) ([]uint32, LinkStats) {
	t.Helper()
	netw := NewNetwork(seed)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	b := listen(t, netw, addrB, imp)
	var got []uint32
	var buf [16]byte
	const batch = 500
	for i := 0; i < n; {
		// Plain calls, not the t.Helper ones: this loop is hot under -race.
		for end := min(i+batch, n); i < end; i++ {
			binary.BigEndian.PutUint32(buf[:4], uint32(i))
			if _, err := a.WriteToUDPAddrPort(buf[:4], addrB); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		if err := b.SetReadDeadline(time.Now().Add(readTimeout)); err != nil {
			t.Fatal(err)
		}
		for uint64(len(got)) < netw.LinkStats(addrA, addrB).Forwarded {
			m, from, err := b.ReadFromUDPAddrPort(buf[:])
			if err != nil || m != 4 || from != addrA {
				t.Fatalf("read = %d bytes from %v, %v; want 4 from %v", m, from, err, addrA)
			}
			got = append(got, binary.BigEndian.Uint32(buf[:4]))
		}
	}
	return got, netw.LinkStats(addrA, addrB)
}

func TestNetworkLossAndDuplication(t *testing.T) {
	const n = 20000
	imp := Impairment{Loss: 0.1, Duplicate: 0.05}
	got, s := transfer(t, 7, imp, n)

	// Exact for this seed: the decisions are reproducible.
	want := LinkStats{Received: n, Forwarded: 18802, Dropped: 2067, Duplicated: 869}
	if s != want {
		t.Errorf("stats = %+v, want %+v", s, want)
	}
	if !within(s.Dropped, n, imp.Loss) {
		t.Errorf("dropped %d of %d, want about %v", s.Dropped, n, imp.Loss*n)
	}
	if kept := int(s.Received - s.Dropped); !within(s.Duplicated, kept, imp.Duplicate) {
		t.Errorf("duplicated %d of %d, want about %v", s.Duplicated, kept, imp.Duplicate*float64(kept))
	}

	// What arrived agrees with the counts: duplicates are adjacent (no
	// delay), nothing is reordered.
	seen := make(map[uint32]int)
	var last uint32
	for i, seq := range got {
		if i > 0 && seq < last {
			t.Fatalf("%d arrived after %d without any delay", seq, last)
		}
		last = seq
		seen[seq]++
	}
	var dups uint64
	for _, c := range seen {
		dups += uint64(c - 1)
	}
	if lost := uint64(n - len(seen)); lost != s.Dropped || dups != s.Duplicated {
		t.Errorf("observed %d lost and %d duplicated, stats say %d and %d", lost, dups, s.Dropped, s.Duplicated)
	}

	// Same seed, same traffic: the same datagrams arrive.
	again, _ := transfer(t, 7, imp, n)
	if !equal(got, again) {
		t.Error("the same seed delivered a different sequence")
	}
	other, _ := transfer(t, 8, imp, n)
	if equal(got, other) {
		t.Error("a different seed delivered the same sequence")
	}
}

func TestNetworkReorder(t *testing.T) {
	const n = 200
	netw := NewNetwork(1)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	b := listen(t, netw, addrB, Impairment{Reorder: 0.2, ReorderDelay: 30 * time.Millisecond})
	for i := range n {
		sendSeq(t, a, addrB, uint32(i))
	}
	seen := make(map[uint32]bool)
	inversions := 0
	var last uint32
	for i := range n {
		seq, _ := readSeq(t, b, readTimeout)
		if i > 0 && seq < last {
			inversions++
		}
		last = seq
		seen[seq] = true
	}
	if len(seen) != n {
		t.Errorf("received %d distinct datagrams, want %d", len(seen), n)
	}
	s := netw.LinkStats(addrA, addrB)
	if s.Reordered != 47 || s.Delayed != s.Reordered || s.Forwarded != n {
		t.Errorf("stats = %+v, want 47 reordered, all of them delayed, %d forwarded", s, n)
	}
	// A reordered datagram waits ReorderDelay while later ones go through
	// at once, so each one that is not among the last sent is overtaken.
	if inversions == 0 {
		t.Error("no datagram arrived out of order")
	}
	expectQuiet(t, b)
}

func TestNetworkDelayOrdering(t *testing.T) {
	const delay = 80 * time.Millisecond
	netw := NewNetwork(1)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	b := listen(t, netw, addrB, Impairment{})
	c := listen(t, netw, addrC, Impairment{})
	if err := netw.SetImpairment(addrA, addrB, Impairment{Delay: delay}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sendSeq(t, a, addrB, 1) // delayed
	sendSeq(t, c, addrB, 2) // not delayed: overtakes
	if seq, from := readSeq(t, b, readTimeout); seq != 2 || from != addrC {
		t.Fatalf("first read %d from %v, want 2 from %v", seq, from, addrC)
	}
	if seq, from := readSeq(t, b, readTimeout); seq != 1 || from != addrA {
		t.Fatalf("second read %d from %v, want 1 from %v", seq, from, addrA)
	}
	// Timers never fire early, so this lower bound is safe; no upper bound.
	if elapsed := time.Since(start); elapsed < delay {
		t.Errorf("delayed datagram arrived after %v, want at least %v", elapsed, delay)
	}
	if s := netw.LinkStats(addrA, addrB); s.Delayed != 1 || s.Forwarded != 1 {
		t.Errorf("A to B stats = %+v, want 1 delayed and forwarded", s)
	}
}

func TestNetworkPartitionAndHeal(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	b := listen(t, netw, addrB, Impairment{})
	c := listen(t, netw, addrC, Impairment{})

	// Cut everything into B; an exact override then reopens A to B only.
	if err := netw.SetImpairment(netip.AddrPort{}, addrB, Impairment{Loss: 1}); err != nil {
		t.Fatal(err)
	}
	sendSeq(t, a, addrB, 1)
	sendSeq(t, c, addrB, 2)
	expectQuiet(t, b)
	if err := netw.SetImpairment(addrA, addrB, Impairment{}); err != nil {
		t.Fatal(err)
	}
	sendSeq(t, a, addrB, 3)
	sendSeq(t, c, addrB, 4)
	if seq, _ := readSeq(t, b, readTimeout); seq != 3 {
		t.Fatalf("read %d, want 3", seq)
	}
	expectQuiet(t, b)

	// Healing: without overrides the listener's (perfect) impairment rules.
	netw.ResetImpairment(addrA, addrB)
	netw.ResetImpairment(netip.AddrPort{}, addrB)
	sendSeq(t, c, addrB, 5)
	if seq, _ := readSeq(t, b, readTimeout); seq != 5 {
		t.Fatalf("read %d after healing, want 5", seq)
	}
	if s := netw.LinkStats(addrC, addrB); s.Received != 3 || s.Dropped != 2 || s.Forwarded != 1 {
		t.Errorf("C to B stats = %+v, want 3 received, 2 dropped, 1 forwarded", s)
	}

	if err := netw.SetImpairment(addrA, addrB, Impairment{Loss: 2}); err == nil {
		t.Error("SetImpairment accepted Loss 2")
	}
}

func TestNetworkUnroutable(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	if n, err := a.WriteToUDPAddrPort([]byte("x"), addrB); n != 1 || err != nil {
		t.Fatalf("write to nobody = %d, %v; want 1, nil (silently dropped)", n, err)
	}
	if got := netw.Stats().Unroutable; got != 1 {
		t.Errorf("Unroutable = %d, want 1", got)
	}
	// B listening later does not receive it.
	b := listen(t, netw, addrB, Impairment{})
	expectQuiet(t, b)
}

func TestNetworkRecvQueueOverflow(t *testing.T) {
	const extra = 10
	netw := NewNetwork(1)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	b := listen(t, netw, addrB, Impairment{})
	for i := range RecvQueueLen + extra {
		sendSeq(t, a, addrB, uint32(i))
	}
	s := netw.LinkStats(addrA, addrB)
	if s.Forwarded != RecvQueueLen || s.Undelivered != extra {
		t.Fatalf("stats = %+v, want %d forwarded and %d undelivered", s, RecvQueueLen, extra)
	}
	// The oldest are kept, as by a socket buffer.
	for i := range RecvQueueLen {
		if seq, _ := readSeq(t, b, readTimeout); seq != uint32(i) {
			t.Fatalf("read %d, want %d", seq, i)
		}
	}
	expectQuiet(t, b)
}

func TestNetworkQueueLimitAndClose(t *testing.T) {
	netw := NewNetwork(1)
	a := listen(t, netw, addrA, Impairment{})
	listen(t, netw, addrB, Impairment{Delay: time.Hour, Limit: 10})
	for i := range 15 {
		sendSeq(t, a, addrB, uint32(i))
	}
	if s := netw.LinkStats(addrA, addrB); s.Delayed != 10 || s.QueueDrops != 5 || s.Forwarded != 0 {
		t.Errorf("stats = %+v, want 10 delayed and 5 queue drops", s)
	}
	// Close stops the delay goroutine although datagrams are pending.
	if err := netw.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t)
	if _, err := a.WriteToUDPAddrPort([]byte("x"), addrB); !errors.Is(err, net.ErrClosed) {
		t.Errorf("write after Network.Close = %v, want net.ErrClosed", err)
	}
	if _, err := netw.Listen(addrC, Impairment{}); !errors.Is(err, ErrNetworkClosed) {
		t.Errorf("Listen after Close = %v, want ErrNetworkClosed", err)
	}
	if err := netw.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
}

func TestNetworkDelayGoroutineExitsWhenIdle(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	a := listen(t, netw, addrA, Impairment{})
	b := listen(t, netw, addrB, Impairment{Delay: time.Millisecond})
	sendSeq(t, a, addrB, 1)
	readSeq(t, b, readTimeout)
	// The queue is empty, so the delay goroutine has gone (goleak retries
	// for a while, which covers the moment it takes to return).
	goleak.VerifyNone(t)
}

func TestNetworkListen(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	listen(t, netw, addrA, Impairment{})
	if _, err := netw.Listen(addrA, Impairment{}); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("second Listen on %v = %v, want EADDRINUSE", addrA, err)
	}
	if _, err := netw.Listen(addrB, Impairment{Reorder: -1}); err == nil {
		t.Error("Listen accepted Reorder -1")
	}
	for _, bad := range []netip.AddrPort{{}, netip.MustParseAddrPort("0.0.0.0:1")} {
		if _, err := netw.Listen(bad, Impairment{}); err == nil {
			t.Errorf("Listen(%v) succeeded", bad)
		}
	}

	// Port 0 picks distinct free ports; IPv4-mapped addresses are IPv4.
	ip := netip.MustParseAddr("10.0.0.9")
	c1 := listen(t, netw, netip.AddrPortFrom(ip, 0), Impairment{})
	c2 := listen(t, netw, netip.MustParseAddrPort("[::ffff:10.0.0.9]:0"), Impairment{})
	p1 := c1.LocalAddr().(*net.UDPAddr).AddrPort()
	p2 := c2.LocalAddr().(*net.UDPAddr).AddrPort()
	if p1.Port() == 0 || p1 == p2 || p1.Addr() != ip || p2.Addr() != ip {
		t.Errorf("port-0 listeners got %v and %v", p1, p2)
	}
	sendSeq(t, c1, p2, 7)
	if seq, from := readSeq(t, c2, readTimeout); seq != 7 || from != p1 {
		t.Errorf("read %d from %v, want 7 from %v", seq, from, p1)
	}

	// A closed address can be listened on again.
	c3, err := netw.Listen(addrC, Impairment{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c3.Close(); err != nil {
		t.Fatal(err)
	}
	listen(t, netw, addrC, Impairment{})
}

func TestNetworkIPv6(t *testing.T) {
	netw := NewNetwork(1)
	defer netw.Close()
	x := netip.MustParseAddrPort("[fd00::1]:4510")
	y := netip.MustParseAddrPort("[fd00::2]:4510")
	cx := listen(t, netw, x, Impairment{})
	cy := listen(t, netw, y, Impairment{})
	sendSeq(t, cx, y, 1)
	if seq, from := readSeq(t, cy, readTimeout); seq != 1 || from != x {
		t.Errorf("read %d from %v, want 1 from %v", seq, from, x)
	}
}
