package road_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/netsim"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// payload is the deterministic body of message i: sizes from 10 B to 64 KiB.
func payload(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 99))
	sizes := []int{10, 200, 900, 1500, 4000, 20000, 65536}
	n := sizes[r.IntN(len(sizes))]
	return strings.Repeat(string(rune('a'+i%26)), n)
}

// Over an in-process network that loses, duplicates, reorders and delays
// datagrams, 1000 messages of mixed sizes are each delivered exactly once
// and intact: with the fast profile two raet-go estates negotiate, and with
// the reference profile.
func TestLossyNetworkExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		loss float64
		prof road.Profile
	}{{0, road.ProfileAuto}, {0.10, road.ProfileAuto}, {0.30, road.ProfileAuto}, {0.10, road.ProfileReference}} {
		loss := tc.loss
		name := map[road.Profile]string{road.ProfileAuto: "fast", road.ProfileReference: "reference"}[tc.prof]
		t.Run(fmt.Sprintf("%s/loss%.0f%%", name, loss*100), func(t *testing.T) {
			imp := netsim.Impairment{Loss: loss, Duplicate: 0.05, Reorder: 0.10, Delay: 200 * time.Microsecond,
				Jitter: 100 * time.Microsecond, Limit: 100_000, Seed: uint64(loss * 1000)}
			net := netsim.NewNetwork(7)
			t.Cleanup(func() { net.Close() })
			connA, err := net.Listen(netip.MustParseAddrPort("10.0.0.1:7530"), imp)
			if err != nil {
				t.Fatal(err)
			}
			connB, err := net.Listen(netip.MustParseAddrPort("10.0.0.2:7530"), imp)
			if err != nil {
				t.Fatal(err)
			}
			m := newStack(t, road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, PacketConn: connA, AlivePeriod: -1, Profile: tc.prof})
			o := newStack(t, road.Config{Name: "other", Auto: keep.AutoAlways, PacketConn: connB, AlivePeriod: -1, Profile: tc.prof})
			ctx := ctxT(t, 5*time.Minute)
			start := time.Now()
			var joinErr error
			for try := 0; try < 10; try++ {
				if _, joinErr = o.Join(ctx, "10.0.0.1:7530"); joinErr == nil {
					break
				}
			}
			if joinErr != nil {
				t.Fatal(joinErr)
			}
			if rs, _ := o.Remotes(ctx); len(rs) != 1 || (rs[0].FootKind == codec.FootKindMAC) != (tc.prof == road.ProfileAuto) {
				t.Fatalf("session profile %+v", rs)
			}

			const n = 1000
			received := make(map[int]int)
			var mu sync.Mutex
			recvDone := make(chan struct{})
			go func() {
				defer close(recvDone)
				for len(received) < n {
					select {
					case msg := <-m.Receive():
						var id int
						fmt.Sscan(fmt.Sprint(msg.Body["id"]), &id)
						mu.Lock()
						received[id]++
						if msg.Body["data"] != payload(id) {
							t.Errorf("message %d arrived damaged", id)
						}
						mu.Unlock()
					case <-ctx.Done():
						return
					}
				}
			}()
			// Should it ever stall, show where every goroutine is.
			stall := time.AfterFunc(3*time.Minute, func() {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				t.Logf("stalled after 3 minutes; goroutines:\n%s", buf[:n])
			})
			defer stall.Stop()
			sem := make(chan struct{}, 32)
			var wg sync.WaitGroup
			var failures sync.Map
			for i := range n {
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-sem; wg.Done() }()
					if err := o.Send(ctx, "main", map[string]any{"id": i, "data": payload(i)}); err != nil {
						failures.Store(i, err)
					}
				}()
			}
			wg.Wait()
			failures.Range(func(k, v any) bool {
				t.Errorf("send %v: %v", k, v)
				return true
			})
			<-recvDone
			// Let duplicates and late retransmissions arrive, then count.
			time.Sleep(300 * time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			for i := range n {
				if received[i] != 1 {
					t.Errorf("message %d delivered %d times", i, received[i])
				}
			}
			c, _ := o.Counters(ctx)
			st := net.Stats()
			t.Logf("%s profile, loss %.0f%%: %d messages in %v; sender retransmits %d; unroutable %d",
				name, loss*100, n, time.Since(start).Round(time.Millisecond), c.Retransmits, st.Unroutable)
		})
	}
}
