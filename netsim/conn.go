package netsim

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// datagram is one received datagram waiting for the reader.
type datagram struct {
	data []byte
	from netip.AddrPort
}

// conn is a Network's net.PacketConn.
type conn struct {
	net   *Network
	addr  netip.AddrPort
	laddr *net.UDPAddr

	mu     sync.Mutex
	queue  []datagram // ring of RecvQueueLen, allocated on first use
	head   int        // index of the oldest datagram
	n      int        // datagrams queued
	closed bool

	ready chan struct{} // cap 1: the queue became non-empty
	done  chan struct{} // closed by Close

	rd deadline // read deadline; has its own lock
	wd deadline // write deadline; has its own lock
}

var _ net.PacketConn = (*conn)(nil)

func newConn(n *Network, addr netip.AddrPort) *conn {
	return &conn{
		net:   n,
		addr:  addr,
		laddr: net.UDPAddrFromAddrPort(addr),
		ready: make(chan struct{}, 1),
		done:  make(chan struct{}),
		rd:    makeDeadline(),
		wd:    makeDeadline(),
	}
}

// deliver queues a datagram for the reader; it fails when the queue is full
// or the conn is closed. It is the conn's side of the sink interface.
func (c *conn) deliver(data []byte, from netip.AddrPort) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.n == RecvQueueLen {
		return false
	}
	if c.queue == nil {
		c.queue = make([]datagram, RecvQueueLen)
	}
	c.queue[(c.head+c.n)%RecvQueueLen] = datagram{data: data, from: from}
	c.n++
	c.signalLocked()
	return true
}

// signalLocked wakes one blocked reader if something is queued.
func (c *conn) signalLocked() {
	if c.n == 0 {
		return
	}
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// ReadFromUDPAddrPort reads one datagram into b, like the method of
// *net.UDPConn: a datagram longer than b is truncated to len(b). It blocks
// until a datagram arrives, the read deadline passes or the conn is closed.
func (c *conn) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	for {
		c.mu.Lock()
		switch {
		case c.closed:
			c.mu.Unlock()
			return 0, netip.AddrPort{}, c.opError("read", netip.AddrPort{}, net.ErrClosed)
		case c.rd.expired():
			c.signalLocked() // a datagram may wait for another reader
			c.mu.Unlock()
			return 0, netip.AddrPort{}, c.opError("read", netip.AddrPort{}, os.ErrDeadlineExceeded)
		case c.n > 0:
			d := c.queue[c.head]
			c.queue[c.head] = datagram{}
			c.head = (c.head + 1) % RecvQueueLen
			c.n--
			c.signalLocked() // pass the turn to another reader
			c.mu.Unlock()
			return copy(b, d.data), d.from, nil
		}
		expired := c.rd.wait()
		c.mu.Unlock()
		select {
		case <-c.ready:
		case <-expired:
		case <-c.done:
		}
	}
}

// ReadFrom implements net.PacketConn.
func (c *conn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, from, err := c.ReadFromUDPAddrPort(b)
	if err != nil {
		return 0, nil, err
	}
	return n, net.UDPAddrFromAddrPort(from), nil
}

// WriteToUDPAddrPort sends b to addr, like the method of *net.UDPConn. It
// never blocks: a datagram to an address nobody listens on, or to a full
// receive queue, is dropped and counted, and the write still succeeds.
func (c *conn) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	addr = unmap(addr)
	c.mu.Lock()
	closed, expired := c.closed, c.wd.expired()
	c.mu.Unlock()
	switch {
	case closed:
		return 0, c.opError("write", addr, net.ErrClosed)
	case expired:
		return 0, c.opError("write", addr, os.ErrDeadlineExceeded)
	case !addr.IsValid() || addr.Port() == 0:
		return 0, c.opError("write", addr, errors.New("invalid destination address"))
	case len(b) > MaxDatagram:
		return 0, c.opError("write", addr, fmt.Errorf("datagram of %d bytes is over %d", len(b), MaxDatagram))
	}
	c.net.route(append([]byte(nil), b...), c.addr, addr)
	return len(b), nil
}

// WriteTo implements net.PacketConn. addr must be a *net.UDPAddr or an
// address whose String is an IP:port.
func (c *conn) WriteTo(b []byte, addr net.Addr) (int, error) {
	var ap netip.AddrPort
	switch a := addr.(type) {
	case *net.UDPAddr:
		ap = a.AddrPort()
	case nil:
		return 0, c.opError("write", netip.AddrPort{}, errors.New("missing destination address"))
	default:
		var err error
		if ap, err = netip.ParseAddrPort(addr.String()); err != nil {
			return 0, c.opError("write", netip.AddrPort{}, fmt.Errorf("destination address: %w", err))
		}
	}
	return c.WriteToUDPAddrPort(b, ap)
}

// Close closes the conn: blocked and later reads and writes fail with
// net.ErrClosed, queued datagrams are discarded and the address is free to
// Listen on again. Closing twice fails with net.ErrClosed, like
// *net.UDPConn.
func (c *conn) Close() error {
	if !c.shut() {
		return c.opError("close", netip.AddrPort{}, net.ErrClosed)
	}
	c.net.forget(c)
	return nil
}

// shut marks the conn closed and wakes its readers; it reports whether it
// was open.
func (c *conn) shut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.closed = true
	c.queue, c.n = nil, 0
	close(c.done)
	c.rd.stop()
	c.wd.stop()
	return true
}

// LocalAddr returns the *net.UDPAddr the conn listens on.
func (c *conn) LocalAddr() net.Addr { return c.laddr }

// SetDeadline sets both the read and the write deadline.
func (c *conn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("set", netip.AddrPort{}, net.ErrClosed)
	}
	c.rd.set(t)
	c.wd.set(t)
	return nil
}

// SetReadDeadline sets the time after which reads, including one already
// blocked, fail with os.ErrDeadlineExceeded; the zero time means none.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("set", netip.AddrPort{}, net.ErrClosed)
	}
	c.rd.set(t)
	return nil
}

// SetWriteDeadline sets the time after which writes fail with
// os.ErrDeadlineExceeded (writes never block, so it matters only once
// passed); the zero time means none.
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.opError("set", netip.AddrPort{}, net.ErrClosed)
	}
	c.wd.set(t)
	return nil
}

// opError wraps err as *net.UDPConn would, so that callers can test it with
// errors.Is and net.Error.
func (c *conn) opError(op string, to netip.AddrPort, err error) error {
	e := &net.OpError{Op: op, Net: "udp", Source: c.laddr, Err: err}
	if to.IsValid() {
		e.Addr = net.UDPAddrFromAddrPort(to)
	}
	return e
}

// deadline is a settable point in time with a channel that is closed when
// it passes, as in net.Pipe.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // closed when the deadline has passed; never nil
}

func makeDeadline() deadline { return deadline{cancel: make(chan struct{})} }

// set moves the deadline to t; the zero time means none. A reader blocked
// on the channel from wait keeps waiting on it unless it was already
// closed, so moving a pending deadline applies to blocked reads too.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		ch := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(ch) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// stop cancels a pending timer, leaving the deadline's state as it is.
func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopLocked()
}

func (d *deadline) stopLocked() {
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the timer fired: wait until its function has closed the channel
	}
	d.timer = nil
}

// wait returns the channel that is closed when the deadline passes.
func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

// expired reports whether the deadline has passed.
func (d *deadline) expired() bool { return isClosed(d.wait()) }

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
