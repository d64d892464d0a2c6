package road_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// Real stacks on loopback, fast profile: other Sends 400 messages of 16 KiB at once to a
// main with room for 4 unfinished messages per remote (other assumes 32):
// every Send returns nil and main receives each message exactly once.
func TestSendsBeyondReassemblyRoom(t *testing.T) {
	const n = 400
	fast := road.ProfileAuto // the fast profile between raet-go estates
	m, o := joined(t, road.Config{AlivePeriod: -1, Profile: fast, Reassembly: packet.ReassemblyConfig{MaxPerRemote: 4}},
		road.Config{AlivePeriod: -1, Profile: fast, BurstSize: 2})
	ctx := ctxT(t, 60*time.Second)
	data := strings.Repeat("r", 16<<10)
	got := make(chan map[string]int, 1)
	go func() {
		seen := map[string]int{}
		for len(seen) < n {
			select {
			case msg := <-m.Receive():
				seen[fmt.Sprint(msg.Body["id"])]++
			case <-ctx.Done():
				got <- seen
				return
			}
		}
		time.Sleep(100 * time.Millisecond) // a late repeat would come now
		for {
			select {
			case msg := <-m.Receive():
				seen[fmt.Sprint(msg.Body["id"])]++
			default:
				got <- seen
				return
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if err := o.Send(ctx, "main", map[string]any{"id": i, "data": data}); err != nil {
				errs <- fmt.Errorf("send %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := <-got
	for i := range n {
		if k := seen[fmt.Sprint(i)]; k != 1 {
			t.Errorf("message %d received %d times", i, k)
		}
	}
	c, err := m.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("main's drops: %v, %d retransmissions", c.Drops, c.Retransmits)
}
