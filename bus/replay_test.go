package bus_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
)

func publishN(t *testing.T, n *bus.Node, subject string, from, count int) {
	t.Helper()
	ctx := ctxT(t, time.Minute)
	for i := from; i < from+count; i++ {
		if _, err := n.Publish(ctx, bus.Pub{Subject: subject, Body: map[string]any{"i": i}}); err != nil {
			t.Fatal(err)
		}
	}
}

// seqs checks that msgs have the sequence numbers from..to, in order.
func seqs(t *testing.T, msgs []bus.Delivery, from uint64) {
	t.Helper()
	for i, m := range msgs {
		if m.Seq != from+uint64(i) {
			t.Fatalf("message %d has seq %d, want %d (gap or duplicate)", i, m.Seq, from+uint64(i))
		}
	}
}

// A late joiner asking for the last 10 gets exactly those, then the live
// messages, with no gap and no duplicate.
func TestLateJoinerLastN(t *testing.T) {
	for _, w := range worlds(t) {
		t.Run(w.name, func(t *testing.T) {
			ptr, _ := w.open(t, "pub-"+w.name)
			str, _ := w.open(t, "late-"+w.name)
			pub := newNode(t, ptr, &bus.Config{Heartbeat: -1})
			sn := newNode(t, str, &bus.Config{Heartbeat: -1})
			publishN(t, pub, "doc.a", 0, 50) // seq 1..50
			publishN(t, pub, "other", 0, 5)  // 51..55, not matching
			s, err := sn.Subscribe(pub.Name(), []string{"doc.*"}, &bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplayLast, N: 10}})
			if err != nil {
				t.Fatal(err)
			}
			ready(t, s)
			publishN(t, pub, "doc.b", 50, 30) // 56..85
			msgs, all := collect(t, s, 40, 10*time.Second)
			if len(all) != 40 {
				t.Fatalf("reports besides messages: %+v", all)
			}
			seqs(t, msgs[:10], 41)
			seqs(t, msgs[10:], 56)
			quiet(t, s, 20*time.Millisecond)
		})
	}
}

// A subscriber killed and restarted with "since S" (its last position)
// misses nothing and repeats nothing, though the publisher went on
// publishing while it was away.
func TestRestartSinceSeq(t *testing.T) {
	for _, w := range worlds(t) {
		t.Run(w.name, func(t *testing.T) {
			ptr, _ := w.open(t, "pub-"+w.name)
			pub := newNode(t, ptr, &bus.Config{Heartbeat: 50 * time.Millisecond})
			str, kill := w.open(t, "sub-"+w.name)
			sn := newNode(t, str, &bus.Config{Heartbeat: 50 * time.Millisecond})
			s, err := sn.Subscribe(pub.Name(), []string{"t.>"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ready(t, s)
			publishN(t, pub, "t.x", 0, 30)
			msgs, _ := collect(t, s, 30, 10*time.Second)
			seqs(t, msgs, 1)
			epoch, last := s.Position()
			if last != 30 || epoch == 0 {
				t.Fatalf("position %d %d", epoch, last)
			}
			sn.Close()
			kill()
			publishN(t, pub, "t.y", 30, 20) // 31..50 while it is away

			str2, _ := w.open(t, "sub-"+w.name)
			sn2 := newNode(t, str2, &bus.Config{Heartbeat: 50 * time.Millisecond})
			s2, err := sn2.Subscribe(pub.Name(), []string{"t.>"},
				&bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplaySinceSeq, Seq: last, Epoch: epoch}})
			if err != nil {
				t.Fatal(err)
			}
			ready(t, s2)
			publishN(t, pub, "t.z", 50, 10) // 51..60
			msgs, all := collect(t, s2, 30, 10*time.Second)
			if len(all) != 30 {
				t.Fatalf("reports besides messages: %+v", all)
			}
			seqs(t, msgs, 31)
			quiet(t, s2, 20*time.Millisecond)
			// The publisher dropped the dead run's subscription.
			eventually(t, func() error {
				live := 0
				for _, st := range pub.Subscribers() {
					if st.Ended == "" {
						live++
					}
				}
				if live != 1 {
					return fmt.Errorf("%d live subscriptions at the publisher, want 1", live)
				}
				return nil
			})
		})
	}
}

