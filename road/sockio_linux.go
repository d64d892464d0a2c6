package road

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsgIO reads with recvmmsg and writes with sendmmsg, up to ioBatch
// datagrams per system call, through the socket's syscall.RawConn so that
// the Go runtime's poller does the waiting. It keeps its message headers,
// iovecs and socket addresses between calls and parses addresses itself:
// no allocation per datagram (golang.org/x/net/ipv4's ReadBatch makes a
// net.UDPAddr for each).
//
// Where the kernel offers them (found at start), it also uses UDP
// segmentation offload: a run of equal-sized datagrams to one destination
// (a segmented message, a burst of acks) goes to the kernel as one message
// with UDP_SEGMENT, and UDP_GRO lets the kernel hand over several datagrams
// from one sender in one buffer, which read splits. Without them (an older
// kernel, another system, a device that cannot segment) every datagram is
// its own message, as before; the datagrams on the wire are the same.
type mmsgIO struct {
	rc syscall.RawConn
	v6 bool // an AF_INET6 socket: IPv4 peers are written v4-mapped
	// gso: write sends runs as one UDP_SEGMENT message; turned off for
	// good when the kernel says the device cannot (EIO).
	gso bool
	// gro is non-nil when UDP_GRO is on: read receives into its buffers
	// and hands out one datagram per caller buffer.
	gro *groBuffers
	// groRead is the function RawConn.Read calls while UDP_GRO is on:
	// one recvmmsg into buffers it takes from gro.free, given back when
	// nothing is there (EAGAIN): a GRO read holds no buffer while the
	// poller waits, and an idle socket's list soon none.
	groRead func(fd uintptr) bool
	waits   atomic.Uint64 // groRead's calls that found nothing (a wait follows)

	r, w mmsgSide
}

const (
	// maxGSOSegments and maxGSOBytes bound one UDP_SEGMENT message: the
	// kernel takes up to 64 segments (UDP_MAX_SEGMENTS before Linux 6.x
	// raised it) and at most an IP packet's worth of payload.
	maxGSOSegments = 64
	maxGSOBytes    = 65000
	// groBufs is the most buffers one read takes while UDP_GRO is on: as
	// many as without it, since most may hold one datagram each. A read
	// takes twice as many as the last one when it filled them all, else as
	// many as it filled (at least one), from its socket's free list, and
	// gives them back once their datagrams are handed out, and while it
	// waits for the socket; the list gives them up as the reads stop: an
	// idle socket holds none.
	groBufs = ioBatch
	// ctrlWords is the room of one control message: a header and an int,
	// in uint64s so that the header is aligned.
	ctrlWords = (unix.SizeofCmsghdr + 8 + 7) / 8
)

// mmsgSide is the state of one direction; its call is made once.
type mmsgSide struct {
	hdrs  [ioBatch]unix.Mmsghdr
	iovs  [ioBatch]unix.Iovec
	names [ioBatch]unix.RawSockaddrInet6 // room for either family
	ctrl  [ioBatch][ctrlWords]uint64     // a UDP_SEGMENT or UDP_GRO control message per header
	first [ioBatch]int                   // write: the index in the batch of header i's first datagram
	segs  [ioBatch]int                   // write: how many datagrams header i carries
	off   int                            // the first header not done
	count int                            // headers in use
	n     int                            // the call's result
	errno syscall.Errno
	call  func(fd uintptr) bool
	calls atomic.Uint64 // system calls made (EAGAIN included)
}

// groKeep is the period of a GRO socket's tick, and groBusy the reads in
// one that make the socket busy: its free list keeps buffers through the
// next tick (as many as one read since the last took), then gives them all
// back once a tick saw fewer reads. The tick is armed by a read while it is
// not, and rearmed by itself while the socket is busy: no timer per read.
const (
	groKeep = 50 * time.Millisecond
	groBusy = 64
)

