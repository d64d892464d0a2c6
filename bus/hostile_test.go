package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/protocol"
)

// hostile is a joined peer that speaks raw envelopes to the publisher "pub"
// and never reads what it is sent unless asked (its transport's queue fills
// and the publisher's sends to it wait): the attacks of issue 32 on a
// publisher, written against the envelope rather than the bus API.
type hostile struct {
	t  testing.TB
	tr *bus.MemTransport
}

func newHostile(t testing.TB, net *bus.MemNet) *hostile {
	tr, err := net.Transport("hostile")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return &hostile{t: t, tr: tr}
}

// countWarns counts the log records at Warn whose message holds msg.
type countWarns struct {
	msg string
	n   atomic.Int64
}

func (c *countWarns) Enabled(context.Context, slog.Level) bool { return true }
func (c *countWarns) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.Contains(r.Message, c.msg) {
		c.n.Add(1)
	}
	return nil
}
func (c *countWarns) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countWarns) WithGroup(string) slog.Handler      { return c }

// pubAndOK makes a MemNet whose peers queue up to queue messages, a
// publisher "pub" with cfg and a legitimate peer "ok" on it.
func pubAndOK(t *testing.T, queue int, cfg *bus.Config) (net *bus.MemNet, pub, ok *bus.Node) {
	t.Helper()
	net = bus.NewMemNet(queue)
	trs := memTransports(t, net, "pub", "ok")
	return net, newNode(t, trs[0], cfg), newNode(t, trs[1], &bus.Config{Heartbeat: -1})
}

// sub sends a raw subscribe envelope.
func (h *hostile) sub(id uint64, filters []string, policy bus.Policy, hwm uint32, replay protocol.BusReplay, arg uint64) {
	h.t.Helper()
	e := envelope.Envelope{Version: envelope.Version, Kind: protocol.BusKindSub, ID: id, Filters: filters,
		Policy: policy, HWM: hwm, Replay: replay, ReplayArg: arg}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.tr.Send(ctx, "pub", e.Map()); err != nil {
		h.t.Fatal(err)
	}
}

// answers reads the subok answers to n subscriptions and counts them by
// their error ("" for accepted).
func (h *hostile) answers(n int) map[string]int {
	h.t.Helper()
	out := map[string]int{}
	for seen := 0; seen < n; {
		m := recvMsg(h.t.(*testing.T), h.tr)
		var e envelope.Envelope
		if err := envelope.Decode(m.Body, &e); err != nil || e.Kind != protocol.BusKindSubOK {
			continue
		}
		out[e.Error]++
		seen++
	}
	return out
}

