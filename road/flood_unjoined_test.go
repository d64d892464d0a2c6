//go:build flood

package road_test

import (
	"context"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// A main that accepts any keys (auto always) under 4,000 spoofed joins of
// new estates from 250 loopback sources, each of its own role, with room
// for all of them in its stranger budget: each join request it answers
// writes an accepted role record that no join completes, and the keep
// leaves at most keep.DefaultMaxUnjoined of them on disk (they expire after
// keep.DefaultUnjoinedTTL: keep's TestUnjoinedRolesExpire), while a known
// peer joins during the flood and its record stays.
func TestAttackJoinFloodAlways(t *testing.T) {
	mainKeep := t.TempDir()
	m := newStack(t, road.Config{Name: "main", Main: true, KeepDir: mainKeep, Auto: keep.AutoAlways,
		StrangerJoins: 8192, StrangerJoinRate: 1000, AlivePeriod: -1})
	f := newFlooder(t, 250)
	const rate, most = 4000, 4000
	joins := make([][]byte, most)
	for i := range joins {
		joins[i] = strangerJoin(t, i)
	}
	f.run(m.Addr(), rate, most, func(i int) []byte { return joins[i] })
	time.Sleep(500 * time.Millisecond) // the flood is on

	o := newStack(t, road.Config{Name: "other", KeepDir: t.TempDir(), Auto: keep.AutoAlways})
	ctx := ctxT(t, 20*time.Second)
	start := time.Now()
	if _, err := o.Join(ctx, m.Addr().String()); err != nil {
		t.Fatalf("the peer's join during the flood: %v", err)
	}
	joinTook := time.Since(start)
	f.done.Wait() // the flood is over
	c, k, roles := floodEnd(t, ctx, m, mainKeep)
	t.Logf("%d spoofed joins, %d answered; the peer joined in %v; keep: %d role records; drops %v",
		f.sent.Load(), c.PacketsIn["join/request"]-c.Drops["join_budget"], joinTook, len(roles), c.Drops)
	if len(roles) > keep.DefaultMaxUnjoined+1 {
		t.Fatalf("%d role records on disk; want at most %d unjoined and other's", len(roles), keep.DefaultMaxUnjoined)
	}
	if _, err := k.LoadRemoteRole("other"); err != nil {
		t.Fatalf("the joined peer's role record: %v", err)
	}
}

// floodEnd takes the counters of m, whose keep is dir, closes it, and opens
// its keep (auto never: as it is), with the role records it holds.
func floodEnd(t *testing.T, ctx context.Context, m *road.Stack, dir string) (road.Counters, *keep.Keep, []string) {
	t.Helper()
	c, err := m.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	roles, err := k.RoleNames()
	if err != nil {
		t.Fatal(err)
	}
	return c, k, roles
}
