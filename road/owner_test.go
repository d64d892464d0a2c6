package road

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/internal/netsim"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road/internal/core"
)

// An owner that wakes late (a loaded machine) finds a message's done in
// its inbound queue and the message's resend timer due at once: it takes
// the done first, and sends nothing again. Here the owner is held (a
// command that waits) while the done arrives and the timer passes, ten
// times; a select that took either would resend about five of the ten.
// In a synctest bubble on an in-memory network, where time moves only
// when every goroutine waits.
func TestOwnerTakesAnswersBeforeTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := netsim.NewNetwork(1)
		defer network.Close()
		mainAddr := netip.MustParseAddrPort("10.0.0.1:7530")
		stack := func(cfg Config, at netip.AddrPort) *Stack {
			conn, err := network.Listen(at, netsim.Impairment{})
			if err != nil {
				t.Fatal(err)
			}
			cfg.PacketConn, cfg.Auto, cfg.AlivePeriod, cfg.Profile = conn, keep.AutoAlways, -1, ProfileReference
			s, err := New(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			return s
		}
		m := stack(Config{Name: "main", Main: true}, mainAddr)
		defer m.Close()
		o := stack(Config{Name: "other"}, netip.MustParseAddrPort("10.0.0.2:7530"))
		defer o.Close()
		ctx := t.Context()
		if _, err := o.Join(ctx, mainAddr.String()); err != nil {
			t.Fatal(err)
		}
		hold := func(s *Stack) chan struct{} {
			release := make(chan struct{})
			if err := s.do(ctx, func(*core.Core) { <-release }); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			return release
		}
		for i := range 10 {
			releaseMain := hold(m) // the main answers only once let go
			sent := make(chan error, 1)
			go func() { sent <- o.Send(ctx, "main", map[string]any{"i": i}) }()
			synctest.Wait() // the message is out, its resend timer set
			releaseOther := hold(o)
			close(releaseMain)
			synctest.Wait()         // the done waits in other's inbound queue
			time.Sleep(time.Second) // and the resend timer passes
			<-m.Receive()           // (the main delivered it)
			close(releaseOther)
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		}
		c, err := o.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Retransmits != 0 || c.MessagesOut != 10 {
			t.Fatalf("%d packets sent again for 10 messages answered before their timers ran (%d done)", c.Retransmits, c.MessagesOut)
		}
	})
}
