//go:build unix

package lane

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"syscall"
	"time"
)

// sockAddr is a destination as the send system call takes it.
type sockAddr = syscall.SockaddrUnix

func newSockAddr(path string) *sockAddr { return &syscall.SockaddrUnix{Name: path} }

// maxPathLen is the longest socket path: sun_path without its NUL.
var maxPathLen = len(syscall.RawSockaddrUnix{}.Path) - 1

// writable reports whether this process may create files in dir.
func writable(dir string) bool { return syscall.Access(dir, 0x2 /* W_OK */) == nil }

// sock is a yard's bound AF_UNIX SOCK_DGRAM socket. conn reads and sends.
// retry is a duplicate descriptor of the same socket, with its own poller
// registration and write deadline, on which one Send at a time (wait)
// waits for a busy destination to drain. The first sends never wait, so a
// busy destination holds up no other.
type sock struct {
	conn  *net.UnixConn
	raw   syscall.RawConn
	retry *os.File
	rraw  syscall.RawConn
	wait  chan struct{}
	path  string
	dev   uint64 // the socket file's identity, to remove only our own
	ino   uint64
}

// listen binds the socket at path: it removes a stale socket file (one
// nobody listens on, as a connect probe shows), refuses a live one or a
// file that is not a socket, binds, and restricts the file to mode 0600
// before the socket is used.
func listen(path string, log *slog.Logger, ctr *counters) (*sock, error) {
	if len(path) > maxPathLen {
		return nil, &BindError{Path: path, Op: "bind", Err: fmt.Errorf("%w: %d bytes, at most %d", ErrPathTooLong, len(path), maxPathLen)}
	}
	if err := clearStale(path, log, ctr); err != nil {
		return nil, err
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			err = fmt.Errorf("%w: %w", ErrYardInUse, err)
		}
		return nil, &BindError{Path: path, Op: "bind", Err: err}
	}
	s := &sock{conn: conn, path: path, wait: make(chan struct{}, 1)}
	fail := func(op string, err error) (*sock, error) {
		conn.Close()
		os.Remove(path)
		if s.retry != nil {
			s.retry.Close()
		}
		return nil, &BindError{Path: path, Op: op, Err: err}
	}
	// Bind-then-chmod rather than a process-wide umask: other goroutines
	// may be creating files. The window before chmod is closed when the
	// directory is ours (created 0700).
	if err := os.Chmod(path, 0o600); err != nil {
		return fail("chmod", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail("stat", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.dev, s.ino = uint64(st.Dev), uint64(st.Ino)
	}
	if s.raw, err = conn.SyscallConn(); err != nil {
		return fail("dup", err)
	}
	var nfd int
	var derr error
	if err := s.raw.Control(func(fd uintptr) {
		syscall.ForkLock.RLock()
		if nfd, derr = syscall.Dup(int(fd)); derr == nil {
			syscall.CloseOnExec(nfd)
		}
		syscall.ForkLock.RUnlock()
	}); err != nil {
		return fail("dup", err)
	}
	if derr != nil {
		return fail("dup", derr)
	}
	if err := syscall.SetNonblock(nfd, true); err != nil {
		syscall.Close(nfd)
		return fail("dup", err)
	}
	s.retry = os.NewFile(uintptr(nfd), path) // non-blocking: uses the poller
	if err := s.retry.SetWriteDeadline(time.Time{}); err != nil {
		return fail("dup", err)
	}
	if s.rraw, err = s.retry.SyscallConn(); err != nil {
		return fail("dup", err)
	}
	return s, nil
}

// clearStale removes the socket file at path if nobody listens on it.
func clearStale(path string, log *slog.Logger, ctr *counters) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return &BindError{Path: path, Op: "stat", Err: err}
	case fi.Mode()&fs.ModeSocket == 0:
		return &BindError{Path: path, Op: "probe", Err: fmt.Errorf("%w (mode %v)", ErrNotSocket, fi.Mode())}
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	switch {
	case err == nil:
		c.Close()
		return &BindError{Path: path, Op: "probe", Err: ErrYardInUse}
	case errors.Is(err, syscall.ENOENT):
		return nil // gone meanwhile
	case errors.Is(err, syscall.EPROTOTYPE):
		// A live socket of another type (stream) is bound there.
		return &BindError{Path: path, Op: "probe", Err: fmt.Errorf("%w: %w", ErrYardInUse, err)}
	case !errors.Is(err, syscall.ECONNREFUSED):
		return &BindError{Path: path, Op: "probe", Err: err}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return &BindError{Path: path, Op: "remove stale", Err: err}
	}
	ctr.staleRemoved.Add(1)
	log.Info("lane: removed a stale socket file (nobody listened)", "path", path)
	return nil
}

// read reads one datagram into b and returns its length and the sender's
// socket path ("" if the sender's socket is unnamed). A datagram longer
// than b is cut to len(b).
func (s *sock) read(b []byte) (int, string, error) {
	n, addr, err := s.conn.ReadFromUnix(b)
	if addr != nil {
		return n, addr.Name, err
	}
	return n, "", err
}

func (s *sock) setReadDeadline(t time.Time) error { return s.conn.SetReadDeadline(t) }

func sendto(fd uintptr, p []byte, to *sockAddr) error {
	for {
		if err := syscall.Sendto(int(fd), p, 0, to); err != syscall.EINTR {
			return err
		}
	}
}

// send writes p to the socket at to once, without waiting.
func (s *sock) send(p []byte, to *sockAddr) error {
	var serr error
	if err := s.raw.Write(func(fd uintptr) bool {
		serr = sendto(fd, p, to)
		return true
	}); err != nil {
		return err
	}
	return serr
}

// sendWait writes p to the socket at to through the retry descriptor,
// waiting while the destination is busy for the socket to become writable
// (the kernel signals it when a receiver consumes one of our datagrams),
// until deadline. It tries before it waits: RawConn.Write forgets any
// readiness signalled before it was called. It returns
// os.ErrDeadlineExceeded when there was still no room. The caller holds
// s.wait.
func (s *sock) sendWait(p []byte, to *sockAddr, deadline time.Time) error {
	if err := s.retry.SetWriteDeadline(deadline); err != nil {
		return err
	}
	var serr error
	if err := s.rraw.Write(func(fd uintptr) bool {
		serr = sendto(fd, p, to)
		return !isBusy(serr)
	}); err != nil {
		return err
	}
	return serr
}

// close closes both descriptors.
func (s *sock) close() error {
	return errors.Join(s.conn.Close(), s.retry.Close())
}

// unlink removes the socket file if it is still the one we bound.
func (s *sock) unlink() error {
	fi, err := os.Lstat(s.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && (uint64(st.Dev) != s.dev || uint64(st.Ino) != s.ino) {
		return nil // replaced by someone else: not ours to remove
	}
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// isBusy reports a destination without room now (EAGAIN, ENOBUFS).
func isBusy(err error) bool {
	return err == syscall.EAGAIN || err == syscall.EWOULDBLOCK || err == syscall.ENOBUFS
}

// isTransient reports a read error that leaves the socket usable: a
// momentary lack of memory or buffers, or an interrupted call.
func isTransient(err error) bool {
	return errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) ||
		errors.Is(err, syscall.EINTR) || errors.Is(err, syscall.EAGAIN)
}

// isGone reports a destination whose socket vanished.
func isGone(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT)
}

// isMsgSize reports a datagram too large for the socket.
func isMsgSize(err error) bool { return errors.Is(err, syscall.EMSGSIZE) }