// A publisher restarted with a durable history still serves replay, and
// its sequence numbers go on; a subscriber resuming in the same history
// gets no gap.
func TestDurableHistoryAcrossRestart(t *testing.T) {
	net := bus.NewMemNet(0)
	path := filepath.Join(t.TempDir(), "history.db")
	open := func(name string) bus.Transport {
		tr, err := net.Transport(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	h, err := bus.NewBoltHistory(path, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	ptr := open("pub")
	pub := newNode(t, ptr, &bus.Config{History: h, Heartbeat: -1})
	publishN(t, pub, "a", 0, 20)
	publishN(t, pub, "b", 20, 5)
	epoch := h.Epoch()
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	ptr.(*bus.MemTransport).Close()

	h2, err := bus.NewBoltHistory(path, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Epoch() != epoch || h2.LastSeq() != 25 || h2.Len() != 25 {
		t.Fatalf("reopened history: epoch %d (was %d), last %d, %d kept", h2.Epoch(), epoch, h2.LastSeq(), h2.Len())
	}
	pub2 := newNode(t, open("pub"), &bus.Config{History: h2, Heartbeat: -1})
	sn := newNode(t, open("sub"), &bus.Config{Heartbeat: -1})
	s, err := sn.Subscribe("pub", []string{"a"}, &bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplaySinceSeq, Seq: 10, Epoch: epoch}})
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	if seq, err := pub2.Publish(ctxT(t, time.Second), bus.Pub{Subject: "a", Body: map[string]any{"i": 25}}); err != nil || seq != 26 {
		t.Fatalf("publish after restart: seq %d, %v", seq, err)
	}
	msgs, all := collect(t, s, 11, 10*time.Second)
	if len(all) != 11 {
		t.Fatalf("reports besides messages: %+v", all)
	}
	seqs(t, msgs[:10], 11)
	if msgs[10].Seq != 26 || fmt.Sprint(msgs[0].Body.(map[string]any)["i"]) != "10" {
		t.Fatalf("messages %+v", msgs)
	}
	// A subscriber that asks for an older position than kept, or from
	// another history, is told of the gap.
	s2, err := sn.Subscribe("pub", []string{"b"}, &bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplaySinceSeq, Seq: 3, Epoch: epoch + 1}})
	if err != nil {
		t.Fatal(err)
	}
	_, all = collect(t, s2, 5, 10*time.Second)
	if all[0].Kind != bus.DeliveryGap {
		t.Fatalf("first delivery %+v, want a gap", all[0])
	}
}

// A subscription since a time T gets the retained messages published at or
// after T, then the live ones; one whose T is older than the history
// reaches is told of the gap.
func TestReplaySinceTime(t *testing.T) {
	trs := memKind().make(t, "pub", "sub")
	pub := newNode(t, trs[0], &bus.Config{Heartbeat: -1, HistoryLast: 5})
	sn := newNode(t, trs[1], &bus.Config{Heartbeat: -1})
	publishN(t, pub, "t.a", 0, 10) // 1..10; t.a keeps 6..10
	time.Sleep(2 * time.Millisecond)
	since := time.Now()
	time.Sleep(2 * time.Millisecond)
	publishN(t, pub, "t.b", 10, 3) // 11..13
	s, err := sn.Subscribe("pub", []string{"t.*"}, &bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplaySinceTime, Time: since}})
	if err != nil {
		t.Fatal(err)
	}
	ready(t, s)
	publishN(t, pub, "t.c", 13, 2) // 14, 15
	msgs, all := collect(t, s, 5, 5*time.Second)
	if len(all) != 5 {
		t.Fatalf("deliveries %+v", all)
	}
	seqs(t, msgs, 11)
	// From before the first message: t.a has dropped 1..5, so a gap first.
	s2, err := sn.Subscribe("pub", []string{"t.a"}, &bus.SubOptions{Replay: bus.Replay{Mode: bus.ReplaySinceTime, Time: since.Add(-time.Hour)}})
	if err != nil {
		t.Fatal(err)
	}
	msgs, all = collect(t, s2, 5, 5*time.Second)
	if all[0].Kind != bus.DeliveryGap {
		t.Fatalf("first delivery %+v, want a gap", all[0])
	}
	seqs(t, msgs, 6)
}
