package bus_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road"
)

// Over a road with 10% loss, duplication and reordering: the publisher's
// estate restarts (same keep, same address, durable history) and joins the
// subscriber's main estate again; the subscription comes back by itself
// and resumes with no gap and no duplicate.
func TestRoadPublisherRestart(t *testing.T) {
	imp := netsim.Impairment{Loss: 0.10, Duplicate: 0.05, Reorder: 0.10, Delay: 100 * time.Microsecond, Limit: 100_000, Seed: 5}
	net := netsim.NewNetwork(3)
	t.Cleanup(func() { net.Close() })
	mainAddr, pubAddr := netip.MustParseAddrPort("10.0.1.1:7530"), netip.MustParseAddrPort("10.0.1.2:7530")
	dir := t.TempDir()
	start := func(name string, addr netip.AddrPort, main bool) (*road.Stack, *bus.Road) {
		conn, err := net.Listen(addr, imp)
		if err != nil {
			t.Fatal(err)
		}
		s, err := road.New(&road.Config{Name: name, Main: main, Mutable: true, Auto: keep.AutoAlways, PacketConn: conn,
			KeepDir: filepath.Join(dir, name), AlivePeriod: 200 * time.Millisecond, AliveTimeout: 500 * time.Millisecond,
			JoinTimeout: time.Second, AllowTimeout: time.Second, MessageTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		r := bus.NewRoad(s)
		t.Cleanup(func() { r.Close(); s.Close() })
		return s, r
	}
	join := func(s *road.Stack) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var err error
		for range 30 {
			if _, err = s.Join(ctx, mainAddr.String()); err == nil {
				return
			}
		}
		t.Fatal(err)
	}
	history := filepath.Join(dir, "history.db")
	pubNode := func(r *bus.Road) *bus.Node {
		h, err := bus.NewBoltHistory(history, 1000, 0)
		if err != nil {
			t.Fatal(err)
		}
		return newNode(t, r, &bus.Config{History: h, Heartbeat: 100 * time.Millisecond})
	}
	_, mr := start("subscriber", mainAddr, true)
	sn := newNode(t, mr, &bus.Config{Heartbeat: 100 * time.Millisecond, ControlTimeout: time.Second})
	ps, pr := start("publisher", pubAddr, false)
	join(ps)
	pub := pubNode(pr)
	s, err := sn.Subscribe("publisher", []string{"r.>"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	publishN(t, pub, "r.a", 0, 20)
	msgs, _ := collect(t, s, 20, 30*time.Second)
	seqs(t, msgs, 1)

	pub.Close()
	pr.Close()
	ps.Close()
	ps2, pr2 := start("publisher", pubAddr, false)
	join(ps2)
	pub2 := pubNode(pr2)
	eventually(t, func() error {
		if st := pub2.Stats().Publisher; st.Subscriptions != 1 {
			return fmt.Errorf("%d subscriptions at the restarted publisher", st.Subscriptions)
		}
		return nil
	})
	publishN(t, pub2, "r.b", 20, 20)
	msgs, all := collect(t, s, 20, 30*time.Second)
	if len(all) != 20 {
		t.Fatalf("reports besides messages: %+v", all)
	}
	seqs(t, msgs, 21)
}
