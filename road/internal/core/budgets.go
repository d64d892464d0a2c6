package core

import (
	"net/netip"
	"time"
)

// The budgets that keep floods cheap (see docs/security.md): token
// buckets for replies, joins and log lines.

// bucket is a token bucket: rate tokens a second, up to burst. It is 16
// bytes: every remote has two.
type bucket struct {
	tokens float32
	at     int64 // unix ns of the last take; 0: never
}

func (b *bucket) take(now time.Time, rate, burst float64) bool {
	t := now.UnixNano()
	if b.at == 0 {
		b.tokens = float32(burst)
	} else if d := time.Duration(t - b.at).Seconds(); d > 0 {
		b.tokens = float32(min(burst, float64(b.tokens)+d*rate))
	}
	b.at = t
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Budgets. Replies to packets that belong to no live transaction (stale
// nacks, repeated dones and acks, renews) are limited per remote, so that
// replayed packets cannot make us sign and send at their rate (a packet
// sealed with the session's AEAD coat is never a replay: sealedFresh). Join
// requests from strangers (a name not known at that address) are limited
// per source address and in all (Config.StrangerJoinRate), and the
// strangers' joins under way (accepted, not yet acknowledged) are bounded
// (Config.StrangerJoins), as are their keep writes (keepBusy): they are
// unauthenticated and write the keep, so a flood of them, even from
// spoofed addresses, cannot take the owner from known peers, whose joins
// are limited per remote. The bounds on work under way let honest
// strangers join as fast as the main completes their joins.
const (
	replyRate, replyBurst   = 100, 64
	joinRate, joinBurst     = 10, 20 // per known remote
	sourceRate, sourceBurst = 2, 5   // one stranger address
	maxSources              = 4096   // stranger addresses with a bucket
	maxPendingStrangers     = 64     // strangers whose keys wait for an operator
)

// limits holds the stack-wide budgets.
type limits struct {
	strangers bucket
	sources   map[netip.Addr]bucket
	sweepAt   int    // sweep sources when it has this many
	renews    bucket // renews and other replies to no known remote
}

// minSweep is the fewest sources swept at once.
const minSweep = 64

// stranger reports whether a join request from a stranger at from may be
// handled now, rate a second for all strangers (bursts of as many).
func (l *limits) stranger(now time.Time, from netip.Addr, rate float64) bool {
	if len(l.sources) >= l.sweepAt {
		l.sweep(now)
	}
	b := l.sources[from]
	ok := b.take(now, sourceRate, sourceBurst)
	l.sources[from] = b
	return ok && l.strangers.take(now, rate, rate)
}

// sweep forgets the sources whose buckets have refilled (a full bucket is
// no bucket: a main that thousands joined keeps none of theirs), in a new
// table so that the memory goes too. Spoofed sources that fill the table
// even so make it start afresh: the stack-wide budget still holds.
func (l *limits) sweep(now time.Time) {
	t := now.UnixNano()
	kept := make(map[netip.Addr]bucket)
	for a, b := range l.sources {
		if float64(b.tokens)+time.Duration(t-b.at).Seconds()*sourceRate < sourceBurst {
			kept[a] = b
		}
	}
	if len(kept) >= maxSources {
		clear(kept)
	}
	l.sources = kept
	l.sweepAt = min(max(minSweep, 2*len(kept)), maxSources)
}

// logBudget bounds log lines to joinLogRate a second (bursts of
// joinLogBurst), so a flood of joins cannot flood the log; the next line
// logged says how many were left out.
type logBudget struct {
	tokens     float64
	at         time.Time
	suppressed int
}

const (
	joinLogRate  = 10
	joinLogBurst = 50
)

// take reports whether a line may be logged now, and how many were left
// out before it.
func (b *logBudget) take(now time.Time) (suppressed int, ok bool) {
	if b.at.IsZero() {
		b.tokens = joinLogBurst
	} else {
		b.tokens = min(joinLogBurst, b.tokens+now.Sub(b.at).Seconds()*joinLogRate)
	}
	b.at = now
	if b.tokens < 1 {
		b.suppressed++
		return 0, false
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return suppressed, true
}