// addCounts returns a with b's counts added.
func addCounts(a, b map[string]int) map[string]int {
	out := maps.Clone(a)
	for k, v := range b {
		out[k] += v
	}
	return out
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// heldFor sums what the publisher holds for peer's subscriptions now.
func heldFor(pub *bus.Node, peer string) (subs, queued int) {
	for _, st := range pub.Subscribers() {
		if st.Peer == peer && st.Ended == "" {
			subs++
			queued += st.Queued
		}
	}
	return subs, queued
}

// Attack 2 of issue 32: 1,000 subscriptions with filter > and a replay since
// sequence 0, then 1,000 without a replay, never read. The publisher keeps
// within its budgets for the peer (MaxPeerReplays 4, MaxReplay 500,
// MaxPeerQueued 2,000, MaxPeerSenders 8), a legitimate subscriber is
// admitted and gets every message, and all is given back when the hostile
// peer goes. On the base
// (2f6a03b) the 1,000 replays of 1,000 messages each were all queued, with
// up to 16 goroutines each.
func TestHostileReplayFlood(t *testing.T) {
	const (
		hostileSubs = 1000
		senders     = 8
		queued      = 2000
	)
	net, pub, ok := pubAndOK(t, 64, &bus.Config{Heartbeat: -1, MaxPeerReplays: 4, MaxReplay: 500, MaxPeerQueued: queued,
		MaxPeerSenders: senders, MaxPeerSubscriptions: 2 * hostileSubs})
	ctx := ctxT(t, time.Minute)
	body := strings.Repeat("b", 200)
	for i := range 1000 {
		if _, err := pub.Publish(ctx, bus.Pub{Subject: fmt.Sprintf("h.s%d", i%50), Body: body}); err != nil {
			t.Fatal(err)
		}
	}
	baseGo, baseHeap := runtime.NumGoroutine(), heapInUse()

	h := newHostile(t, net)
	for id := uint64(1); id <= hostileSubs; id++ {
		h.sub(id, []string{">"}, bus.DropNewest, 0, bus.ReplaySinceSeq, 0)
	}
	// And as many without a replay, admitted: the live messages below are
	// queued for each, within MaxPeerQueued, sent by MaxPeerSenders.
	for id := uint64(hostileSubs + 1); id <= 2*hostileSubs; id++ {
		h.sub(id, []string{">"}, bus.DropNewest, 0, bus.ReplayNone, 0)
	}
	eventually(t, func() error {
		if st := pub.Stats().Publisher; st.Subscriptions+int(st.Refused) < 2*hostileSubs {
			return fmt.Errorf("publisher took %d of %d subscriptions", st.Subscriptions+int(st.Refused), 2*hostileSubs)
		}
		return nil
	})
	s, err := ok.Subscribe("pub", []string{"h.>"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	for i := range 200 {
		if _, err := pub.Publish(ctx, bus.Pub{Subject: "h.live", Body: i}); err != nil {
			t.Fatal(err)
		}
	}
	msgs, _ := collect(t, s, 200, 30*time.Second)
	seqs(t, msgs, 1001)

	// The hostile peer's senders, the legitimate subscription's goroutine
	// and the control queues' senders; those of the legitimate
	// subscription's last messages end.
	eventually(t, func() error {
		if g := runtime.NumGoroutine(); g > baseGo+senders+4 {
			return fmt.Errorf("%d goroutines, %d before the hostile peer (MaxPeerSenders %d)", g, baseGo, senders)
		}
		return nil
	})
	gos, heap := runtime.NumGoroutine(), heapInUse()
	subs, held := heldFor(pub, "hostile")
	st := pub.Stats().Publisher
	t.Logf("hostile: %d subscriptions, %d refused over budget, %d messages held; goroutines %d -> %d, heap in use %.1f -> %.1f MiB",
		subs, st.OverBudget, held, baseGo, gos, float64(baseHeap)/(1<<20), float64(heap)/(1<<20))
	if held > queued {
		t.Errorf("the publisher holds %d messages for the hostile peer, over MaxPeerQueued %d", held, queued)
	}
	if heap > baseHeap+16<<20 {
		t.Errorf("heap in use %d MiB, %d MiB before the hostile peer", heap>>20, baseHeap>>20)
	}
	if st.OverBudget == 0 || st.Refused != st.OverBudget || subs < hostileSubs || st.PeerQueueDrops == 0 {
		t.Errorf("publisher stats %+v, %d hostile subscriptions: want the replays over the budgets refused, the others admitted, and live messages over MaxPeerQueued dropped", st, subs)
	}

	h.tr.Leave()
	eventually(t, func() error {
		if subs, held := heldFor(pub, "hostile"); subs != 0 || held != 0 {
			return fmt.Errorf("the hostile peer gone, %d subscriptions hold %d messages", subs, held)
		}
		if g := runtime.NumGoroutine(); g > baseGo+2 {
			return fmt.Errorf("%d goroutines, %d before the hostile peer", g, baseGo)
		}
		return nil
	})
	if heap := heapInUse(); heap > baseHeap+4<<20 {
		t.Errorf("heap in use %d MiB after the hostile peer left, %d MiB before", heap>>20, baseHeap>>20)
	}
}

// Attack 6 of issue 32: subscriptions of 256 filters of 255 bytes (512 of
// them), then 4,096 within the filter budgets: the first are refused for
// their filters, the others past MaxPeerSubscriptions, each with the typed reason,
// counted; a legitimate subscriber is still admitted, and one over a budget
// sees ErrOverBudget. On the base the hostile peer took all 4,096 slots and
// the legitimate subscriber was refused.
func TestHostileSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		warns := &countWarns{msg: "over its budget"}
		net, pub, ok := pubAndOK(t, 8192, &bus.Config{Heartbeat: -1, Logger: slog.New(warns)})
		h := newHostile(t, net)
		long := make([]string, 256)
		for i := range long {
			long[i] = fmt.Sprintf("%03d.%s", i, strings.Repeat("f", 251))
		}
		// 512 of the 64 KiB subscriptions make the point (each costs a JSON
		// round trip over MemNet); the slots are taken by the 4,096 below.
		const n, long64, batch = 4096, 512, 128 // a batch of answers fits the publisher's control queue
		got := map[string]int{}
		for id := uint64(1); id <= long64; id++ {
			h.sub(id, long, bus.DropNewest, 0, bus.ReplayNone, 0)
			if id%batch == 0 {
				got = addCounts(got, h.answers(batch))
			}
		}
		if got["over budget: filters of a subscription (32)"] != long64 {
			t.Fatalf("answers to 256 filters of 255 bytes: %v", got)
		}
		short := make([]string, 32)
		for i := range short {
			short[i] = fmt.Sprintf("%02d.%s", i, strings.Repeat("f", 60))
		}
		got = map[string]int{}
		for id := uint64(n + 1); id <= 2*n; id++ {
			h.sub(id, short, bus.DropNewest, 0, bus.ReplayNone, 0)
			if id%batch == 0 {
				got = addCounts(got, h.answers(batch))
			}
		}
		if got[""] != 256 || got["over budget: subscriptions of a peer (256)"] != n-256 {
			t.Fatalf("answers to 32 filters of 63 bytes: %v", got)
		}
		if st := pub.Stats().Publisher; st.OverBudget != long64+n-256 || st.Subscriptions != 256 {
			t.Fatalf("publisher stats %+v", st)
		}
		if got := warns.n.Load(); got != 1 {
			t.Fatalf("%d warnings of the peer over its budget, want 1 (once per peer)", got)
		}
		s := subscribed(t, ok, "x.>", nil)
		if err := s.Err(); err != nil {
			t.Fatalf("legitimate subscriber: %v", err)
		}
		publishN(t, pub, "x.y", 1, 10)
		msgs, _ := collectSynced(t, s, 10)
		seqs(t, msgs, 1)
		many := make([]string, 33)
		for i := range many {
			many[i] = fmt.Sprintf("y.%d", i)
		}
		over, err := ok.Subscribe("pub", many, nil)
		if err != nil {
			t.Fatal(err)
		}
		<-over.Ready()
		if err := over.Err(); !errors.Is(err, bus.ErrOverBudget) {
			t.Fatalf("33 filters: %v, want ErrOverBudget", err)
		}
	})
}

