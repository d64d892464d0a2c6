package lane

import (
	"errors"
	"fmt"
)

// Sentinel errors. Errors returned by a Stack wrap one of them where a
// caller may want to branch; test with errors.Is.
var (
	// ErrClosed: the stack was closed.
	ErrClosed = errors.New("raet: lane stack closed")
	// ErrNotStarted: Send was called before Start.
	ErrNotStarted = errors.New("raet: lane stack not started")
	// ErrSocket: the yard's socket failed for good and the stack stopped
	// (see Stack.Err).
	ErrSocket = errors.New("raet: lane socket failed; the stack stopped")
	// ErrStarted: Start was called twice.
	ErrStarted = errors.New("raet: lane stack already started")
	// ErrInvalidConfig: a Config field is out of range.
	ErrInvalidConfig = errors.New("raet: invalid lane config")
	// ErrBadName: a lane or yard name is empty or contains a character
	// that cannot go in a page head or a socket file name.
	ErrBadName = errors.New("raet: bad lane or yard name")
	// ErrPathTooLong: the socket path does not fit a Unix socket address.
	ErrPathTooLong = errors.New("raet: lane socket path too long")
	// ErrYardInUse: another live socket is bound at the yard's path. It is
	// never removed.
	ErrYardInUse = errors.New("raet: lane socket in use by a live yard")
	// ErrNotSocket: the yard's path exists and is not a socket. It is never
	// removed.
	ErrNotSocket = errors.New("raet: lane socket path exists and is not a socket")
	// ErrYardGone: the destination's socket does not exist or nobody
	// listens on it (ENOENT, ECONNREFUSED). The stack forgets that yard; a
	// later Send to it starts a new session.
	ErrYardGone = errors.New("raet: lane destination yard gone")
	// ErrBusy: the destination stayed busy (EAGAIN, ENOBUFS) until the send
	// deadline, or the retry queue was full. Pages already written stay
	// written; the receiver discards the unfinished book when it expires.
	ErrBusy = errors.New("raet: lane destination yard busy")
	// ErrTooLarge: the serialized body exceeds Config.MaxMessageSize or
	// needs more than 65535 pages.
	ErrTooLarge = errors.New("raet: lane message too large")
	// ErrQueue: Config.Queue failed to put a message (it was not sent) or
	// to mark a sent message done.
	ErrQueue = errors.New("raet: lane queue failed")
	// ErrSharedDir: the socket directory is writable by its group or by
	// other users and Config.AllowSharedDir is not set (see there).
	ErrSharedDir = errors.New("raet: lane socket directory is writable by others (another user can bind a yard's name and receive its pages); set Config.AllowSharedDir to accept the risk")
	// ErrUnsupported: this platform has no Unix datagram sockets.
	ErrUnsupported = errors.New("raet: lane sockets unsupported on this platform")
)

// BindError reports a failure of Start to create the socket directory or
// to bind the yard's socket.
type BindError struct {
	Path string // the socket path (or directory)
	Op   string // "mkdir", "probe", "remove stale", "bind", "chmod", ...
	Err  error
}

// Error implements error.
func (e *BindError) Error() string {
	return fmt.Sprintf("raet: lane %s %s: %v", e.Op, e.Path, e.Err)
}

// Unwrap returns the cause.
func (e *BindError) Unwrap() error { return e.Err }

// SendError reports a failed Send. Err wraps a sentinel (ErrYardGone,
// ErrBusy, ErrTooLarge, ErrClosed, ErrQueue, ...), a body serialization
// error from package packet, a context error, or the system error.
type SendError struct {
	Yard  string // destination yard name
	Page  int    // index of the page that failed, or -1 before any page
	Pages int    // page count of the book, 0 if not known yet
	// Queued: the message is in Config.Queue, which keeps it; Start sends
	// it again (when the queue outlives the stack, as a durable one does).
	Queued bool
	Err    error
}

// Error implements error.
func (e *SendError) Error() string {
	if e.Page < 0 || e.Pages == 0 {
		return fmt.Sprintf("raet: lane send to %q: %v", e.Yard, e.Err)
	}
	return fmt.Sprintf("raet: lane send to %q: page %d of %d: %v", e.Yard, e.Page, e.Pages, e.Err)
}

// Unwrap returns the cause.
func (e *SendError) Unwrap() error { return e.Err }
