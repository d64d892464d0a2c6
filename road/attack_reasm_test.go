package road_test

import (
	"bytes"
	"crypto/rand"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// TestAttackSegmentBomb: a joined peer keeps opening huge segmented
// messages (first segments of 64 MiB messages) and repeating them, while
// a second peer sends 20 messages of 50 KB. Every one of the second peer's
// messages arrives exactly once; the attacker holds no more than its
// reassembly quota, its drops are counted; and repeats do not keep its
// messages alive: once it stops opening new ones, they time out although
// the repeats go on.
func TestAttackSegmentBomb(t *testing.T) {
	var keylog, logs bytes.Buffer
	var mu, logMu sync.Mutex
	attackerKeep := t.TempDir()
	ref := road.ProfileReference
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))
	m, a := joined(t, road.Config{AlivePeriod: -1, Profile: ref, MessageTimeout: 2 * time.Second, Logger: logger},
		road.Config{Name: "attacker", KeepDir: attackerKeep, Auto: keep.AutoAlways,
			KeyLog: lockedWriter{&mu, &keylog}, AlivePeriod: -1, Profile: ref})
	v := newStack(t, road.Config{Name: "victim", Auto: keep.AutoAlways, AlivePeriod: -1, Profile: ref})
	ctx := ctxT(t, 60*time.Second)
	if _, err := v.Join(ctx, m.Addr().String()); err != nil {
		t.Fatal(err)
	}
	rs, err := a.Remotes(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatal(rs, err)
	}
	mu.Lock()
	f := newForger(t, attackerKeep, keylog.Bytes(), rs[0])
	mu.Unlock()
	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(m.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// A first segment of a message of the largest size, as the attacker's
	// signing key makes it (the coat is never opened: it is never whole).
	payload := make([]byte, 700)
	rand.Read(payload)
	bomb := func(ti uint32) []byte {
		h := f.head
		h.TransactionID, h.SegmentCount, h.MessageLength = ti, 0xffff, codec.MaxMessageSize
		h.SetSegment(true)
		h.SetWait(false)
		b, err := f.pk.Pack(nil, &h, payload)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	quota := packet.DefaultMaxPerRemote
	var opening atomic.Bool // new messages too, not only repeats
	opening.Store(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var sent atomic.Int64
	go func() {
		defer wg.Done()
		next := uint32(50_000)
		for round := 0; ; round++ {
			for k := range 2 * quota {
				conn.Write(bomb(uint32(10_000 + k))) // repeats after the first round
				sent.Add(1)
			}
			if opening.Load() {
				conn.Write(bomb(next))
				next++
				sent.Add(1)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	time.Sleep(200 * time.Millisecond) // the attacker's messages are in

	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- v.Send(ctx, "main", map[string]any{"seq": i, "data": strings.Repeat(string(rune('a'+i)), 50_000)})
		}()
	}
	got := map[int]int{}
	for done, received := 0, 0; done < n || received < n; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("victim's message failed: %v", err)
			}
			done++
		case msg := <-m.Receive():
			if msg.From != "victim" {
				t.Fatalf("delivered from %s: %v", msg.From, msg.Body)
			}
			seq, ok := msg.Body["seq"].(int64)
			if !ok {
				t.Fatalf("seq %T %v", msg.Body["seq"], msg.Body["seq"])
			}
			if d, _ := msg.Body["data"].(string); len(d) != 50_000 {
				t.Fatalf("message %v has %d bytes of data", seq, len(d))
			}
			got[int(seq)]++
			received++
		case <-ctx.Done():
			t.Fatalf("%d of %d messages done, %d received", done, n, received)
		}
	}
	// Nothing more comes (each exactly once).
	select {
	case msg := <-m.Receive():
		t.Fatalf("an extra message from %s: seq %v", msg.From, msg.Body["seq"])
	case <-time.After(500 * time.Millisecond):
	}
	for i := range n {
		if got[i] != 1 {
			t.Fatalf("message %d delivered %d times", i, got[i])
		}
	}
	c, err := m.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	limit := packet.MessageCharge(codec.MaxMessageSize)
	if c.Drops["reassembly_remote_full"] == 0 || c.Reassembling > quota || c.ReassemblyMemory > limit {
		t.Fatalf("attacker's part: %d messages, %d bytes (quota %d messages, %d bytes); drops %v",
			c.Reassembling, c.ReassemblyMemory, quota, limit, c.Drops)
	}
	logMu.Lock()
	warned := strings.Count(logs.String(), "no reassembly room")
	attackerNamed := strings.Contains(logs.String(), "remote=attacker reason=reassembly_remote_full")
	logMu.Unlock()
	if warned == 0 || !attackerNamed || warned > 2 {
		t.Fatalf("%d reassembly warnings (want 1 a minute, naming the attacker): %s", warned, logs.String())
	}
	t.Logf("during the bomb: %d datagrams sent by the attacker; main holds %d messages in %d bytes for it (quota %d, %d bytes); drops %v",
		sent.Load(), c.Reassembling, c.ReassemblyMemory, quota, limit, c.Drops)

	// Repeats alone keep nothing alive.
	opening.Store(false)
	for {
		c, err := m.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Reassembling == 0 && c.ReassemblyMemory == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the attacker's repeats kept %d messages (%d bytes) alive", c.Reassembling, c.ReassemblyMemory)
		case <-time.After(100 * time.Millisecond):
		}
	}
	close(stop)
}
