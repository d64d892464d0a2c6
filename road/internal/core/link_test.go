package core

import (
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/netsim"
)

// link impairs a pair's network on the fake clock, as netsim does
// on the wall clock: each direction draws its datagrams' fates (loss,
// duplication, reordering, delay and jitter) from its own seeded stream.
type link struct {
	ways  map[netip.AddrPort]*netsim.Fates // by sender
	delay []time.Duration
	// inOrder holds each copy back behind the one its direction sent
	// before it (jitter without reordering, as a path with one queue);
	// last is each direction's latest arrival.
	inOrder bool
	last    map[netip.AddrPort]time.Time
}

// impair puts the pair behind a link with imp both ways (seeds apart).
func (p *pair) impair(tb testing.TB, imp netsim.Impairment) *link {
	tb.Helper()
	l := &link{ways: map[netip.AddrPort]*netsim.Fates{}, last: map[netip.AddrPort]time.Time{}}
	for i, a := range []netip.AddrPort{p.mainAddr, p.otherAddr} {
		way := imp
		way.Seed += uint64(i) * 0x9e3779b97f4a7c15
		f, err := netsim.NewFates(way)
		if err != nil {
			tb.Fatal(err)
		}
		l.ways[a] = f
	}
	p.link = l
	return l
}

// pass returns the copies of f that arrive, each with its due time.
func (l *link) pass(f flight) []flight {
	fates := l.ways[f.from]
	if fates == nil {
		return []flight{f}
	}
	l.delay = fates.Next(l.delay[:0])
	out := make([]flight, 0, len(l.delay))
	for _, d := range l.delay {
		g := f
		g.due = f.due.Add(d)
		if l.inOrder {
			if last := l.last[f.from]; g.due.Before(last) {
				g.due = last
			}
			l.last[f.from] = g.due
		}
		out = append(out, g)
	}
	return out
}

// stats sums both directions.
func (l *link) stats() netsim.LinkStats {
	var s netsim.LinkStats
	for _, f := range l.ways {
		w := f.Stats()
		s.Received += w.Received
		s.Dropped += w.Dropped
		s.Duplicated += w.Duplicated
		s.Reordered += w.Reordered
	}
	return s
}
