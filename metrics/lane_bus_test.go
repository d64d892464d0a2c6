//go:build unix

package metrics_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/raet-go/raet/bus"
	itu "github.com/raet-go/raet/internal/testutil"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/metrics"
)

// Lane traffic, with a page that does not parse: /metrics has the stack's
// counters, the drop by its reason.
func TestLaneMetricsEqualCounters(t *testing.T) {
	itu.CheckLeaks(t)
	dir := itu.ShortTempDir(t, "lm")
	start := func(name string) *lane.Stack {
		s, err := lane.New(&lane.Config{Dir: dir, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := start("alpha"), start("beta")
	for i := range 5 {
		if err := a.Send(t.Context(), "beta", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
		<-b.Receive()
	}
	c, err := net.Dial("unixgram", b.Path())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("not a page")); err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The reader's goroutine counts it: a real socket, so a bounded wait.
	for i := 0; i < 2000 && b.Counters().Dropped() == 0; i++ {
		time.Sleep(time.Millisecond)
	}
	for _, s := range []*lane.Stack{a, b} {
		reg := prometheus.NewRegistry()
		col := metrics.NewLane(s)
		reg.MustRegister(col)
		fams := scrape(t, reg)
		n := s.Counters()
		check := func(name string, v uint64, labels ...string) {
			t.Helper()
			if got, ok := value(fams, name, labels...); !ok || got != float64(v) {
				t.Errorf("%s: %s%v = %v, counters say %d", s.Name(), name, labels, got, v)
			}
		}
		check("raet_lane_pages_total", n.PagesIn, "direction=in")
		check("raet_lane_pages_total", n.PagesOut, "direction=out")
		check("raet_lane_bytes_total", n.BytesOut, "direction=out")
		check("raet_lane_messages_total", n.MessagesIn, "direction=in")
		check("raet_lane_messages_total", n.MessagesOut, "direction=out")
		for _, r := range lane.DropReasons() {
			check("raet_lane_drops_total", n.Drops[r], "reason="+r.String())
		}
		check("raet_lane_remotes", uint64(len(s.Yards())))
		if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) > 0 {
			t.Errorf("lint: %v %v", problems, err)
		}
	}
	if n := b.Counters(); n.MessagesIn != 5 || n.Drops[lane.DropBadHead] != 1 {
		t.Errorf("beta: %+v", n)
	}
}

// Publishing, subscribing and requests on a bus: /metrics has the node's
// stats.
func TestBusMetricsEqualStats(t *testing.T) {
	itu.CheckLeaks(t)
	mn := bus.NewMemNet(0)
	node := func(name string) *bus.Node {
		tr, err := mn.Transport(name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := bus.New(tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close(); tr.Close() })
		return n
	}
	pub, sub := node("pub"), node("sub")
	ctx := t.Context()
	s, err := sub.Subscribe("pub", []string{"orders.>"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-s.Ready()
	for range 3 {
		if _, err := pub.Publish(ctx, bus.Pub{Subject: "orders.eu", Body: map[string]any{"x": 1}}); err != nil {
			t.Fatal(err)
		}
		<-s.Messages()
	}
	svc, err := pub.Serve("math.*", func(context.Context, *bus.Request) (any, error) { return map[string]any{"ok": true}, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := sub.Request(ctx, "pub", "math.add", map[string]any{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []*bus.Node{pub, sub} {
		reg := prometheus.NewRegistry()
		col := metrics.NewBus(n)
		reg.MustRegister(col)
		fams := scrape(t, reg)
		st := n.Stats()
		check := func(name string, v uint64, labels ...string) {
			t.Helper()
			if got, ok := value(fams, name, labels...); !ok || got != float64(v) {
				t.Errorf("%s: %s%v = %v, stats say %d", n.Name(), name, labels, got, v)
			}
		}
		check("raet_bus_published_total", st.Publisher.Published)
		check("raet_bus_subscriptions", uint64(st.Publisher.Subscriptions))
		check("raet_bus_hwm_drops_total", st.Publisher.Drops)
		check("raet_bus_requests_total", st.Requester.Requests, "result=sent")
		check("raet_bus_requests_total", st.Requester.Replies, "result=replied")
		check("raet_bus_peers", 1, "state=up")
		if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) > 0 {
			t.Errorf("lint: %v %v", problems, err)
		}
	}
	if st := pub.Stats(); st.Publisher.Published != 3 || st.Publisher.Subscriptions != 1 {
		t.Errorf("pub: %+v", st.Publisher)
	}
	if st := sub.Stats(); st.Requester.Replies != 1 {
		t.Errorf("sub: %+v", st.Requester)
	}
}
