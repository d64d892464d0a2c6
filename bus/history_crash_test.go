package bus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/protocol"
)

// crashChildEnv names the bolt file a re-executed test binary publishes
// into until it is killed.
const crashChildEnv = "RAET_BUS_CRASH_HISTORY"

// TestBoltHistorySurvivesKill: a child process publishes from 8 goroutines
// into a bbolt history and prints each sequence number Publish
// acknowledged; it is killed (SIGKILL) mid-stream. The reopened file holds
// every acknowledged message, with its body, and its last sequence number
// is at least the highest acknowledged.
func TestBoltHistorySurvivesKill(t *testing.T) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "history.db")
	acked := killMidStream(t, "TestBoltHistorySurvivesKill", crashChildEnv, path, 3000)
	var top uint64
	for seq := range acked {
		top = max(top, seq)
	}

	h, err := bus.NewBoltHistory(path, 1_000_000, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	kept, _, err := h.Select(bus.Query{Filters: []string{">"}, Replay: protocol.BusReplaySinceSeq})
	if err != nil {
		t.Fatal(err)
	}
	have := map[uint64]any{}
	for _, m := range kept {
		have[m.Seq] = m.Body
	}
	missing := 0
	for seq, gk := range acked {
		body, ok := have[seq]
		if !ok {
			missing++
			continue
		}
		b, _ := body.(map[string]any)
		if fmt.Sprint(b["g"], b["k"]) != fmt.Sprint(gk[0], gk[1]) {
			t.Errorf("message %d: body %v, acknowledged as g %d k %d", seq, body, gk[0], gk[1])
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged messages lost by the kill", missing, len(acked))
	}
	if h.LastSeq() < top {
		t.Errorf("reopened history: last seq %d, below the acknowledged %d", h.LastSeq(), top)
	}
	t.Logf("%d acknowledged, %d on disk, last seq %d", len(acked), len(kept), h.LastSeq())
}

// crashChild publishes until killed, printing "seq g k" for each
// acknowledged message k of goroutine g.
func crashChild(path string) {
	h, err := bus.NewBoltHistory(path, 1_000_000, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	tr, err := bus.NewMemNet(0).Transport("pub")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n, err := bus.New(tr, &bus.Config{History: h, Heartbeat: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ackUntilKilled(8, func(g, k int) (uint64, error) {
		return n.Publish(context.Background(), bus.Pub{Subject: "crash.a", Body: map[string]any{"g": g, "k": k}})
	})
}

// Publish from 8 goroutines at once into a bbolt history keeping the last
// 50: a subscriber gets every message once, in order (a message waits for
// its group commit, never longer), and the reopened file holds the last 50
// and goes on from the last sequence number.
func TestBoltHistoryGroupCommitDelivers(t *testing.T) {
	net := bus.NewMemNet(0)
	path := filepath.Join(t.TempDir(), "history.db")
	open := func(name string) bus.Transport { return memTransport(t, net, name) }
	h, err := bus.NewBoltHistory(path, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	pub := newNode(t, open("pub"), &bus.Config{History: h, Heartbeat: -1})
	sn := newNode(t, open("sub"), &bus.Config{Heartbeat: -1})
	s, err := sn.Subscribe("pub", []string{"g.>"}, &bus.SubOptions{HWM: 1000, Buffer: 1000})
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	const goroutines, each = 8, 100
	ctx := ctxT(t, time.Minute)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for k := range each {
				if _, err := pub.Publish(ctx, bus.Pub{Subject: fmt.Sprintf("g.%d", g), Body: map[string]any{"k": k}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	msgs, all := collect(t, s, goroutines*each, 30*time.Second)
	if len(all) != len(msgs) {
		t.Fatalf("reports besides messages: %d", len(all)-len(msgs))
	}
	seqs(t, msgs, 1)
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	h2, err := bus.NewBoltHistory(path, 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if h2.LastSeq() != goroutines*each || h2.Len() != goroutines*50 {
		t.Fatalf("reopened history: last %d, %d kept", h2.LastSeq(), h2.Len())
	}
}

// While a bbolt history cannot write (its file's write lock held), Publish
// does not return and the subscriber gets nothing; once it can, both go
// on.
func TestBoltHistoryHoldsUntilOnDisk(t *testing.T) {
	net := bus.NewMemNet(0)
	open := func(name string) bus.Transport { return memTransport(t, net, name) }
	h, err := bus.NewBoltHistory(filepath.Join(t.TempDir(), "history.db"), 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	pub := newNode(t, open("pub"), &bus.Config{History: h, Heartbeat: -1})
	sn := newNode(t, open("sub"), &bus.Config{Heartbeat: -1})
	s, err := sn.Subscribe("pub", []string{"a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	publishN(t, pub, "a", 0, 1)
	msgs, _ := collect(t, s, 1, 10*time.Second)
	seqs(t, msgs, 1)

	release := bus.HoldHistoryWrites(h)
	t.Cleanup(release) // before the nodes close: a Close waits for the writes
	type result struct {
		seq uint64
		err error
	}
	done := make(chan result, 1)
	go func() {
		seq, err := pub.Publish(ctxT(t, time.Minute), bus.Pub{Subject: "a", Body: map[string]any{"i": 1}})
		done <- result{seq, err}
	}()
	quiet(t, s, 300*time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("Publish returned %d, %v before its message was on disk", r.seq, r.err)
	default:
	}
	release()
	if r := <-done; r.err != nil || r.seq != 2 {
		t.Fatalf("Publish: %d, %v", r.seq, r.err)
	}
	msgs, _ = collect(t, s, 1, 10*time.Second)
	seqs(t, msgs, 2)
}

// memTransport is name's transport on net, closed at cleanup.
func memTransport(t *testing.T, net *bus.MemNet, name string) bus.Transport {
	t.Helper()
	tr, err := net.Transport(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