// groPool holds the GRO buffers of sockets that are not busy (and those
// their lists give back), for every socket of the process: each garbage
// collection empties it, so that a socket read now and then holds none.
var groPool = sync.Pool{New: func() any { return new([maxDatagram]byte) }}

// groFree is a busy socket's free list of the GRO buffers no read holds.
// The number a read takes goes up and down with the traffic; from groPool
// alone, which every collection empties, a busy stack made a 64 KiB buffer
// each time it went up again (7% of the bytes a 16 KiB exchange
// allocated, and so of its collections). The list keeps them across
// collections while the socket is busy: a read costs a lock, and a pop and
// a push per buffer.
type groFree struct {
	mu      sync.Mutex
	arrs    [groBufs]*[maxDatagram]byte
	n       int // buffers in arrs
	need    int // the most buffers one read took since the last tick
	reads   int // reads since the last tick
	outside int // buffers taken from groPool: what the list did not have
	busy    bool
	armed   bool
	closed  bool
	keep    time.Duration // the tick's period: groKeep
	tick    *time.Timer   // calls decay; made by the first read
}

// get fills dst with buffers from the list, and from groPool past its end.
func (f *groFree) get(dst []*[maxDatagram]byte) {
	f.mu.Lock()
	f.reads++
	f.need = max(f.need, len(dst))
	for i := range dst {
		if f.n > 0 {
			f.n--
			dst[i], f.arrs[f.n] = f.arrs[f.n], nil
		} else {
			dst[i] = groPool.Get().(*[maxDatagram]byte)
			f.outside++
		}
	}
	if !f.armed && !f.closed {
		f.armed = true
		if f.tick == nil {
			f.tick = time.AfterFunc(f.keep, f.decay)
		} else {
			f.tick.Reset(f.keep)
		}
	}
	f.mu.Unlock()
}

// put takes the buffers back: into the list while the socket is busy (up
// to groBufs), else into groPool.
func (f *groFree) put(src []*[maxDatagram]byte) {
	f.mu.Lock()
	for _, a := range src {
		switch {
		case a == nil:
		case f.busy && !f.closed && f.n < groBufs:
			f.arrs[f.n] = a
			f.n++
		default:
			groPool.Put(a)
		}
	}
	f.mu.Unlock()
}

// decay is the tick: the socket is busy while a tick saw groBusy reads;
// then the list keeps as many buffers as one read since the last took,
// else it gives them all to groPool and the tick stops.
func (f *groFree) decay() {
	f.mu.Lock()
	f.busy = f.reads >= groBusy && !f.closed
	keep := 0
	if f.busy {
		keep = min(f.n, f.need)
	}
	for i := keep; i < f.n; i++ {
		groPool.Put(f.arrs[i])
		f.arrs[i] = nil
	}
	f.n, f.need, f.reads = keep, 0, 0
	f.armed = f.busy
	if f.armed {
		f.tick.Reset(f.keep)
	}
	f.mu.Unlock()
}

// close drops the list for good (the socket is closed) and stops the tick.
func (f *groFree) close() {
	f.mu.Lock()
	f.closed, f.armed, f.busy = true, false, false
	clear(f.arrs[:f.n])
	f.n = 0
	if f.tick != nil {
		f.tick.Stop()
	}
	f.mu.Unlock()
}

// groBuffers are read's buffers while UDP_GRO is on, and what is left of
// the last recvmmsg: buffers next to count, the first from byte off.
type groBuffers struct {
	free  groFree
	arrs  [groBufs]*[maxDatagram]byte // from free, from index 0; nil when given back
	bufs  [groBufs][]byte
	ns    [groBufs]int // bytes received; < 0: skip the buffer
	seg   [groBufs]int // the size of each datagram in it but the last
	froms [groBufs]netip.AddrPort
	next  int
	count int
	off   int
	want  int // buffers for the next recv
}

