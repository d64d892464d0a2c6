// Package roadtest starts road stacks for the module's tests: on loopback
// unless told otherwise, and closed when the test ends.
package roadtest

import (
	"net/netip"
	"testing"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
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

// LossyPair starts main (mc, made a main estate that accepts every key)
// and other (oc) on an in-memory network (netsim, seeded with seed) whose
// datagrams to each are impaired by imp, joins other to main, and closes
// both and the network when tb ends. Presence is off unless a config
// sets AlivePeriod. Run it in a synctest bubble to let lost datagrams'
// timers fire at once.
func LossyPair(tb testing.TB, seed uint64, imp netsim.Impairment, mc, oc road.Config) (m, o *road.Stack) {
	tb.Helper()
	network := netsim.NewNetwork(seed)
	tb.Cleanup(func() { network.Close() })
	mainAddr := netip.MustParseAddrPort("10.0.0.1:7530")
	connM, err := network.Listen(mainAddr, imp)
	if err != nil {
		tb.Fatal(err)
	}
	connO, err := network.Listen(netip.MustParseAddrPort("10.0.0.2:7530"), imp)
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
