package netsim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
)

// RecvQueueLen is how many datagrams a [Network] PacketConn holds for its
// reader; further datagrams are dropped, like a full socket buffer, and
// counted in LinkStats.Undelivered.
const RecvQueueLen = 1024

// MaxDatagram is the largest datagram a [Network] PacketConn sends (the
// largest UDP payload over IPv4).
const MaxDatagram = 65507

// firstEphemeralPort is where a Network starts when it picks ports for
// Listen on port 0.
const firstEphemeralPort = 49152

// ErrNetworkClosed is returned by Listen on a closed Network.
var ErrNetworkClosed = errors.New("netsim: network closed")

// Link names one direction between two addresses of a Network.
type Link struct {
	From, To netip.AddrPort
}

// NetworkStats counts a Network's traffic.
type NetworkStats struct {
	// Unroutable counts datagrams written to an address no PacketConn was
	// listening on, which are dropped as UDP would drop them.
	Unroutable uint64
	// Links counts, for each link that has carried a datagram, what
	// happened to its datagrams.
	Links map[Link]LinkStats
}

// Network is an in-memory datagram network. PacketConns made by Listen
// reach each other by address; a datagram written to an address nobody
// listens on vanishes. Impairments apply on delivery: each listener has a
// default for everything sent to it, and SetImpairment overrides it for a
// chosen link at run time.
//
// A Network is safe for concurrent use. Close it when done: that closes
// its PacketConns and discards delayed datagrams.
type Network struct {
	salt uint64 // mixed into every link's seed
	line *delayLine

	mu        sync.RWMutex
	conns     map[netip.AddrPort]*conn
	defaults  map[netip.AddrPort]Impairment // the Listen impairment of each address
	overrides map[Link]Impairment
	paths     map[Link]*path
	nextPort  uint16
	closed    bool

	unroutable atomic.Uint64
}

// NewNetwork returns an empty Network whose impairment decisions derive
// from seed: the same seed and the same traffic give the same decisions.
func NewNetwork(seed uint64) *Network {
	return &Network{
		salt:      splitmix64(seed),
		line:      newDelayLine(),
		conns:     make(map[netip.AddrPort]*conn),
		defaults:  make(map[netip.AddrPort]Impairment),
		overrides: make(map[Link]Impairment),
		paths:     make(map[Link]*path),
		nextPort:  firstEphemeralPort,
	}
}

