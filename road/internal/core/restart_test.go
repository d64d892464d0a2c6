package core

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// restartedMain is a main core started from a keep holding n remotes,
// joined and accepted (every tenth not joined: its keys wait for a new
// join), none of which answers.
func restartedMain(tb testing.TB, n int, cfg Config) (*Core, time.Time) {
	now := time.Unix(1_700_000_000, 0)
	st := newMemStore()
	cfg.Name, cfg.Main, cfg.Auto = "main", true, keep.AutoAlways
	if _, err := New(&cfg, st, now); err != nil { // makes the local estate
		tb.Fatal(err)
	}
	for i := range n {
		name := fmt.Sprint("r", i)
		joined := i%10 != 0
		st.remotes[name] = keep.RemoteEstate{Name: name, UID: uint32(i + 2), FUID: uint32(i + 7),
			HA:  keep.HostPort{Host: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}).String(), Port: 7531},
			SID: 3, Joined: &joined, Role: name}
		st.roles[name] = keep.RemoteRole{Role: name, Acceptance: keep.Accepted,
			Verify: keys.VerifyKey{1, byte(i), byte(i >> 8)}, Public: keys.PublicKey{9, byte(i), byte(i >> 8)}}
	}
	c, err := New(&cfg, st, now)
	if err != nil {
		tb.Fatal(err)
	}
	if len(c.roster.remotes) != n {
		tb.Fatalf("%d remotes loaded, want %d", len(c.roster.remotes), n)
	}
	c.Start(netip.MustParseAddrPort("127.0.0.1:7530"), now)
	return c, now
}

// restartTraffic is what a core sent in each second: datagrams, and
// transactions started (their first datagram).
type restartTraffic struct {
	sent, started []int
	most          int // the most datagrams of one transaction
}

// runTimers runs c's timers for d from now, as its owner does, and counts
// what it sends in each second.
func runTimers(tb testing.TB, c *Core, now time.Time, d time.Duration) restartTraffic {
	end := now.Add(d)
	tr := restartTraffic{sent: make([]int, d/time.Second), started: make([]int, d/time.Second)}
	type txnID struct{ de, ti uint32 }
	per := map[txnID]int{}
	var spare []Datagram
	for range 10_000_000 {
		w := c.Deadline()
		if w.IsZero() || !w.Before(end) {
			return tr
		}
		c.Tick(w)
		out := c.TakeOut(spare)
		sec := int(w.Sub(now) / time.Second)
		for i := range out {
			var pk packet.Packet
			if err := packet.Parse(out[i].B, &pk); err != nil {
				tb.Fatalf("sent an unparsable datagram: %v", err)
			}
			id := txnID{pk.Head.DestinationID, pk.Head.TransactionID}
			if per[id]++; per[id] == 1 {
				tr.started[sec]++
			}
			tr.most = max(tr.most, per[id])
			tr.sent[sec]++
			out[i].Release()
		}
		spare = out
	}
	tb.Fatal("timers never got past the end")
	return tr
}

// A main restarted from a keep of many remotes, none answering yet, mends
// their sessions (allow, or join for those not joined, as the reference's
// presence does) at most AliveRate a second from the first second on, in
// an even stream, not all in one tick each AlivePeriod: what it sends a
// second is bounded by AliveRate times one transaction's datagrams, the
// same for 1000 remotes as for 4000.
func TestRestartSpreadsPresence(t *testing.T) {
	const rate = 200
	steady := map[int]float64{}
	for _, n := range []int{1000, 4000} {
		c, now := restartedMain(t, n, Config{AlivePeriod: time.Second, AliveRate: rate})
		tr := runTimers(t, c, now, time.Minute)
		t.Logf("%d remotes: sent per second %v; transactions started per second %v; at most %d datagrams each",
			n, tr.sent, tr.started, tr.most)
		total := 0
		for s := range tr.sent {
			if tr.started[s] > rate+1 || tr.sent[s] > (rate+1)*tr.most {
				t.Fatalf("%d remotes, second %d: %d started, %d sent, want at most %d and %d",
					n, s, tr.started[s], tr.sent[s], rate+1, (rate+1)*tr.most)
			}
			if s >= 30 {
				total += tr.sent[s]
			}
		}
		steady[n] = float64(total) / 30
		if steady[n] == 0 {
			t.Fatalf("%d remotes: the main does not mend its sessions", n)
		}
	}
	if r := steady[4000] / steady[1000]; r > 1.1 || r < 0.9 {
		t.Errorf("steady packets a second grow with the remotes: %v", steady)
	}
}
