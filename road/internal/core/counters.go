package core

import (
	"time"

	"github.com/raet-go/raet/codec"
)

// The counters the owner goroutine keeps (Counters).

// stats are the counters the owner goroutine updates. Packets are counted
// in arrays by kind (no map or string per packet) and turned into the
// Counters maps by snapshot.
type stats struct {
	c               Counters // but Drops
	pktIn, pktOut   kindCounts
	byteIn, byteOut kindCounts // the same packets' lengths
	drops           [numDropReasons]uint64
	events          [len(eventNames)][reasonCount]uint64
}

// kindCounts counts packets by transaction and packet kind; kinds beyond
// the arrays (not sent by any known peer) share the last slot of each.
type kindCounts [codec.TransactionKindAlive + 2][codec.PacketKindAnswers + 2]uint64

func (k *kindCounts) add(h *codec.Head, n uint64) {
	t, p := min(int(h.TransactionKind), len(k)-1), min(int(h.PacketKind), len(k[0])-1)
	k[t][p] += n
}

// fill adds the non-zero counts to m, by "transaction/packet" kind.
func (k *kindCounts) fill(m map[string]uint64) {
	for t := range k {
		for p, n := range k[t] {
			if n == 0 {
				continue
			}
			tk, pk := codec.TransactionKind(t), codec.PacketKind(p)
			if t == len(k)-1 {
				tk = codec.TransactionKindUnknown
			}
			if p == len(k[t])-1 {
				pk = codec.PacketKindUnknown
			}
			m[tk.String()+"/"+pk.String()] += n
		}
	}
}

func newStats() stats {
	return stats{}
}

func (s *stats) in(h *codec.Head, n int) { s.pktIn.add(h, 1); s.byteIn.add(h, uint64(n)) }

func (s *stats) out(h *codec.Head, n int) { s.pktOut.add(h, 1); s.byteOut.add(h, uint64(n)) }

func (s *stats) event(k EventKind, why Reason) {
	if int(k) < len(s.events) && why < reasonCount {
		s.events[k][why]++
	}
}

func (s *stats) drop(r dropReason) { s.drops[r]++ }

func (s *stats) retransmit() { s.c.Retransmits++ }

func (s *stats) rtt(d time.Duration) {
	r := &s.c.RTT
	if r.Count == 0 || d < r.Min {
		r.Min = d
	}
	r.Max = max(r.Max, d)
	r.Avg = time.Duration((int64(r.Avg)*int64(r.Count) + int64(d)) / int64(r.Count+1))
	r.Count++
}

// snapshot copies the counters for another goroutine.
func (s *stats) snapshot() Counters {
	out := s.c
	out.PacketsIn, out.PacketsOut = map[string]uint64{}, map[string]uint64{}
	s.pktIn.fill(out.PacketsIn)
	s.pktOut.fill(out.PacketsOut)
	out.BytesIn, out.BytesOut = map[string]uint64{}, map[string]uint64{}
	s.byteIn.fill(out.BytesIn)
	s.byteOut.fill(out.BytesOut)
	out.Events = map[string]uint64{}
	for k := range s.events {
		for why, n := range s.events[k] {
			if n == 0 {
				continue
			}
			name := EventKind(k).String()
			if why != int(ReasonNone) {
				name += "/" + Reason(why).String()
			}
			out.Events[name] = n
		}
	}
	out.Drops = map[string]uint64{}
	for r, n := range s.drops {
		if n > 0 {
			out.Drops[dropReason(r).String()] = n
		}
	}
	return out
}
