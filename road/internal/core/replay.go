package core

import (
	"hash/maphash"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Replay protection and the budgets that keep floods cheap (see
// docs/security.md).

// replayIDs is how many transaction ids before the newest one a session's
// replay window remembers: 8192 bits, 1 KiB per remote. A remote that starts
// more than that many transactions while one of its messages is still
// unfinished has that message refused as too old.
const (
	replayWords = 128
	replayIDs   = replayWords * 64
)

// replayWindow records the transaction ids a remote used in its current
// session (rsid): every transaction it started and we finished, whatever its
// kind. It lives as long as the session, so a captured packet replayed at
// any time in that session finds its id used; a new session (a newer rsid,
// only after an authenticated packet) starts a new window, and the older
// session's packets are refused by their si. The ids are a counter per
// remote (§8.1), so a sliding window of bits behind the newest id is
// enough: ids older than the window are refused, which costs nothing to
// remember. The memory is fixed whatever the traffic.
type replayWindow struct {
	top  uint32 // the newest id marked, when any
	any  bool
	bits [replayWords]uint64 // bit ti%replayIDs, for ids in (top-replayIDs, top]
}

// replayState is what a window says of a transaction id.
type replayState uint8

const (
	replayFresh  replayState = iota // never finished in this session
	replayUsed                      // finished in this session
	replayTooOld                    // behind the window: refused unseen
)

func (w *replayWindow) state(ti uint32) replayState {
	if !w.any {
		return replayFresh
	}
	if d := ti - w.top; d != 0 && d < 1<<31 {
		return replayFresh // newer than anything marked
	}
	if w.top-ti >= replayIDs {
		return replayTooOld
	}
	if w.bits[ti/64%replayWords]&(1<<(ti%64)) != 0 {
		return replayUsed
	}
	return replayFresh
}

// mark records ti as used; an id behind the window is already refused.
func (w *replayWindow) mark(ti uint32) {
	switch {
	case !w.any:
		w.any, w.top = true, ti
		clear(w.bits[:])
	case ti-w.top != 0 && ti-w.top < 1<<31:
		// Slide: forget the ids the window no longer covers.
		if gap := ti - w.top; gap >= replayIDs {
			clear(w.bits[:])
		} else {
			for id := w.top + 1; id != ti; id++ {
				w.bits[id/64%replayWords] &^= 1 << (id % 64)
			}
		}
		w.top = ti
	case w.top-ti >= replayIDs:
		return
	}
	w.bits[ti/64%replayWords] |= 1 << (ti % 64)
}

func (w *replayWindow) reset() { w.any, w.top = false, 0 }

// bucket is a token bucket: rate tokens a second, up to burst.
type bucket struct {
	tokens float64
	at     time.Time
}

func (b *bucket) take(now time.Time, rate, burst float64) bool {
	if b.at.IsZero() {
		b.tokens = burst
	} else if d := now.Sub(b.at).Seconds(); d > 0 {
		b.tokens = min(burst, b.tokens+d*rate)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Budgets. Replies to packets that belong to no live transaction (stale
// nacks, repeated dones and acks, renews) are limited per remote, so that
// replayed packets cannot make us sign and send at their rate. Join
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
	sources   map[netip.Addr]*bucket
	renews    bucket // renews and other replies to no known remote
}

// stranger reports whether a join request from a stranger at from may be
// handled now, rate a second for all strangers (bursts of as many).
func (l *limits) stranger(now time.Time, from netip.Addr, rate float64) bool {
	if l.sources == nil || len(l.sources) >= maxSources {
		// Spoofed sources fill any table: start it afresh; the stack-wide
		// budget still holds.
		l.sources = make(map[netip.Addr]*bucket)
	}
	b := l.sources[from]
	if b == nil {
		b = &bucket{}
		l.sources[from] = b
	}
	return b.take(now, sourceRate, sourceBurst) && l.strangers.take(now, rate, rate)
}

// FootChecker parses received datagrams and checks their Ed25519 feet for
// one reader goroutine, with the key table the owner publishes (KeyTable).
// It remembers the feet it checked: a datagram seen before (a retransmission, a replay, a flood
// of one captured packet) gets the same answer without a second
// verification, and a signature seen valid on other bytes fails at once,
// since an Ed25519 signature is deterministic: one key signs one message
// one way. Its memory is bounded (maxSeenFeet).
type FootChecker struct {
	seed maphash.Seed
	seen map[[packet.NaClFootSize]byte]seenFoot
	foot *packet.NaClFoot
	key  *[32]byte      // the key foot's resolver gives: the packet's being checked
	n    *atomic.Uint64 // counts the verifications
}

type seenFoot struct {
	sum uint64    // of the signed bytes
	key *[32]byte // checked with (an entry of the key table)
	ok  bool
}

const maxSeenFeet = 2048

// NewFootChecker makes a checker that counts its verifications in n.
func NewFootChecker(n *atomic.Uint64) *FootChecker {
	f := &FootChecker{seed: maphash.MakeSeed(), seen: make(map[[packet.NaClFootSize]byte]seenFoot), n: n}
	f.foot = packet.NewNaClFoot(nil, func(uint32) (*[32]byte, bool) { return f.key, f.key != nil })
	return f
}

// Parse parses datagram b from `from` into in and, when it has an Ed25519
// foot, checks it with the key table gives for its de; when it has an
// AEAD coat of the session table gives, opens it in b's buffer
// (packet.OpenAEADInBuffer). in keeps pointers into b until Receive has
// taken it.
func (f *FootChecker) Parse(in *Inbound, b []byte, from netip.AddrPort, table *KeyTable) {
	*in = Inbound{}
	in.pkt.from = from
	in.parseErr = packet.Parse(b, &in.pkt.Packet)
	if in.parseErr != nil {
		return
	}
	h := &in.pkt.Head
	switch {
	case h.FootKind == codec.FootKindNaCl:
		in.foot = f.check(&in.pkt.Packet, table)
	case h.FootKind == codec.FootKindNada && packet.IsAEAD(h.CoatKind):
		if k := table.lookup(h.DestinationID); k != nil && k.aead != nil && k.aead.Kind() == h.CoatKind {
			in.aead.coat = k.aead
			in.aead.plain, in.aead.err = in.pkt.OpenAEADInBuffer(k.aead)
		}
	}
}

// check checks p's Ed25519 foot (p.Foot is NaClFootSize bytes: Parse saw
// to it) with the key table gives for its de.
func (f *FootChecker) check(p *packet.Packet, table *KeyTable) footCheck {
	k := table.lookup(p.Head.DestinationID)
	if k == nil || k.verify == ([32]byte{}) {
		return footCheck{}
	}
	key := &k.verify
	sig := [packet.NaClFootSize]byte(p.Foot)
	sum := maphash.Bytes(f.seed, p.Raw[:len(p.Raw)-len(p.Foot)])
	if s, ok := f.seen[sig]; ok && s.key == key {
		switch {
		case s.sum == sum:
			return footCheck{key: key, ok: s.ok}
		case s.ok:
			return footCheck{key: key} // a valid signature on other bytes
		}
	}
	f.key = key
	f.n.Add(1)
	ok := p.Verify(f.foot) == nil
	if len(f.seen) >= maxSeenFeet {
		clear(f.seen)
	}
	f.seen[sig] = seenFoot{sum: sum, key: key, ok: ok}
	return footCheck{key: key, ok: ok}
}
