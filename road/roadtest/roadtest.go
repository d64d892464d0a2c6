// Package roadtest starts road stacks for tests: Start one on loopback
// (unless the config says where), or LossyPair two joined over an
// in-memory network (package netsim) that loses, delays or reorders what
// they send, where a testing/synctest bubble runs their timers at once.
// Every stack (and network) it starts is closed when the test ends, so a
// goroutine leak check (go.uber.org/goleak) at the test's end finds none
// of theirs.
//
// It fails the test (TB.Fatal) when a stack cannot start or join: a test
// needs no error handling for its fixtures.
package roadtest

import (
	"context"
	"net/netip"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road"
)

// TB is what roadtest needs of a test: *testing.T, *testing.B and
// *testing.F (testing.TB) have it.
type TB interface {
	Helper()
	Fatal(args ...any)
	Cleanup(func())
	Context() context.Context
}

// Start makes and starts a stack of cfg, listening on 127.0.0.1:0 when
// cfg.Listen and cfg.PacketConn are unset, and closes it when tb ends. It
// fails tb if the stack cannot start.
func Start(tb TB, cfg road.Config) *road.Stack {
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

// LossyPair starts main (mc, made a main estate that accepts every key)
// and other (oc) on an in-memory network (netsim, seeded with seed) whose
// datagrams to each are impaired by imp, joins other to main, and closes
// both and the network when tb ends. Presence is off unless a config
// sets AlivePeriod. Run it in a synctest bubble to let lost datagrams'
// timers fire at once.
func LossyPair(tb TB, seed uint64, imp netsim.Impairment, mc, oc road.Config) (m, o *road.Stack) {
	tb.Helper()
	network := netsim.NewNetwork(seed)
	tb.Cleanup(func() { network.Close() })
	mainAddr := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 1}), road.DefaultPort)
	connM, err := network.Listen(mainAddr, imp)
	if err != nil {
		tb.Fatal(err)
	}
	connO, err := network.Listen(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, 2}), road.DefaultPort), imp)
	if err != nil {
		tb.Fatal(err)
	}
	mc.Main, mc.Auto, mc.PacketConn = true, keep.AutoAlways, connM
	oc.PacketConn = connO
	for _, c := range []*road.Config{&mc, &oc} {
		if c.AlivePeriod == 0 {
			c.AlivePeriod = -1
		}
	}
	m, o = Start(tb, mc), Start(tb, oc)
	if _, err := o.Join(tb.Context(), mainAddr.String()); err != nil {
		tb.Fatal(err)
	}
	return m, o
}
