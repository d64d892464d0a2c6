package road

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgIO reads with recvmmsg and writes with sendmmsg, up to ioBatch
// datagrams per system call, through the socket's syscall.RawConn so that
// the Go runtime's poller does the waiting. It keeps its message headers,
// iovecs and socket addresses between calls and parses addresses itself:
// no allocation per datagram (golang.org/x/net/ipv4's ReadBatch makes a
// net.UDPAddr for each).
type mmsgIO struct {
	rc syscall.RawConn
	v6 bool // an AF_INET6 socket: IPv4 peers are written v4-mapped

	r, w mmsgSide
}

// mmsgSide is the state of one direction; its call is made once.
type mmsgSide struct {
	hdrs  [ioBatch]unix.Mmsghdr
	iovs  [ioBatch]unix.Iovec
	names [ioBatch]unix.RawSockaddrInet6 // room for either family
	off   int                            // the first header not done
	count int                            // headers in use
	n     int                            // the call's result
	errno syscall.Errno
	call  func(fd uintptr) bool
}

func newMmsgIO(c *net.UDPConn) (*mmsgIO, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	domain := -1
	var serr error
	if err := rc.Control(func(fd uintptr) {
		domain, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_DOMAIN)
	}); err != nil {
		return nil, err
	}
	if serr != nil {
		return nil, serr
	}
	if domain != unix.AF_INET && domain != unix.AF_INET6 {
		return nil, fmt.Errorf("socket domain %d", domain)
	}
	m := &mmsgIO{rc: rc, v6: domain == unix.AF_INET6}
	m.r.call = m.r.syscall(unix.SYS_RECVMMSG)
	m.w.call = m.w.syscall(unix.SYS_SENDMMSG)
	for _, s := range []*mmsgSide{&m.r, &m.w} {
		for i := range s.hdrs {
			h := &s.hdrs[i].Hdr
			h.Name = (*byte)(unsafe.Pointer(&s.names[i]))
			h.Iov = &s.iovs[i]
			h.SetIovlen(1)
		}
	}
	return m, nil
}

// syscall returns the function RawConn.Read or Write calls: one recvmmsg or
// sendmmsg of the headers from off to count. It reports false (wait for
// the socket) on EAGAIN.
func (s *mmsgSide) syscall(trap uintptr) func(fd uintptr) bool {
	return func(fd uintptr) bool {
		for {
			n, _, e := unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&s.hdrs[s.off])), uintptr(s.count-s.off), 0, 0, 0)
			switch e {
			case unix.EINTR:
				continue
			case unix.EAGAIN:
				return false
			}
			s.n, s.errno = int(n), e
			return true
		}
	}
}

func (m *mmsgIO) read(bufs [][]byte, ns []int, froms []netip.AddrPort) (int, error) {
	s := &m.r
	s.off, s.count = 0, min(len(bufs), ioBatch)
	for i := range s.count {
		s.iovs[i].Base = &bufs[i][0]
		s.iovs[i].SetLen(len(bufs[i]))
		s.hdrs[i].Hdr.Namelen = unix.SizeofSockaddrInet6
		s.hdrs[i].Hdr.Flags = 0
		s.hdrs[i].Len = 0
	}
	if err := m.rc.Read(s.call); err != nil {
		return 0, err
	}
	if s.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", s.errno)
	}
	for i := range s.n {
		from, ok := parseSockaddr(&s.names[i], s.hdrs[i].Hdr.Namelen)
		ns[i], froms[i] = int(s.hdrs[i].Len), from
		if !ok || s.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 {
			ns[i] = -1 // not a UDP/IP sender, or cut short
		}
	}
	return s.n, nil
}

func (m *mmsgIO) write(ds []datagram) (int, error) {
	failed := 0
	for len(ds) > 0 {
		s := &m.w
		s.off, s.count = 0, 0
		for _, d := range ds[:min(len(ds), ioBatch)] {
			i := s.count
			namelen, ok := m.putSockaddr(&s.names[i], d.to)
			if !ok || len(d.b) == 0 {
				failed++ // an IPv6 peer on an IPv4 socket
				continue
			}
			s.iovs[i].Base = &d.b[0]
			s.iovs[i].SetLen(len(d.b))
			s.hdrs[i].Hdr.Namelen = namelen
			s.count++
		}
		ds = ds[min(len(ds), ioBatch):]
		for s.off < s.count {
			if err := m.rc.Write(s.call); err != nil {
				return failed, err
			}
			if s.errno != 0 {
				// The datagram at off was refused (too big, no route, …);
				// those before it went out.
				failed++
				s.off++
				continue
			}
			s.off += s.n
		}
	}
	return failed, nil
}

// putSockaddr writes ap as the socket's family wants it.
func (m *mmsgIO) putSockaddr(sa *unix.RawSockaddrInet6, ap netip.AddrPort) (uint32, bool) {
	a := ap.Addr()
	if !m.v6 {
		if !a.Unmap().Is4() {
			return 0, false
		}
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:], ap.Port())
		return unix.SizeofSockaddrInet4, true
	}
	*sa = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.As16()}
	if z := a.Zone(); z != "" {
		if ifi, err := net.InterfaceByName(z); err == nil {
			sa.Scope_id = uint32(ifi.Index)
		} else if id, err := strconv.ParseUint(z, 10, 32); err == nil {
			sa.Scope_id = uint32(id)
		}
	}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], ap.Port())
	return unix.SizeofSockaddrInet6, true
}

// parseSockaddr reads a sender's address, IPv4-mapped ones unmapped.
func parseSockaddr(sa *unix.RawSockaddrInet6, n uint32) (netip.AddrPort, bool) {
	switch {
	case sa.Family == unix.AF_INET && n >= unix.SizeofSockaddrInet4:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), port), true
	case sa.Family == unix.AF_INET6 && n >= unix.SizeofSockaddrInet6:
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:])
		a := netip.AddrFrom16(sa.Addr).Unmap()
		return netip.AddrPortFrom(a, port), true
	}
	return netip.AddrPort{}, false
}