func newMmsgIO(c *net.UDPConn, offload bool) (*mmsgIO, error) {
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
	m.groRead = func(fd uintptr) bool {
		g := m.gro
		g.free.get(g.arrs[:g.want])
		for i := range g.want {
			g.bufs[i] = g.arrs[i][:]
		}
		m.r.prepare(g.bufs[:g.want], true)
		if !m.r.call(fd) {
			m.r.forget()
			g.giveBack()
			m.waits.Add(1)
			return false
		}
		return true
	}
	for _, s := range []*mmsgSide{&m.r, &m.w} {
		for i := range s.hdrs {
			h := &s.hdrs[i].Hdr
			h.Name = (*byte)(unsafe.Pointer(&s.names[i]))
			h.Iov = &s.iovs[i]
			h.SetIovlen(1)
		}
	}
	if err := m.offload(offload, offload); err != nil {
		return nil, err
	}
	return m, nil
}

// offload turns segmentation offload on where the kernel has it (gso, gro
// true) or off. UDP_SEGMENT is there when the socket option can be read;
// UDP_GRO when it can be set.
func (m *mmsgIO) offload(gso, gro bool) error {
	var gsoErr, groErr error
	if err := m.rc.Control(func(fd uintptr) {
		if gso {
			_, gsoErr = unix.GetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_SEGMENT)
		}
		groErr = unix.SetsockoptInt(int(fd), unix.IPPROTO_UDP, unix.UDP_GRO, map[bool]int{true: 1}[gro])
	}); err != nil {
		return err
	}
	m.gso = gso && gsoErr == nil
	switch {
	case !gro || groErr != nil:
		m.gro = nil
	case m.gro == nil:
		m.gro = &groBuffers{want: 1, free: groFree{keep: groKeep}}
	}
	return nil
}

// syscall returns the function RawConn.Read or Write calls: one recvmmsg or
// sendmmsg of the headers from off to count. It reports false (wait for
// the socket) on EAGAIN.
func (s *mmsgSide) syscall(trap uintptr) func(fd uintptr) bool {
	return func(fd uintptr) bool {
		for {
			s.calls.Add(1)
			n, _, e := unix.Syscall6(trap, fd, uintptr(unsafe.Pointer(&s.hdrs[s.off])), uintptr(s.count-s.off), 0, 0, 0)
			switch {
			case e == unix.EINTR:
				continue
			case e == unix.EAGAIN:
				return false
			}
			s.n, s.errno = int(n), e
			return true
		}
	}
}

func (m *mmsgIO) read(bufs [][]byte, ns []int, froms []netip.AddrPort) (int, error) {
	if m.gro != nil {
		return m.readGRO(bufs, ns, froms)
	}
	n, err := m.recv(bufs)
	if err != nil {
		return 0, err
	}
	s := &m.r
	for i := range n {
		from, ok := parseSockaddr(&s.names[i], s.hdrs[i].Hdr.Namelen)
		ns[i], froms[i] = int(s.hdrs[i].Len), from
		if !ok || s.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 {
			ns[i] = -1 // not a UDP/IP sender, or cut short
		}
	}
	return n, nil
}

// recv is one recvmmsg into bufs (up to ioBatch of them).
func (m *mmsgIO) recv(bufs [][]byte) (int, error) {
	m.r.prepare(bufs, false)
	return m.r.result(m.rc.Read(m.r.call))
}

// prepare points the headers of a recvmmsg at bufs (up to ioBatch of
// them), with room for a UDP_GRO control message per buffer when ctrl.
func (s *mmsgSide) prepare(bufs [][]byte, ctrl bool) {
	s.off, s.count = 0, min(len(bufs), ioBatch)
	for i := range s.count {
		s.iovs[i].Base = &bufs[i][0]
		s.iovs[i].SetLen(len(bufs[i]))
		h := &s.hdrs[i]
		h.Hdr.Namelen = unix.SizeofSockaddrInet6
		h.Hdr.Flags = 0
		h.Len = 0
		h.Hdr.Control, h.Hdr.Controllen = nil, 0
		if ctrl {
			h.Hdr.Control = (*byte)(unsafe.Pointer(&s.ctrl[i][0]))
			h.Hdr.SetControllen(ctrlWords * 8)
		}
	}
}

