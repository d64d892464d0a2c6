package core

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
)

// The silence list holds exactly the added remotes, ordered by when they
// were last heard, through adds, hearings, removals and forgetting; the
// cap forgets its head.
func TestSilenceListOrder(t *testing.T) {
	c := bareCore(t)
	c.cfg.MaxRemotes = 50
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 5000 {
		c.now = c.now.Add(time.Duration(rng.IntN(3)) * time.Millisecond)
		switch op := rng.IntN(10); {
		case op < 4 || len(c.remotes) == 0:
			oldest := c.silence.head
			n := len(c.remotes)
			addKeyed(c, i, 1)
			if n == c.cfg.MaxRemotes && c.remotes[oldest.nuid] == oldest {
				t.Fatalf("op %d: over the cap, the longest silent %d stays", i, oldest.nuid)
			}
		case op < 8:
			for _, r := range c.remotes {
				c.heard(r)
				break
			}
		case op < 9:
			for _, r := range c.remotes {
				c.removeRemote(r, ErrForgotten)
				break
			}
		default:
			for _, r := range c.remotes {
				c.forget(r, ReasonSilent)
				break
			}
		}
		var order []*remote
		for r := c.silence.head; r != nil && len(order) <= len(c.remotes); r = r.newer {
			order = append(order, r)
		}
		if len(order) != len(c.remotes) || len(c.remotes) > c.cfg.MaxRemotes {
			t.Fatalf("op %d: %d in the list, %d remotes", i, len(order), len(c.remotes))
		}
		if !slices.IsSortedFunc(order, func(a, b *remote) int { return a.heard.Compare(b.heard) }) {
			t.Fatalf("op %d: the list is not by last heard", i)
		}
		for j, r := range order {
			if c.remotes[r.nuid] != r || (j > 0 && r.older != order[j-1]) {
				t.Fatalf("op %d: list entry %d is not a held remote or is mislinked", i, j)
			}
		}
		if len(order) > 0 && c.silence.tail != order[len(order)-1] {
			t.Fatalf("op %d: tail is not the last heard", i)
		}
	}
}

// BenchmarkCapForget is the cost of one remote over the cap (added, and
// the longest silent forgotten) with N remotes held: flat in N.
func BenchmarkCapForget(b *testing.B) {
	for _, n := range []int{1000, 10_000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			c := bareCore(b)
			c.cfg.MaxRemotes = n
			for i := range n {
				addKeyed(c, i, 1)
			}
			c.PublishKeys()
			i := n
			b.ReportAllocs()
			for b.Loop() {
				addKeyed(c, i, 1)
				c.PublishKeys()
				c.events = c.events[:0]
				i++
			}
		})
	}
}

// A role's record that left the table with its forgotten remote still
// decides: the table reads it from the store again (keptRoleOf), so keys
// an operator rejected stay rejected.
func TestEvictedRoleStillDecides(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	c := p.main
	r := c.byName["other"]
	rec := c.roles[r.role].rec
	rec.Acceptance = keep.Rejected
	if _, err := c.store.write(&keepWrite{op: opSaveRole, role: rec}); err != nil {
		t.Fatal(err)
	}
	c.evictRole(r.role)
	if c.roles[r.role] != nil {
		t.Fatal("the record stayed in the table")
	}
	st, err := c.statusRole(keep.AutoOnce, r.role, r.verify, r.pub, netip.AddrPort{})
	if err != nil || st != keep.Rejected {
		t.Fatalf("status of the evicted role: %v, %v; want rejected", st, err)
	}
}

// Tombstones recalled and forgotten again over and over keep their names
// through the compactions that follow, and their buffer stays within
// twice what the live names take.
func TestTombstonesCompact(t *testing.T) {
	const limit = 100
	var ts tombstones
	name := func(i uint32) string { return fmt.Sprint("remote-", i) }
	for i := range uint32(limit) {
		ts.add(i, name(i), limit)
	}
	live := len(ts.names)
	for range 200 {
		for i := uint32(0); i < limit; i += 2 {
			got, ok := ts.take(i)
			if !ok || got != name(i) {
				t.Fatalf("take %d: %q, %v", i, got, ok)
			}
			ts.add(i, got, limit)
		}
	}
	if ts.len() != limit || len(ts.names) > 2*live+minCompact || len(ts.order) > 2*limit {
		t.Fatalf("%d tombstones in %d bytes of names (%d live), order of %d", ts.len(), len(ts.names), live, len(ts.order))
	}
	for i := range uint32(limit) {
		if got, ok := ts.take(i); !ok || got != name(i) {
			t.Fatalf("take %d after the compactions: %q, %v", i, got, ok)
		}
	}
	if ts.len() != 0 {
		t.Fatalf("%d tombstones left after taking all", ts.len())
	}
}
