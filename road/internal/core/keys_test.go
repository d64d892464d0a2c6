package core

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
)

// bareCore is a main core with no remotes, for the tests that add remotes
// by hand.
func bareCore(tb testing.TB) *Core {
	p := newRig(tb)
	return p.newCore(&estate{Config: Config{Name: "main", Main: true, AlivePeriod: -1}, Auto: keep.AutoAlways}, nil)
}

// addKeyed adds a remote with verify key v (i in its address).
func addKeyed(c *Core, i int, v byte) *remote {
	r := c.newRemote(netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 1, byte(i >> 8), byte(i)}), 7531), 0, 0)
	r.verify = keys.VerifyKey{v, byte(i), byte(i >> 8), 1}
	c.addRemote(r)
	return r
}

// After every event the readers' table says exactly the remotes' keys:
// added ones appear, changed ones change (as a new entry), removed and
// forgotten ones are gone, and an entry whose keys did not change stays
// the same entry (the readers' memory of checked feet holds).
func TestKeyTableFollowsRemotes(t *testing.T) {
	c := bareCore(t)
	rng := rand.New(rand.NewPCG(3, 4))
	var live []*remote
	gone := map[uint32]bool{}
	for ev := range 3000 {
		before := map[uint32]*peerKeys{}
		for _, r := range live {
			before[r.nuid] = c.readers.table.lookup(r.nuid)
		}
		changed := map[uint32]bool{}
		for range 1 + rng.IntN(3) {
			switch op := rng.IntN(10); {
			case op < 5 || len(live) == 0:
				r := addKeyed(c, ev, 1)
				live = append(live, r)
				delete(gone, r.nuid)
			case op < 7:
				r := live[rng.IntN(len(live))]
				r.verify[0]++
				c.markKeys(r)
				changed[r.nuid] = true
			default:
				i := rng.IntN(len(live))
				r := live[i]
				live = append(live[:i], live[i+1:]...)
				gone[r.nuid] = true
				if op == 8 {
					c.removeRemote(r, ErrForgotten)
				} else {
					c.forget(r, ReasonTooMany)
				}
			}
		}
		c.PublishKeys()
		for _, r := range live {
			k := c.readers.table.lookup(r.nuid)
			if k == nil || k.verify != [32]byte(r.verify) {
				t.Fatalf("event %d: remote %d: table has %v, want its key", ev, r.nuid, k)
			}
			if b := before[r.nuid]; b != nil && !changed[r.nuid] && b != k {
				t.Fatalf("event %d: remote %d: unchanged keys got a new entry", ev, r.nuid)
			}
		}
		for uid := range gone {
			if c.readers.table.lookup(uid) != nil {
				t.Fatalf("event %d: removed remote %d still in the readers' table", ev, uid)
			}
		}
	}
	if len(c.readers.dirty) != 0 || c.readers.all {
		t.Fatal("marks left after publishing")
	}
}

// A core nobody publishes for holds a bounded list of marks; the next
// PublishKeys then rebuilds the table whole.
func TestKeyTableMarksBounded(t *testing.T) {
	c := bareCore(t)
	c.PublishKeys()
	r := addKeyed(c, 1, 1)
	for range 10 * keyShards {
		c.markKeys(r)
	}
	if len(c.readers.dirty) > len(c.roster.remotes)+keyShards || !c.readers.all {
		t.Fatalf("%d marks held, all %v", len(c.readers.dirty), c.readers.all)
	}
	c.PublishKeys()
	if k := c.readers.table.lookup(r.nuid); k == nil || k.verify != [32]byte(r.verify) {
		t.Fatal("the rebuild lost a key")
	}
}

// Readers look keys up while the owner publishes (go test -race): each
// lookup finds a whole entry, the remote's old keys or its new ones.
func TestKeyTableConcurrentReaders(t *testing.T) {
	c := bareCore(t)
	var rs []*remote
	for i := range 64 {
		rs = append(rs, addKeyed(c, i, 1))
	}
	c.PublishKeys()
	table := c.KeyTable()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad error
	var once sync.Once
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for j, r := range rs[:32] { // never removed
					k := table.lookup(r.nuid)
					if k == nil || k.verify[1] != byte(j) || k.verify[3] != 1 {
						once.Do(func() { bad = fmt.Errorf("remote %d: entry %v", r.nuid, k) })
					}
				}
			}
		})
	}
	for i := range 2000 {
		r := rs[i%32]
		c.roster.remotes[r.nuid].verify[0]++ // only the owner reads r: readers see entries
		c.markKeys(r)
		if o := rs[32+i%32]; i%7 == 0 && c.roster.remotes[o.nuid] == o {
			c.forget(o, ReasonTooMany)
		}
		c.PublishKeys()
	}
	close(stop)
	wg.Wait()
	if bad != nil {
		t.Fatal(bad)
	}
}

// BenchmarkKeysJoins adds 10000 remotes one per event, publishing the key
// table after each as the owner does: incremental is PublishKeys, rebuild
// the full table every event (what the owner did before keys.go).
func BenchmarkKeysJoins(b *testing.B) {
	const n = 10_000
	for _, full := range []bool{true, false} {
		name := map[bool]string{true: "rebuild", false: "incremental"}[full]
		b.Run(fmt.Sprintf("%s/N=%d", name, n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				c := bareCore(b)
				b.StartTimer()
				for i := range n {
					addKeyed(c, i, 1)
					c.readers.all = c.readers.all || full
					c.PublishKeys()
				}
			}
		})
	}
}

// A reader checks a datagram with the key table with no allocation: the
// lookup is an atomic load and a map read (each datagram new: an Ed25519
// foot verified, an AEAD coat opened in the datagram's buffer).
func TestKeyTableParseAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under -race")
	}
	const runs = 50
	for _, tp := range []testProfile{refProfile, aeadProfile} {
		p := joinedPair(t, tp)
		for i := range 300 { // a table of many shards, the pair's remote among them
			addKeyed(p.main, i, 2)
		}
		p.main.PublishKeys()
		bufs := make([][]byte, runs+1)
		for i := range bufs {
			msg, _ := p.sendCaptured(t, map[string]any{"n": i})
			bufs[i] = append(make([]byte, 0, 2*len(msg)+64), msg...)
		}
		f := NewFootChecker(new(atomic.Uint64))
		var in Inbound
		n := 0
		allocs := testing.AllocsPerRun(runs, func() {
			f.Parse(&in, bufs[n], p.otherAddr, p.main.KeyTable())
			n++
		})
		if in.parseErr != nil || !in.foot.ok && (in.aead.coat == nil || in.aead.err != nil) {
			t.Fatalf("%s: not checked with the table: %v %v", tp.name, in.parseErr, in.aead.err)
		}
		if allocs != 0 {
			t.Fatalf("%s: %.1f allocations per datagram checked, want 0", tp.name, allocs)
		}
	}
}