// result is how many datagrams the recvmmsg RawConn.Read made (returning
// err) read, or why it failed.
func (s *mmsgSide) result(err error) (int, error) {
	s.forget()
	if err != nil {
		return 0, err
	}
	if s.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", s.errno)
	}
	return s.n, nil
}

// forget drops the iovecs' pointers once a call is over, so that the side
// does not keep its last buffers alive (an idle GRO socket would keep
// its 64 KiB buffers, once its free list let them go, out of the
// collector's reach).
func (s *mmsgSide) forget() {
	for i := range s.iovs {
		s.iovs[i].Base = nil
	}
}

// readGRO hands out the datagrams of the buffers received before, one per
// caller buffer, in the order they came, and receives more when none is
// left.
func (m *mmsgIO) readGRO(bufs [][]byte, ns []int, froms []netip.AddrPort) (int, error) {
	g := m.gro
	for g.next == g.count {
		g.giveBack()
		n, err := m.r.result(m.rc.Read(m.groRead))
		if err != nil {
			g.giveBack()
			if errors.Is(err, net.ErrClosed) {
				g.free.close()
			}
			return 0, err
		}
		if n == g.want {
			g.want = min(groBufs, 2*n)
		} else {
			g.want = max(1, n)
		}
		s := &m.r
		for i := range n {
			from, ok := parseSockaddr(&s.names[i], s.hdrs[i].Hdr.Namelen)
			g.ns[i], g.froms[i], g.seg[i] = int(s.hdrs[i].Len), from, groSegment(&s.hdrs[i].Hdr)
			if !ok || s.hdrs[i].Hdr.Flags&unix.MSG_TRUNC != 0 {
				g.ns[i] = -1
			}
		}
		g.next, g.count, g.off = 0, n, 0
	}
	k := 0
	for k < len(bufs) && g.next < g.count {
		i := g.next
		size := g.ns[i] - g.off
		if g.seg[i] > 0 {
			size = min(size, g.seg[i])
		}
		switch {
		case g.ns[i] < 0:
			ns[k] = -1
			size = 0
		case size > len(bufs[k]):
			ns[k] = -1 // the caller's buffer is too small: cut short
		default:
			ns[k] = copy(bufs[k], g.bufs[i][g.off:g.off+size])
		}
		froms[k] = g.froms[i]
		k++
		if g.off += size; g.off >= g.ns[i] {
			g.next, g.off = g.next+1, 0
		}
	}
	if g.next == g.count {
		g.giveBack() // all handed out
	}
	return k, nil
}

// giveBack returns the buffers to the free list.
func (g *groBuffers) giveBack() {
	if g.arrs[0] == nil {
		return // none held (they are taken from index 0)
	}
	g.free.put(g.arrs[:])
	clear(g.arrs[:])
	clear(g.bufs[:])
}

// groSegment is the datagram size of a coalesced buffer (the UDP_GRO
// control message), or 0 for a buffer holding one datagram.
func groSegment(h *unix.Msghdr) int {
	if h.Control == nil {
		return 0
	}
	ctrl := unsafe.Slice(h.Control, int(h.Controllen))
	for len(ctrl) >= unix.SizeofCmsghdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
		l := int(c.Len)
		if l < unix.SizeofCmsghdr || l > len(ctrl) {
			return 0
		}
		if c.Level == unix.IPPROTO_UDP && c.Type == unix.UDP_GRO && l >= unix.CmsgLen(4) {
			return int(*(*int32)(unsafe.Pointer(&ctrl[unix.CmsgLen(0)])))
		}
		ctrl = ctrl[min(unix.CmsgSpace(l-unix.CmsgLen(0)), len(ctrl)):]
	}
	return 0
}