// Listen returns a PacketConn bound to addr, to which every datagram sent
// is impaired by imp (unless SetImpairment says otherwise for its link).
// Port 0 picks a free port. Listening on an address in use fails with an
// error matching syscall.EADDRINUSE.
//
// The PacketConn behaves like an unconnected *net.UDPConn: its addresses
// are *net.UDPAddr, writes never block, reads honour deadlines, and after
// Close reads and writes fail with an error matching net.ErrClosed. It also
// has ReadFromUDPAddrPort and WriteToUDPAddrPort methods with the
// signatures of *net.UDPConn's.
func (n *Network) Listen(addr netip.AddrPort, imp Impairment) (net.PacketConn, error) {
	addr = unmap(addr)
	if !addr.Addr().IsValid() || addr.Addr().IsUnspecified() {
		return nil, fmt.Errorf("netsim: listen on %v: need a specific address", addr)
	}
	if err := imp.Validate(); err != nil {
		return nil, fmt.Errorf("netsim: listen on %v: %w", addr, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, fmt.Errorf("netsim: listen on %v: %w", addr, ErrNetworkClosed)
	}
	if addr.Port() == 0 {
		port, ok := n.freePort(addr.Addr())
		if !ok {
			return nil, listenError(addr, syscall.EADDRINUSE)
		}
		addr = netip.AddrPortFrom(addr.Addr(), port)
	}
	if _, ok := n.conns[addr]; ok {
		return nil, listenError(addr, syscall.EADDRINUSE)
	}
	c := newConn(n, addr)
	n.conns[addr] = c
	n.defaults[addr] = imp
	n.refreshLocked()
	return c, nil
}

// listenError wraps err the way net.ListenUDP does.
func listenError(addr netip.AddrPort, err error) error {
	return &net.OpError{Op: "listen", Net: "udp", Addr: net.UDPAddrFromAddrPort(addr), Err: err}
}

// freePort finds an unused port on ip, scanning the ephemeral range once.
func (n *Network) freePort(ip netip.Addr) (uint16, bool) {
	const span = 65536 - firstEphemeralPort
	for range span {
		p := n.nextPort
		n.nextPort++
		if n.nextPort == 0 {
			n.nextPort = firstEphemeralPort
		}
		if _, ok := n.conns[netip.AddrPortFrom(ip, p)]; !ok {
			return p, true
		}
	}
	return 0, false
}

// SetImpairment sets the impairment of datagrams sent from from to to,
// overriding to's Listen impairment, from now on (datagrams already
// delayed keep their fate). An invalid (zero) from means every sender: an
// exact link's override wins over such a wildcard. Loss 1 partitions the
// link; ResetImpairment heals it. The addresses need not be listening yet.
func (n *Network) SetImpairment(from, to netip.AddrPort, imp Impairment) error {
	if err := imp.Validate(); err != nil {
		return fmt.Errorf("netsim: set impairment %v to %v: %w", from, to, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.overrides[Link{unmap(from), unmap(to)}] = imp
	n.refreshLocked()
	return nil
}

// ResetImpairment removes the override that SetImpairment set for the
// link from from to to (from may be zero, as there), so that the next
// override or the listener's impairment applies again.
func (n *Network) ResetImpairment(from, to netip.AddrPort) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.overrides, Link{unmap(from), unmap(to)})
	n.refreshLocked()
}

// resolveLocked returns the impairment in force from from to to.
func (n *Network) resolveLocked(l Link) Impairment {
	if imp, ok := n.overrides[l]; ok {
		return imp
	}
	if imp, ok := n.overrides[Link{To: l.To}]; ok {
		return imp
	}
	return n.defaults[l.To]
}

// refreshLocked brings every path's settings up to date after a change.
func (n *Network) refreshLocked() {
	for l, p := range n.paths {
		p.set(n.resolveLocked(l))
	}
}

// pathFor returns the path of link l, creating it on first use.
func (n *Network) pathFor(l Link) *path {
	n.mu.RLock()
	p := n.paths[l]
	n.mu.RUnlock()
	if p != nil {
		return p
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if p = n.paths[l]; p == nil {
		p = newPath(n.resolveLocked(l), n.salt, linkStream(l))
		n.paths[l] = p
	}
	return p
}

// route sends data from from to to: it is impaired on the way and queued
// for to's reader, or counted as unroutable. route takes ownership of data.
func (n *Network) route(data []byte, from, to netip.AddrPort) {
	n.mu.RLock()
	dst := n.conns[to]
	n.mu.RUnlock()
	if dst == nil {
		n.unroutable.Add(1)
		return
	}
	n.line.send(n.pathFor(Link{from, to}), data, from, dst)
}

// LinkStats returns the counts of the link from from to to (zero when it
// has carried nothing).
func (n *Network) LinkStats(from, to netip.AddrPort) LinkStats {
	n.mu.RLock()
	p := n.paths[Link{unmap(from), unmap(to)}]
	n.mu.RUnlock()
	if p == nil {
		return LinkStats{}
	}
	return p.stats.snapshot()
}

// Stats returns the counts so far.
func (n *Network) Stats() NetworkStats {
	n.mu.RLock()
	defer n.mu.RUnlock()
	s := NetworkStats{Unroutable: n.unroutable.Load(), Links: make(map[Link]LinkStats, len(n.paths))}
	for l, p := range n.paths {
		s.Links[l] = p.stats.snapshot()
	}
	return s
}

// Close closes every PacketConn of the Network, discards delayed
// datagrams and stops the Network's goroutine. Listen fails afterwards.
// It is idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	n.closed = true
	conns := make([]*conn, 0, len(n.conns))
	for _, c := range n.conns {
		conns = append(conns, c)
	}
	n.mu.Unlock()
	for _, c := range conns {
		c.shut()
	}
	n.line.close()
	return nil
}

// forget removes c from the address table if it is still there.
func (n *Network) forget(c *conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.conns[c.addr] == c {
		delete(n.conns, c.addr)
		delete(n.defaults, c.addr)
		n.refreshLocked()
	}
}

// linkStream derives a link's PCG stream from its two addresses.
func linkStream(l Link) uint64 {
	h := fnv.New64a()
	for _, ap := range []netip.AddrPort{l.From, l.To} {
		b, _ := ap.MarshalBinary() // cannot fail
		_, _ = h.Write(b)
	}
	return h.Sum64()
}

// splitmix64 scrambles a seed so that nearby seeds give unrelated streams.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
