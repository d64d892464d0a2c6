package netsim

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// loopbackUDP opens a real UDP socket on an ephemeral loopback port.
func loopbackUDP(t *testing.T, network, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func addrOf(c *net.UDPConn) netip.AddrPort {
	return unmap(c.LocalAddr().(*net.UDPAddr).AddrPort())
}

func newRelay(t *testing.T, a, b netip.AddrPort, aToB, bToA Impairment) *Relay {
	t.Helper()
	r, err := NewRelay(a, b, aToB, bToA)
	if err != nil {
		t.Fatalf("NewRelay: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// pingPong has A send requests to B through r and B answer each to its
// source address, as a RAET road does; it checks every exchange.
func pingPong(t *testing.T, r *Relay, a, b *net.UDPConn, rounds int) {
	t.Helper()
	for i := range rounds {
		sendSeq(t, a, r.ForA(), uint32(i))
		seq, from := readSeq(t, b, readTimeout)
		if seq != uint32(i) || from != r.ForB() {
			t.Fatalf("B read %d from %v, want %d from %v", seq, from, i, r.ForB())
		}
		sendSeq(t, b, from, seq+1000) // reply to the source
		seq, from = readSeq(t, a, readTimeout)
		if seq != uint32(i)+1000 || from != r.ForA() {
			t.Fatalf("A read %d from %v, want %d from %v", seq, from, i+1000, r.ForA())
		}
	}
}

func TestRelayRequestReply(t *testing.T) {
	const rounds = 20
	a := loopbackUDP(t, "udp4", "127.0.0.1")
	b := loopbackUDP(t, "udp4", "127.0.0.1")
	r := newRelay(t, addrOf(a), addrOf(b), Impairment{}, Impairment{})
	if !r.ForA().Addr().IsLoopback() || !r.ForB().Addr().IsLoopback() || r.ForA() == r.ForB() {
		t.Fatalf("ForA %v, ForB %v: want two loopback addresses", r.ForA(), r.ForB())
	}
	pingPong(t, r, a, b, rounds)
	s := r.Stats()
	for name, ls := range map[string]LinkStats{"AToB": s.AToB, "BToA": s.BToA} {
		if ls != (LinkStats{Received: rounds, Forwarded: rounds}) {
			t.Errorf("%s = %+v, want %d received and forwarded", name, ls, rounds)
		}
	}
}

func TestRelayIPv6(t *testing.T) {
	probe, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback})
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	_ = probe.Close()
	a := loopbackUDP(t, "udp6", "::1")
	b := loopbackUDP(t, "udp4", "127.0.0.1") // the families may differ
	r := newRelay(t, addrOf(a), addrOf(b), Impairment{}, Impairment{})
	if !r.ForA().Addr().Is6() || !r.ForB().Addr().Is4() {
		t.Fatalf("ForA %v, ForB %v: want [::1] for A and 127.0.0.1 for B", r.ForA(), r.ForB())
	}
	pingPong(t, r, a, b, 3)
}

func TestRelayImpairedPerDirection(t *testing.T) {
	const n = 200
	a := loopbackUDP(t, "udp4", "127.0.0.1")
	b := loopbackUDP(t, "udp4", "127.0.0.1")
	r := newRelay(t, addrOf(a), addrOf(b), Impairment{Loss: 0.5, Seed: 11}, Impairment{})
	for i := range n {
		sendSeq(t, a, r.ForA(), uint32(i))
	}
	// The relay reads everything before it counts it; wait (bounded) until
	// it has seen all n, then read what it forwarded.
	deadline := time.Now().Add(readTimeout)
	for r.Stats().AToB.Received < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	s := r.Stats().AToB
	// Exact for this seed (and the relay's fixed stream for A to B).
	if s.Received != n || s.Dropped != 88 || s.Forwarded != n-88 {
		t.Fatalf("A to B stats = %+v, want %d received, 88 dropped, the rest forwarded", s, n)
	}
	for range s.Forwarded {
		readSeq(t, b, readTimeout)
	}
	expectQuiet(t, b)
	// The other direction is perfect.
	sendSeq(t, b, r.ForB(), 1)
	if seq, _ := readSeq(t, a, readTimeout); seq != 1 {
		t.Fatalf("A read %d, want 1", seq)
	}
}

func TestRelayDelay(t *testing.T) {
	const delay = 50 * time.Millisecond
	a := loopbackUDP(t, "udp4", "127.0.0.1")
	b := loopbackUDP(t, "udp4", "127.0.0.1")
	r := newRelay(t, addrOf(a), addrOf(b), Impairment{Delay: delay}, Impairment{Delay: delay})
	start := time.Now()
	pingPong(t, r, a, b, 1)
	// Two delayed legs; timers never fire early. No upper bound.
	if rtt := time.Since(start); rtt < 2*delay {
		t.Errorf("round trip took %v, want at least %v", rtt, 2*delay)
	}
	s := r.Stats()
	if s.AToB.Delayed != 1 || s.BToA.Delayed != 1 {
		t.Errorf("stats = %+v, want one delayed datagram each way", s)
	}
}

func TestRelayStrays(t *testing.T) {
	a := loopbackUDP(t, "udp4", "127.0.0.1")
	b := loopbackUDP(t, "udp4", "127.0.0.1")
	x := loopbackUDP(t, "udp4", "127.0.0.1")
	r := newRelay(t, addrOf(a), addrOf(b), Impairment{}, Impairment{})
	sendSeq(t, x, r.ForA(), 1) // not from A: dropped
	sendSeq(t, a, r.ForA(), 2)
	if seq, _ := readSeq(t, b, readTimeout); seq != 2 {
		t.Fatalf("B read %d, want 2", seq)
	}
	if s := r.Stats(); s.Strays != 1 || s.AToB.Received != 1 {
		t.Errorf("stats = %+v, want 1 stray and 1 received", s)
	}
}

func TestNewRelayRejects(t *testing.T) {
	lo := netip.MustParseAddrPort("127.0.0.1:4510")
	for _, tc := range []struct {
		name       string
		a, b       netip.AddrPort
		aToB, bToA Impairment
	}{
		{"a not loopback", netip.MustParseAddrPort("192.0.2.1:4510"), lo, Impairment{}, Impairment{}},
		{"b unspecified", lo, netip.MustParseAddrPort("0.0.0.0:4510"), Impairment{}, Impairment{}},
		{"no port", lo, netip.MustParseAddrPort("127.0.0.1:0"), Impairment{}, Impairment{}},
		{"zero", netip.AddrPort{}, lo, Impairment{}, Impairment{}},
		{"bad aToB", lo, lo, Impairment{Loss: 3}, Impairment{}},
		{"bad bToA", lo, lo, Impairment{}, Impairment{Delay: -time.Second}},
	} {
		if r, err := NewRelay(tc.a, tc.b, tc.aToB, tc.bToA); err == nil {
			_ = r.Close()
			t.Errorf("%s: NewRelay succeeded", tc.name)
		}
	}
}

func TestRelayCloseStopsEverything(t *testing.T) {
	a := loopbackUDP(t, "udp4", "127.0.0.1")
	b := loopbackUDP(t, "udp4", "127.0.0.1")
	r, err := NewRelay(addrOf(a), addrOf(b), Impairment{Delay: time.Hour}, Impairment{})
	if err != nil {
		t.Fatal(err)
	}
	sendSeq(t, a, r.ForA(), 1) // will sit in the delay queue
	deadline := time.Now().Add(readTimeout)
	for r.Stats().AToB.Delayed == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	goleak.VerifyNone(t)
	if err := r.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	// Nothing is forwarded any more.
	sendSeq(t, a, r.ForA(), 2)
	expectQuiet(t, b)
	if s := r.Stats().AToB; s.Received != 1 || s.Forwarded != 0 {
		t.Errorf("A to B stats = %+v, want 1 received and none forwarded", s)
	}
}