func (m *mmsgIO) write(ds []datagram) (int, error) {
	defer m.w.forget()
	failed := 0
	plain := 0 // how many datagrams at the start of ds to send one by one
	for len(ds) > 0 {
		used, f := m.build(ds, plain)
		failed += f
		plain = 0
		s := &m.w
		for s.off < s.count {
			if err := m.rc.Write(s.call); err != nil {
				return failed, err
			}
			if s.errno == 0 {
				s.off += s.n
				continue
			}
			if s.segs[s.off] == 1 {
				// The datagram at off was refused (too big, no route, …);
				// those before it went out.
				failed++
				s.off++
				continue
			}
			// A run was refused as a whole: send its datagrams again one
			// by one, and never use UDP_SEGMENT again if the device
			// cannot segment.
			if s.errno == unix.EIO {
				m.gso = false
			}
			for _, d := range ds[s.first[s.off]:used] {
				if !m.sendable(d) {
					failed-- // counted again by the next build
				}
			}
			used, plain = s.first[s.off], s.segs[s.off]
			break
		}
		ds = ds[used:]
	}
	return failed, nil
}

// build puts up to ioBatch datagrams of ds into the write side's headers:
// runs of datagrams to one destination, each of the first's size but a
// shorter last one, share a header (with UDP_SEGMENT), except the first
// plain ones. It returns how many datagrams it took, and how many of those
// it refused (no address of the socket's family, or empty).
func (m *mmsgIO) build(ds []datagram, plain int) (used, failed int) {
	s := &m.w
	s.off, s.count = 0, 0
	k := 0 // iovecs in use
	for used < len(ds) && k < ioBatch {
		d := ds[used]
		i := s.count
		if !m.sendable(d) {
			failed++
			used++
			continue
		}
		namelen := m.putSockaddr(&s.names[i], d.To)
		n := 1
		s.iovs[k].Base = &d.B[0]
		s.iovs[k].SetLen(len(d.B))
		if m.gso && used >= plain {
			size, total := len(d.B), len(d.B)
			for used+n < len(ds) && k+n < ioBatch && n < maxGSOSegments {
				e := ds[used+n]
				if e.To != d.To || len(e.B) == 0 || len(e.B) > size || total+len(e.B) > maxGSOBytes {
					break
				}
				s.iovs[k+n].Base = &e.B[0]
				s.iovs[k+n].SetLen(len(e.B))
				total += len(e.B)
				n++
				if len(e.B) < size {
					break // a shorter datagram ends the run
				}
			}
		}
		h := &s.hdrs[i].Hdr
		h.Iov = &s.iovs[k]
		h.SetIovlen(n)
		h.Namelen = namelen
		h.Control, h.Controllen = nil, 0
		if n > 1 {
			ctrl := (*[ctrlWords * 8]byte)(unsafe.Pointer(&s.ctrl[i]))
			c := (*unix.Cmsghdr)(unsafe.Pointer(&ctrl[0]))
			c.Level, c.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
			c.SetLen(unix.CmsgLen(2))
			binary.NativeEndian.PutUint16(ctrl[unix.CmsgLen(0):], uint16(len(d.B)))
			h.Control = &ctrl[0]
			h.SetControllen(unix.CmsgSpace(2))
		}
		s.first[i], s.segs[i] = used, n
		s.count++
		k += n
		used += n
	}
	return used, failed
}

// sendable reports whether the socket can send d: not empty, and to an
// address of its family (an IPv4 socket cannot reach an IPv6 peer).
func (m *mmsgIO) sendable(d datagram) bool {
	return len(d.B) > 0 && (m.v6 || d.To.Addr().Unmap().Is4())
}

// putSockaddr writes ap, sendable, as the socket's family wants it.
func (m *mmsgIO) putSockaddr(sa *unix.RawSockaddrInet6, ap netip.AddrPort) uint32 {
	a := ap.Addr()
	if !m.v6 {
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		*s4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Unmap().As4()}
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:], ap.Port())
		return unix.SizeofSockaddrInet4
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
	return unix.SizeofSockaddrInet6
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
