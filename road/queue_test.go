package road_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// memQueue is a road.Queue that outlives the stacks using it, as a durable
// queue outlives a crash.
type memQueue struct {
	mu   sync.Mutex
	next uint64
	msgs []road.QueuedMessage
}

func (q *memQueue) Put(remote string, kind codec.BodyKind, body []byte) (uint64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.next++
	q.msgs = append(q.msgs, road.QueuedMessage{ID: q.next, Remote: remote, Kind: kind, Body: append([]byte(nil), body...)})
	return q.next, nil
}

func (q *memQueue) Done(id uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, m := range q.msgs {
		if m.ID == id {
			q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
			break
		}
	}
	return nil
}

func (q *memQueue) Pending() ([]road.QueuedMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]road.QueuedMessage(nil), q.msgs...), nil
}

func (q *memQueue) len() int { q.mu.Lock(); defer q.mu.Unlock(); return len(q.msgs) }

// A message whose remote is gone stays in the queue, and a restarted stack
// sends it once the remote is back and allowed.
func TestQueueSurvivesRestart(t *testing.T) {
	q := &memQueue{}
	mcfg := road.Config{Name: "main", Main: true, KeepDir: t.TempDir(), Auto: keep.AutoAlways, Listen: "127.0.0.1:0",
		AlivePeriod: 100 * time.Millisecond}
	ocfg := road.Config{Name: "other", KeepDir: t.TempDir(), Auto: keep.AutoAlways, Queue: q, MessageTimeout: 300 * time.Millisecond,
		AlivePeriod: 100 * time.Millisecond}
	m := newStack(t, mcfg)
	o := newStack(t, ocfg)
	ctx := ctxT(t, 30*time.Second)
	if _, err := o.Join(ctx, m.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := o.Send(ctx, "main", map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	recvOne(t, m, 5*time.Second)
	if q.len() != 0 {
		t.Fatalf("%d messages left after done", q.len())
	}
	mcfg.Listen = m.Addr().String()
	m.Close()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := o.Send(sctx, "main", map[string]any{"n": 2, "while": "down"})
	cancel()
	if err == nil {
		t.Fatal("send to a closed estate succeeded")
	}
	if q.len() != 1 {
		t.Fatalf("queue holds %d messages", q.len())
	}
	ocfg.Listen = o.Addr().String() // it comes back where main knows it
	o.Close()                       // the sender crashes
	m2 := newStack(t, mcfg)
	newStack(t, ocfg) // restarts from its keep and its queue
	got := recvOne(t, m2, 20*time.Second)
	if got.Body["while"] != "down" {
		t.Fatalf("got %+v", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for q.len() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if q.len() != 0 {
		t.Fatalf("the queue still holds %d messages", q.len())
	}
}

// stableQueue is a durable queue with a stable store instance (queue.Stable)
// whose Done can be lost, as when the sender dies between its remote's done
// and the queue's write.
type stableQueue struct {
	memQueue
	loseDones atomic.Bool
}

func (q *stableQueue) Instance() uint64 { return 0x5eed }

func (q *stableQueue) Done(id uint64) error {
	if q.loseDones.Load() {
		return nil
	}
	return q.memQueue.Done(id)
}

// A sender dies after its messages were delivered but before its queue
// forgot them; restarted on its keep and its queue, it sends them again
// in a new session, and the receiver, by their message ids, answers them
// done without delivering them twice. New messages still arrive once.
func TestQueueExactlyOnceAcrossSenderRestart(t *testing.T) {
	q := &stableQueue{}
	q.loseDones.Store(true)
	m := newStack(t, road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, AlivePeriod: -1})
	ocfg := road.Config{Name: "other", KeepDir: t.TempDir(), Auto: keep.AutoAlways, Queue: q, AlivePeriod: -1, Listen: "127.0.0.1:0"}
	o, err := road.New(&ocfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 60*time.Second)
	if _, err := o.Join(ctx, m.Addr().String()); err != nil {
		t.Fatal(err)
	}
	const n = 30
	got := map[int64]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.Send(ctx, "main", map[string]any{"seq": i}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for range n {
		seq, _ := recvOne(t, m, 5*time.Second).Body["seq"].(int64)
		got[seq]++
	}
	if q.len() != n {
		t.Fatalf("the queue holds %d messages, want all %d (their dones lost)", q.len(), n)
	}
	ocfg.Listen = o.Addr().String()
	o.Close() // the crash
	q.loseDones.Store(false)

	o2 := newStack(t, ocfg)
	if _, err := o2.Join(ctx, m.Addr().String()); err != nil {
		t.Fatal(err)
	}
	done, failed, err := o2.WaitPending(ctx)
	if err != nil || done != n || failed != 0 {
		t.Fatalf("resent: %d done, %d failed, %v", done, failed, err)
	}
	for i := range 5 {
		if err := o2.Send(ctx, "main", map[string]any{"seq": n + i}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		seq, _ := recvOne(t, m, 5*time.Second).Body["seq"].(int64)
		got[seq]++
	}
	select {
	case msg := <-m.Receive():
		t.Fatalf("delivered again: %v", msg.Body)
	case <-time.After(300 * time.Millisecond):
	}
	for i := range int64(n + 5) {
		if got[i] != 1 {
			t.Fatalf("message %d delivered %d times", i, got[i])
		}
	}
	if q.len() != 0 {
		t.Fatalf("the queue still holds %d messages", q.len())
	}
	c, err := m.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c.Drops["message_id_repeated"] != n {
		t.Fatalf("%d repeats answered done, want %d; drops %v", c.Drops["message_id_repeated"], n, c.Drops)
	}
}
