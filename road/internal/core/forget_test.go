package core

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
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
		case op < 4 || len(c.roster.remotes) == 0:
			oldest := c.roster.silence.head
			n := len(c.roster.remotes)
			addKeyed(c, i, 1)
			if n == c.cfg.MaxRemotes && c.roster.remotes[oldest.nuid] == oldest {
				t.Fatalf("op %d: over the cap, the longest silent %d stays", i, oldest.nuid)
			}
		case op < 8:
			for _, r := range c.roster.remotes {
				c.heard(r)
				break
			}
		case op < 9:
			for _, r := range c.roster.remotes {
				c.removeRemote(r, ErrForgotten)
				break
			}
		default:
			for _, r := range c.roster.remotes {
				c.forget(r, ReasonSilent)
				break
			}
		}
		var order []*remote
		for r := c.roster.silence.head; r != nil && len(order) <= len(c.roster.remotes); r = r.heardLinks.next {
			order = append(order, r)
		}
		if len(order) != len(c.roster.remotes) || len(c.roster.remotes) > c.cfg.MaxRemotes {
			t.Fatalf("op %d: %d in the list, %d remotes", i, len(order), len(c.roster.remotes))
		}
		if !slices.IsSortedFunc(order, func(a, b *remote) int { return a.heard.Compare(b.heard) }) {
			t.Fatalf("op %d: the list is not by last heard", i)
		}
		for j, r := range order {
			if c.roster.remotes[r.nuid] != r || (j > 0 && r.heardLinks.prev != order[j-1]) {
				t.Fatalf("op %d: list entry %d is not a held remote or is mislinked", i, j)
			}
		}
		if len(order) > 0 && c.roster.silence.tail != order[len(order)-1] {
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
	r := c.roster.byName["other"]
	rec := c.kept.roles[r.role].rec
	rec.Acceptance = keep.Rejected
	if _, err := c.store.write(&keepWrite{op: opSaveRole, role: rec}); err != nil {
		t.Fatal(err)
	}
	c.evictRole(r.role)
	if c.kept.roles[r.role] != nil {
		t.Fatal("the record stayed in the table")
	}
	st, err := c.statusRole(keep.AutoOnce, r.role, r.verify, r.pub, netip.AddrPort{})
	if err != nil || st != keep.Rejected {
		t.Fatalf("status of the evicted role: %v, %v; want rejected", st, err)
	}
}

// countingStore counts the reads of its uid index.
type countingStore struct {
	Store
	loads int
}

func (s *countingStore) loadRemoteUID(uid uint32) (keep.RemoteEstate, error) {
	s.loads++
	return s.Store.loadRemoteUID(uid)
}

// forgetOther cuts the pair's network until main forgot other (reaped at
// Interim, forgotten ForgetAfter later) and returns the uid main knew it
// by.
func (p *pair) forgetOther(t *testing.T) uint32 {
	t.Helper()
	uid := p.main.roster.byName["other"].nuid
	p.cut = func(wired) bool { return true }
	p.advance(5 * time.Second)
	p.main.Deadline()
	if len(p.main.roster.remotes) != 0 {
		t.Fatalf("main still holds %d remotes", len(p.main.roster.remotes))
	}
	return uid
}

// forgetting shortens a pair's presence so that main forgets a silent
// other within 5 s.
func forgetting(m, o *estate) {
	m.AlivePeriod, m.AliveTimeout, m.Interim, m.ForgetAfter = 100*time.Millisecond, 300*time.Millisecond, time.Second, 2*time.Second
	o.AlivePeriod = 100 * time.Millisecond
}

// A main restarted on a keep whose uid index lost its entries (a crash, or
// a keep the reference wrote: it writes none) mends the index from the
// estate files as it loads them: a remote forgotten as it loads (beyond
// MaxRemotes), whose estate the start does not write again, is found by
// its uid when it comes back, joins and allows again, and messages flow.
func TestRecallAfterReindex(t *testing.T) {
	dir := t.TempDir()
	var mcfg estate
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		forgetting(m, o)
		m.KeepDir = dir
		mcfg = *m
	})
	p.join()
	uid := p.mainRemote().nuid
	// A second kept remote, as the reference writes it: its files, no
	// index entry. Loaded after other (by name), it makes main forget
	// other at once under MaxRemotes 1.
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = errors.Join(k.SaveRemoteRole(keep.RemoteRole{Role: "zed", Acceptance: keep.Accepted, Verify: keys.VerifyKey{1}, Public: keys.PublicKey{2}}),
		k.SaveRemote(keep.RemoteEstate{Name: "zed", UID: uid + 1, HA: keep.HostPort{Host: "127.0.0.9", Port: 7531}, Joined: new(true), Role: "zed"}))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := filepath.Glob(filepath.Join(dir, "uid", "*"))
	if err != nil || len(entries) != 2 {
		t.Fatalf("the keep's uid index holds %v (%v), want 2 entries", entries, err)
	}
	for _, e := range entries {
		if err := os.Remove(e); err != nil {
			t.Fatal(err)
		}
	}
	mcfg.MaxRemotes = 1
	p.cut = func(wired) bool { return true }
	p.restart(p.main, &mcfg)
	if len(p.main.roster.remotes) != 1 || p.main.roster.byName["zed"] == nil {
		t.Fatalf("the restarted main holds %d remotes, want zed only", len(p.main.roster.remotes))
	}
	before := len(p.events[p.other])
	p.cut = nil
	p.advance(5 * time.Second)
	if r := p.mainRemote(); r == nil || r.nuid != uid || !r.allowed || !p.otherRemote().allowed {
		t.Fatalf("not recalled and allowed again (uid %d); other's events %v", uid, p.kinds(p.other, before))
	}
	if err := p.send(p.other, map[string]any{"back": 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.send(p.main, map[string]any{"welcome": 1}); err != nil {
		t.Fatal(err)
	}
}
