package core

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
)

// redo is a transaction's retry timer: each expiry doubles its duration
// from min up to max (§8.1), and every transmission restarts it.
type redo struct {
	min, max time.Duration
	cur      time.Duration
	at       time.Time
}

func newRedo(min, max time.Duration) redo { return redo{min: min, max: max, cur: min} }

// restart arms the timer for its current duration from now.
func (r *redo) restart(now time.Time) { r.at = now.Add(r.cur) }

// backoff doubles the duration within [min, max] and re-arms it.
func (r *redo) backoff(now time.Time) {
	r.cur = min(max(r.min, 2*r.cur), r.max)
	r.restart(now)
}

// rebase takes the bounds of fresh, a timer made now, when they are
// shorter (the estimate came down since r was made), its current duration
// within them.
func (r *redo) rebase(fresh redo) {
	if fresh.min < r.min {
		r.min, r.max, r.cur = fresh.min, fresh.max, min(r.cur, fresh.max)
	}
}

func (r *redo) due(now time.Time) bool { return !r.at.IsZero() && !now.Before(r.at) }

// expiry is a transaction timeout; zero means none.
type expiry time.Time

func after(now time.Time, d time.Duration) expiry {
	if d <= 0 {
		return expiry{}
	}
	return expiry(now.Add(d))
}

func (e expiry) due(now time.Time) bool { t := time.Time(e); return !t.IsZero() && !now.Before(t) }

// earliest returns the earliest non-zero time.
func earliest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

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

func (s *stats) in(h *codec.Head, n int)  { s.pktIn.add(h, 1); s.byteIn.add(h, uint64(n)) }
func (s *stats) out(h *codec.Head, n int) { s.pktOut.add(h, 1); s.byteOut.add(h, uint64(n)) }
func (s *stats) event(k EventKind, why Reason) {
	if int(k) < len(s.events) && why < reasonCount {
		s.events[k][why]++
	}
}
func (s *stats) drop(r dropReason) { s.drops[r]++ }
func (s *stats) retransmit()       { s.c.Retransmits++ }
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

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("raet: crypto/rand: %v", err)) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// parseHostPort turns a kept address into an AddrPort; the reference keeps
// an empty or 0.0.0.0 host as 127.0.0.1 and :: as ::1 (§9.1).
func parseHostPort(h keep.HostPort) (netip.AddrPort, error) {
	host := h.Host
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("host %q: %w", h.Host, err)
	}
	return netip.AddrPortFrom(a.Unmap(), h.Port), nil
}
