package netsim

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// maxDatagram is the size of the read buffer: no UDP datagram is larger.
const maxDatagram = 65535

// PCG streams of a Relay's two directions, so that they draw independent
// sequences from the same seed.
const (
	streamAToB = 0xa2b
	streamBToA = 0xb2a
)

// Relay forwards UDP datagrams between two loopback endpoints A and B
// through two sockets of its own, impairing each direction. Neither
// endpoint needs to know about it: A sends to [Relay.ForA] as if it were B,
// B sends to [Relay.ForB] as if it were A, and since each side sees the
// other's datagrams arrive from the relay's socket, replies to the source
// address go back through the relay.
//
//	A ──▶ ForA socket ──(aToB)──▶ ForB socket ──▶ B
//	A ◀── ForA socket ◀──(bToA)── ForB socket ◀── B
//
// Datagrams reaching a relay socket from anyone but its endpoint are
// dropped and counted in RelayStats.Strays.
//
// A Relay is safe for concurrent use. Its two reader goroutines start in
// NewRelay and stop in Close.
type Relay struct {
	a, b       netip.AddrPort
	sockA      *net.UDPConn // A talks to this one (ForA)
	sockB      *net.UDPConn // B talks to this one (ForB)
	aToB, bToA *path
	line       *delayLine
	strays     atomic.Uint64
	readErrors atomic.Uint64

	closeOnce sync.Once
	closeErr  error
	wg        sync.WaitGroup
}

// RelayStats counts a Relay's traffic per direction.
type RelayStats struct {
	// AToB counts datagrams from A to B.
	AToB LinkStats
	// BToA counts datagrams from B to A.
	BToA LinkStats
	// Strays counts datagrams that reached a relay socket from an address
	// other than its endpoint's, which are dropped.
	Strays uint64
	// ReadErrors counts failed reads on the relay's sockets, other than
	// the one that ends a reader at Close.
	ReadErrors uint64
}

// NewRelay opens two UDP sockets on the loopback address of each
// endpoint's family (127.0.0.1 or [::1]) and starts forwarding between a
// and b, impairing datagrams from a to b with aToB and from b to a with
// bToA. Both endpoints must be loopback addresses with a non-zero port.
// Close the Relay to stop it.
func NewRelay(a, b netip.AddrPort, aToB, bToA Impairment) (*Relay, error) {
	a, b = unmap(a), unmap(b)
	for _, e := range []struct {
		name string
		ap   netip.AddrPort
	}{{"a", a}, {"b", b}} {
		if !e.ap.IsValid() || !e.ap.Addr().IsLoopback() || e.ap.Port() == 0 {
			return nil, fmt.Errorf("netsim: relay endpoint %s %v is not a loopback address with a port", e.name, e.ap)
		}
	}
	if err := aToB.Validate(); err != nil {
		return nil, fmt.Errorf("netsim: relay a to b: %w", err)
	}
	if err := bToA.Validate(); err != nil {
		return nil, fmt.Errorf("netsim: relay b to a: %w", err)
	}
	sockA, err := listenLoopback(a.Addr())
	if err != nil {
		return nil, fmt.Errorf("netsim: relay socket for a: %w", err)
	}
	sockB, err := listenLoopback(b.Addr())
	if err != nil {
		_ = sockA.Close()
		return nil, fmt.Errorf("netsim: relay socket for b: %w", err)
	}
	r := &Relay{
		a: a, b: b,
		sockA: sockA, sockB: sockB,
		aToB: newPath(aToB, 0, streamAToB),
		bToA: newPath(bToA, 0, streamBToA),
		line: newDelayLine(),
	}
	r.wg.Add(2)
	go r.forward(sockA, a, r.aToB, &udpSink{conn: sockB, to: b})
	go r.forward(sockB, b, r.bToA, &udpSink{conn: sockA, to: a})
	return r, nil
}

// listenLoopback opens a UDP socket on an ephemeral port of the loopback
// address of addr's family.
func listenLoopback(addr netip.Addr) (*net.UDPConn, error) {
	lo, network := netip.AddrFrom4([4]byte{127, 0, 0, 1}), "udp4"
	if addr.Is6() {
		lo, network = netip.IPv6Loopback(), "udp6"
	}
	return net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(lo, 0)))
}

// ForA returns the address A sends to in order to reach B: B's stand-in.
func (r *Relay) ForA() netip.AddrPort { return unmap(r.sockA.LocalAddr().(*net.UDPAddr).AddrPort()) }

// ForB returns the address B sends to in order to reach A: A's stand-in.
func (r *Relay) ForB() netip.AddrPort { return unmap(r.sockB.LocalAddr().(*net.UDPAddr).AddrPort()) }

// SetImpairments changes both directions' impairments from now on
// (datagrams already delayed keep their fate). A direction's random
// sequence carries on unless its Seed changes.
func (r *Relay) SetImpairments(aToB, bToA Impairment) error {
	if err := aToB.Validate(); err != nil {
		return fmt.Errorf("netsim: relay a to b: %w", err)
	}
	if err := bToA.Validate(); err != nil {
		return fmt.Errorf("netsim: relay b to a: %w", err)
	}
	r.aToB.set(aToB)
	r.bToA.set(bToA)
	return nil
}

// Stats returns the counts so far.
func (r *Relay) Stats() RelayStats {
	return RelayStats{
		AToB:       r.aToB.stats.snapshot(),
		BToA:       r.bToA.stats.snapshot(),
		Strays:     r.strays.Load(),
		ReadErrors: r.readErrors.Load(),
	}
}

// Close stops forwarding, discards delayed datagrams, closes both sockets
// and waits for the Relay's goroutines to exit. It is idempotent: later
// calls return the first call's result.
func (r *Relay) Close() error {
	r.closeOnce.Do(func() {
		r.closeErr = errors.Join(r.sockA.Close(), r.sockB.Close())
		r.wg.Wait()
		r.line.close()
		if r.closeErr != nil {
			r.closeErr = fmt.Errorf("netsim: relay close: %w", r.closeErr)
		}
	})
	return r.closeErr
}

// forward reads datagrams from src's socket and sends those from want
// along p to dst, until the socket is closed.
func (r *Relay) forward(src *net.UDPConn, want netip.AddrPort, p *path, dst sink) {
	defer r.wg.Done()
	buf := make([]byte, maxDatagram)
	for {
		n, from, err := src.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			r.readErrors.Add(1)
			continue
		}
		if unmap(from) != want {
			r.strays.Add(1)
			continue
		}
		r.line.send(p, append([]byte(nil), buf[:n]...), from, dst)
	}
}

// udpSink writes copies to a fixed address from a relay socket.
type udpSink struct {
	conn *net.UDPConn
	to   netip.AddrPort
}

func (s *udpSink) deliver(data []byte, _ netip.AddrPort) bool {
	_, err := s.conn.WriteToUDPAddrPort(data, s.to)
	return err == nil
}

// unmap turns an IPv4-mapped IPv6 address into plain IPv4, so that one
// endpoint has one spelling.
func unmap(ap netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}
