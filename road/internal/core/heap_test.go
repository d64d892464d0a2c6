package core

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
)

// fleet is a main core with n remotes whose sessions are established: each
// joined, allowed and sent messages both ways (with message ids where the
// profile has them), then its own core was dropped, so that what the heap
// holds is the main's (perRemote then lets them go idle). The remotes join one after another through the pair
// rig on its fake clock.
func fleet(tb testing.TB, n int, prof Profile, aead AEADMode) *pair {
	tb.Helper()
	p := newRig(tb)
	p.main = p.newCore(&estate{Config: Config{Name: "main", Main: true, AlivePeriod: -1, Profile: prof, AEAD: aead},
		Auto: keep.AutoAlways}, nil)
	p.main.Start(p.mainAddr, p.now)
	body := map[string]any{"cmd": "ping", "n": 1}
	for i := range n {
		p.otherAddr = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 7531)
		p.other = p.newCore(&estate{Config: Config{Name: fmt.Sprint("other", i), AlivePeriod: -1, Profile: prof, AEAD: aead},
			Auto: keep.AutoAlways}, nil)
		p.other.Start(p.otherAddr, p.now)
		p.advance(time.Second / DefaultStrangerJoinRate) // within the strangers' join budget
		p.join()
		for k := range 2 {
			id := MsgID{Stream: uint64(i) + 1, Seq: uint64(k) + 1, Floor: 1}
			p.sendID(p.other, body, id)
			p.sendID(p.main, body, id)
		}
		delete(p.feet, p.other)
		delete(p.delivered, p.other)
		delete(p.events, p.other)
		p.other = nil
		p.wire = p.wire[:0]
		p.delivered[p.main] = p.delivered[p.main][:0]
		p.events[p.main] = p.events[p.main][:0]
	}
	return p
}

// sendID has from send body with id to its peer, and fails the test
// unless the peer said done.
func (p *pair) sendID(from *Core, body map[string]any, id MsgID) {
	p.tb.Helper()
	res := p.start(from, body, id)
	p.pump()
	if err := <-res; err != nil {
		p.tb.Fatalf("send from %s: %v", from.local.name, err)
	}
}

// heapNow is the heap in use after a full collection: the least of a few
// readings, so that a collector's leftovers do not count.
func heapNow() uint64 {
	least := ^uint64(0)
	for range 3 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		least = min(least, ms.HeapAlloc)
	}
	return least
}

// perRemote is the main core's heap per remote of a fleet of n, in bytes:
// the heap with the fleet less the heap before it, without the memory
// store's records (a main keeps those on disk).
func perRemote(tb testing.TB, n int, prof Profile, aead AEADMode) float64 {
	tb.Helper()
	before := heapNow()
	p := fleet(tb, n, prof, aead)
	// The remotes are idle (their cores are gone): the main's timers run
	// for aeadIdle, and their AEAD cipher states go.
	end := p.now.Add(aeadIdle)
	for range n + 1 {
		d := p.main.Deadline()
		if d.IsZero() || d.After(end) {
			break
		}
		p.main.Tick(d)
	}
	p.now = end
	for _, r := range p.main.roster.remotes {
		if r.prof != nil && r.prof.aeadCheck != 0 {
			tb.Fatalf("%s still holds its AEAD cipher states, idle for %v", r.name, aeadIdle)
		}
	}
	st := p.main.store.(*memStore)
	st.remotes, st.roles = map[string]keep.RemoteEstate{}, map[string]keep.RemoteRole{}
	p.feet, p.air = nil, nil // the key table a stack's readers share stays
	after := heapNow()
	if got := len(p.main.roster.remotes); got != n {
		tb.Fatalf("main has %d remotes, want %d", got, n)
	}
	heldFleet = p
	return (float64(after) - float64(before)) / float64(n)
}

// heldFleet keeps the last fleet measured alive, so that -memprofile (written
// after the benchmarks) shows where its heap goes.
var heldFleet *pair

// BenchmarkRemoteHeap reports the main core's heap per established remote
// (run with -benchtime=1x; -memprofile shows where it goes), idle: the
// fast profile's AEAD coats have dropped their cipher states.
func BenchmarkRemoteHeap(b *testing.B) {
	for _, c := range fleetKinds {
		for _, n := range []int{1000, 10000} {
			b.Run(fmt.Sprintf("%s/n=%d", c.name, n), func(b *testing.B) {
				var per float64
				for range b.N {
					per = perRemote(b, n, c.prof, c.aead)
				}
				b.ReportMetric(per, "B/remote")
			})
		}
	}
}

// fleetKinds are the sessions measured: the fast profile with its default
// AEAD coat and with the NaCl coat, and the reference profile.
var fleetKinds = []struct {
	name string
	prof Profile
	aead AEADMode
}{{"fast", ProfileAuto, AEADPrefer}, {"fast-nacl", ProfileAuto, AEADRefuse}, {"reference", ProfileReference, AEADPrefer}}
