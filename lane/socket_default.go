//go:build !unix

package lane

import (
	"log/slog"
	"time"
)

// sockAddr stands in for a Unix socket address on platforms without them.
type sockAddr struct{ Name string }

func newSockAddr(path string) *sockAddr { return &sockAddr{Name: path} }

var maxPathLen = 107

func writable(string) bool { return false }

// sock is never made on this platform: listen fails.
type sock struct {
	wait chan struct{}
}

func listen(path string, _ *slog.Logger, _ *counters) (*sock, error) {
	return nil, &BindError{Path: path, Op: "bind", Err: ErrUnsupported}
}

func (s *sock) read([]byte) (int, string, error)            { return 0, "", ErrUnsupported }
func (s *sock) setReadDeadline(time.Time) error             { return ErrUnsupported }
func (s *sock) send([]byte, *sockAddr) error                { return ErrUnsupported }
func (s *sock) sendWait([]byte, *sockAddr, time.Time) error { return ErrUnsupported }
func (s *sock) close() error                                { return nil }
func (s *sock) unlink() error                               { return nil }

func isBusy(error) bool      { return false }
func isGone(error) bool      { return false }
func isMsgSize(error) bool   { return false }
func isTransient(error) bool { return false }
