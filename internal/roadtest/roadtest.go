// Package roadtest starts road stacks for the module's tests: on loopback
// unless told otherwise, and closed when the test ends.
package roadtest

import (
	"testing"

	"github.com/raet-go/raet/road"
)

// Start makes and starts a stack of cfg, listening on 127.0.0.1:0 when
// cfg.Listen and cfg.PacketConn are unset, and closes it when tb ends. It
// fails tb if the stack cannot start.
func Start(tb testing.TB, cfg road.Config) *road.Stack {
	tb.Helper()
	if cfg.Listen == "" && cfg.PacketConn == nil {
		cfg.Listen = "127.0.0.1:0"
	}
	s, err := road.New(&cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}
