package road

import (
	"errors"
	"net"
	"net/netip"
	"syscall"

	"github.com/raet-go/raet/road/internal/core"
)

// datagram is one datagram to send, from the core.
type datagram = core.Datagram

// ioBatch is how many datagrams the reader takes from the socket in one call
// (recvmmsg on Linux), and the writer hands it in one call (sendmmsg).
const ioBatch = 32

// packetIO reads and writes datagrams, in batches where the system can.
// One goroutine reads and one writes; they may run at once.
type packetIO interface {
	// read blocks until at least one datagram arrives, then reads up to
	// len(bufs): datagram i into bufs[i], its length in ns[i], its sender in
	// froms[i]. It returns how many it read; ns[i] < 0 marks a datagram to
	// skip (truncated, or from no IP address).
	read(bufs [][]byte, ns []int, froms []netip.AddrPort) (int, error)
	// write sends the datagrams and returns how many the system refused
	// (a full buffer is waited out, not refused). A non-nil error means the
	// socket is unusable (closed).
	write(ds []datagram) (failed int, err error)
}

// newPacketIO picks the batched Linux implementation for a UDP socket,
// with segmentation offload where the kernel has it unless noOffload, and
// one datagram per call for anything else (another net.PacketConn, or
// another system).
func newPacketIO(conn net.PacketConn, noOffload bool) packetIO {
	if u, ok := conn.(*net.UDPConn); ok {
		if m, err := newMmsgIO(u, !noOffload); err == nil {
			return m
		}
		return udpIO{u}
	}
	return connIO{conn}
}

// udpIO is a UDP socket read and written one datagram per call.
type udpIO struct{ c *net.UDPConn }

func (u udpIO) read(bufs [][]byte, ns []int, froms []netip.AddrPort) (int, error) {
	n, from, err := u.c.ReadFromUDPAddrPort(bufs[0])
	if err != nil {
		return 0, err
	}
	ns[0], froms[0] = n, from
	return 1, nil
}

func (u udpIO) write(ds []datagram) (int, error) {
	failed := 0
	for _, d := range ds {
		if _, err := u.c.WriteToUDPAddrPort(d.B, d.To); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return failed, err
			}
			failed++
		}
	}
	return failed, nil
}

// connIO is any net.PacketConn (Config.PacketConn), one datagram per call.
type connIO struct{ c net.PacketConn }

func (u connIO) read(bufs [][]byte, ns []int, froms []netip.AddrPort) (int, error) {
	n, a, err := u.c.ReadFrom(bufs[0])
	if err != nil {
		return 0, err
	}
	from, err := addrPort(a)
	if err != nil {
		return 0, err
	}
	ns[0], froms[0] = n, from
	return 1, nil
}

func (u connIO) write(ds []datagram) (int, error) {
	failed := 0
	for _, d := range ds {
		if _, err := u.c.WriteTo(d.B, net.UDPAddrFromAddrPort(d.To)); err != nil {
			if errors.Is(err, net.ErrClosed) {
				return failed, err
			}
			failed++
		}
	}
	return failed, nil
}

// transient reports whether a read error leaves the socket usable: an ICMP
// error reported on a UDP socket (a peer's port or network unreachable), a
// momentary lack of buffers, an interrupted call or a deadline. Any other
// error (the socket closed under the stack, a bad descriptor, an
// error of a Config.PacketConn) is taken as final: the stack stops with it.
func transient(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range [...]syscall.Errno{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EHOSTUNREACH,
		syscall.ENETUNREACH, syscall.EHOSTDOWN, syscall.ENETDOWN, syscall.ENOBUFS, syscall.ENOMEM,
		syscall.EINTR, syscall.EAGAIN, syscall.EMSGSIZE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