// Attack 4 of issue 32: a peer that asks policy Block (the publisher allows
// it) and never reads, subscribing again and again, beside a publisher
// whose Publish calls each give up after 50 ms, shorter than BlockTimeout.
// A full Block subscription's time counts over every Publish it held, so it
// is cut as slow after BlockTimeout, and its peer gets no Block again: the
// legitimate subscriber gets at least 80% of 500 messages. On the base a
// subscription holding each Publish less than BlockTimeout was never cut
// and the legitimate subscriber got a few.
func TestHostileBlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net, pub, ok := pubAndOK(t, 16, &bus.Config{Heartbeat: -1, Policies: allPolicies, BlockTimeout: 200 * time.Millisecond})
		s := subscribed(t, ok, "x.>", &bus.SubOptions{Policy: bus.DropNewest, HWM: 1000})
		h := newHostile(t, net)
		const total = 500
		got := make(chan []bus.Delivery, 1)
		go func() { got <- drain(s, total) }()
		published := 0
		for i := range total {
			if i%50 == 0 {
				h.sub(uint64(i+1), []string{">"}, bus.Block, 4, bus.ReplayNone, 0)
				synctest.Wait()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			if _, err := pub.Publish(ctx, bus.Pub{Subject: "x.y", Body: i}); err == nil {
				published++
			}
			cancel()
		}
		msgs := <-got
		t.Logf("published %d of %d, the legitimate subscriber got %d", published, total, len(msgs))
		if len(msgs) < total*8/10 {
			t.Fatalf("the legitimate subscriber got %d of %d attempts beside a Block subscriber that never reads", len(msgs), total)
		}
	})
}
