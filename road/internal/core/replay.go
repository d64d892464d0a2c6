package core

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Replay protection and the budgets that keep floods cheap (see
// docs/security.md).

// The replay window of a session remembers, for every transaction id
// since the session began, whether the remote used it, up to
// replayMaxWords words of 64 ids behind the newest (8,192 ids: 1 KiB of
// bits and 256 bytes of ages).
// It starts at one word and grows only while a remote's traffic needs the
// room (see replayWindow.slide); a window refuses whatever it does not
// remember, so its size never lets a replay in.
const (
	replayMaxWords = 128
	replayIDs      = replayMaxWords * 64
	replayWordMask = 1<<26 - 1 // word numbers (ti/64) wrap with the ids
)

// replayWindow records the transaction ids a remote used in its current
// session (rsid): every transaction it started and we finished, whatever its
// kind. It lives as long as the session, so a captured packet replayed at
// any time in that session finds its id used; a new session (a newer rsid,
// only after an authenticated packet) starts a new window, and the older
// session's packets are refused by their si. The ids are a counter per
// remote (§8.1), so a sliding window of bits behind the newest id is
// enough: ids older than the window are refused (too old), which costs
// nothing to remember.
//
// The window covers the span words up to the newest id's word, in a ring
// of a power of two words (word w, ids 64w..64w+63, at w % len(bits)).
// Sliding up, it drops its oldest words, unless one of them entered the
// window less than the hold ago (the longest an honest remote may still
// send a packet of a transaction: its first, or one sent again because
// our answer was lost): then the ring doubles, up to replayMaxWords, so
// that a late first packet finds its id fresh and a late repeat finds it
// used (answered done, not nacked as too old: its message was delivered).
// Older words are given up: their ids become too old. The ring halves
// again once its older half holds no word that young. A remote that uses
// fewer than 64 ids a hold keeps one word; a busy one at most
// replayMaxWords.
//
// Until it gives up a word, the window holds every id marked in the
// session, so an id below its oldest word was never used: it is fresh, and
// marking it stretches the window down to it (within replayMaxWords of the
// top). The first id a session shows us need not be its lowest: the
// messages held for the allow go out at once, and the readers may reorder
// them across a word's edge; only a window that gave up words (gave)
// refuses what lies below it.
//
// A finished id is either delivered or refused (we answered nack, or the
// remote gave it up): a repeat of a refused message is refused again, never
// answered done, since its sender would take done for delivered. The
// refusals are a second ring beside bits, made on the first refusal.
type replayWindow struct {
	top     uint32   // the newest id marked (when bits is not nil)
	span    uint32   // the words covered, top's and span-1 below it (1..len(bits))
	bits    []uint64 // the ring; nil: nothing marked in this session
	at      []uint16 // at[i]: when bits[i]'s word entered the window (replaySecond)
	refused []uint64 // beside bits: the ids of bits refused; nil: none so far
	gave    bool     // words of this session were given up: below the window is too old
}

// replaySecond is the clock of the window's ages: seconds, mod 2^16.
func replaySecond(now time.Time) uint16 { return uint16(now.Unix()) }

// replayHold is the window's hold in seconds: for how long a word is kept
// (0xffff: as long as room allows).
func replayHold(d time.Duration) uint16 {
	if d <= 0 || d >= 0xffff*time.Second {
		return 0xffff
	}
	return uint16((d + time.Second - 1) / time.Second)
}

// replayState is what a window says of a transaction id.
type replayState uint8

const (
	replayFresh   replayState = iota // never finished in this session
	replayUsed                       // finished in this session: delivered
	replayRefused                    // finished in this session: refused
	replayTooOld                     // behind the window: refused unseen
)

// newer reports whether id a comes after b (ids roll over).
func newer(a, b uint32) bool { d := a - b; return d != 0 && d < 1<<31 }

func (w *replayWindow) state(ti uint32) replayState {
	if w.bits == nil || newer(ti, w.top) {
		return replayFresh
	}
	if below := (w.top>>6 - ti>>6) & replayWordMask; below >= w.span {
		if w.gave || below >= replayMaxWords {
			return replayTooOld
		}
		return replayFresh // below every id marked so far
	}
	i, bit := ti>>6&uint32(len(w.bits)-1), uint64(1)<<(ti%64)
	switch {
	case w.bits[i]&bit == 0:
		return replayFresh
	case w.refused != nil && w.refused[i]&bit != 0:
		return replayRefused
	}
	return replayUsed
}

// mark records ti as finished at now, delivered or refused, keeping words
// for hold seconds (replayHold); an id behind the window is already
// refused.
func (w *replayWindow) mark(ti uint32, now time.Time, hold uint16, refused bool) {
	switch {
	case w.bits == nil:
		w.bits, w.at = make([]uint64, 1), []uint16{replaySecond(now)}
		w.top, w.span = ti, 1
	case newer(ti, w.top):
		w.slide(ti, replaySecond(now), hold)
	case (w.top>>6-ti>>6)&replayWordMask >= w.span:
		if w.state(ti) == replayTooOld {
			return
		}
		w.stretch((w.top>>6-ti>>6)&replayWordMask+1, replaySecond(now))
	}
	i, bit := ti>>6&uint32(len(w.bits)-1), uint64(1)<<(ti%64)
	w.bits[i] |= bit
	switch {
	case refused && w.refused == nil:
		w.refused = make([]uint64, len(w.bits))
		fallthrough
	case refused:
		w.refused[i] |= bit
	}
}

// slide moves the window's top up to ti, at second sec.
func (w *replayWindow) slide(ti uint32, sec, hold uint16) {
	adv := (ti>>6 - w.top>>6) & replayWordMask
	w.top = ti
	if adv == 0 {
		return
	}
	// Grow to cover the new words (those between the old top and the new
	// one are holes: ids the remote skipped, so far) and every old word
	// from the oldest young one up.
	need := adv
	for k := range w.span {
		if w.young(ti>>6-adv-(w.span-1)+k, 1, sec, hold) {
			need += w.span - k
			break
		}
	}
	if n := len(w.bits); n < int(need) && n < replayMaxWords {
		for n < int(need) && n < replayMaxWords {
			n *= 2
		}
		w.resize(n, ti>>6-adv, w.span)
	}
	n := uint32(len(w.bits))
	for k := range min(adv, n) {
		i := (ti>>6 - k) & (n - 1)
		w.bits[i], w.at[i] = 0, sec
		if w.refused != nil {
			w.refused[i] = 0
		}
	}
	w.gave = w.gave || w.span+adv > n
	w.span = min(w.span+adv, n)
	// Halve while the older half holds no young word.
	for n > 1 {
		keep := min(w.span, n/2)
		if w.young(ti>>6-(w.span-1), w.span-keep, sec, hold) {
			break
		}
		w.gave = w.gave || keep < w.span
		w.span, n = keep, n/2
		w.resize(int(n), ti>>6, keep)
	}
}

// stretch takes the window down to span words below and with its top's
// (span ≤ replayMaxWords), the new words empty and entered at second sec.
func (w *replayWindow) stretch(span uint32, sec uint16) {
	if n := len(w.bits); n < int(span) {
		for n < int(span) {
			n *= 2
		}
		w.resize(n, w.top>>6, w.span)
	}
	mask := uint32(len(w.bits) - 1)
	for k := w.span; k < span; k++ {
		i := (w.top>>6 - k) & mask
		w.bits[i], w.at[i] = 0, sec
		if w.refused != nil {
			w.refused[i] = 0
		}
	}
	w.span = span
}

// young reports whether one of the n words from word number low up
// entered the window less than hold seconds before sec.
func (w *replayWindow) young(low, n uint32, sec, hold uint16) bool {
	mask := uint32(len(w.bits) - 1)
	for k := range n {
		i := (low + k) & mask
		if hold == 0xffff || sec-w.at[i] < hold {
			return true
		}
	}
	return false
}

// resize lays the span words up to word number top out in a new ring of n
// words (span ≤ n, a power of two).
func (w *replayWindow) resize(n int, top, span uint32) {
	bits, at := make([]uint64, n), make([]uint16, n)
	var refused []uint64
	if w.refused != nil {
		refused = make([]uint64, n)
	}
	old, m := uint32(len(w.bits)-1), uint32(n-1)
	for k := range span {
		wn := top - k
		bits[wn&m], at[wn&m] = w.bits[wn&old], w.at[wn&old]
		if refused != nil {
			refused[wn&m] = w.refused[wn&old]
		}
	}
	w.bits, w.at, w.refused = bits, at, refused
}

// reset forgets the session's ids (a new session starts a new window).
func (w *replayWindow) reset() { *w = replayWindow{} }

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

// FootChecker parses received datagrams and checks their Ed25519 feet for
// one reader goroutine, with the key table the owner publishes (KeyTable).
// It remembers the feet it checked, in a memory its twins (the stack's
// other readers) share, since a packet sent again reaches whichever reader
// reads next: a datagram seen before (a retransmission, a replay, a flood
// of one captured packet) gets the same answer without a second
// verification, and a signature seen valid on other bytes fails at once,
// since an Ed25519 signature is deterministic: one key signs one message
// one way (seenFeet).
type FootChecker struct {
	// Shed, set while the reader cannot keep up (its socket holds more
	// than it reads at once), leaves alive requests unchecked, and Receive
	// drops them (presence_shed): presence is what an overloaded stack
	// sheds first, so that the signatures it checks and makes are those of
	// joins, allows and messages. The remote asks again (its alive's
	// resends), and whatever else it sends counts as alive meanwhile.
	Shed bool
	mem  *seenFeet
	foot *packet.NaClFoot
	key  *[32]byte      // the key foot's resolver gives: the packet's being checked
	n    *atomic.Uint64 // counts the verifications
}

// seenFeet remembers checked feet, for the readers of a stack. Its memory
// is bounded: sets of seenWays slots of 32 bytes, a set by the keyed hash
// of the signature (a flood of one signature always meets its own set),
// the oldest slot of a set taken for a new foot. It is sized to hold the
// feet verified in seenSpan, longer than a packet takes to be sent again
// (a message's timer, 200 ms to 5 s, and the queues it waits in), so that
// a copy sent again meets its original: from minSeenFeet slots to
// maxSeenFeet, growing at once when the feet of this span would fill more
// than half of it and shrinking when a span verified a quarter of its
// slots or less (an idle client's keeps 2 KiB, a main taking 8k signed
// packets a second 1 MiB); but never to more than seenFeetFor the remotes
// the key table holds: the slots gained for remotes that are gone since go
// back when the owner publishes the table without them (Core.OwnFeet,
// trim), so a main that its remotes left holds 2 KiB again before any
// datagram comes.
type seenFeet struct {
	seed   maphash.Seed
	mu     sync.Mutex   // the readers check at once
	slots  atomic.Int64 // len(sets)·seenWays, for trim without the lock
	sets   []seenSet
	stamp  uint32           // counts the feet noted, to find a set's oldest
	fresh  int              // feet verified since spanAt
	spanAt time.Time        // when the current span began
	clock  func() time.Time // time.Now; a test's fake clock
}

type seenSet [seenWays]seenFoot

// A slot names the key table entry it was checked with by the entry's
// serial, not a pointer: a slot must not keep an entry alive (and with it
// the session's AEAD coat and cipher states) once the remote is forgotten.
type seenFoot struct {
	sig   uint64 // of the signature
	sum   uint64 // of the signed bytes
	key   uint64 // the serial of the entry checked with (peerKeys.serial); 0: an empty slot
	stamp uint32 // seenFeet.stamp when noted
	ok    bool
}

const (
	seenWays                 = 8
	minSeenFeet, maxSeenFeet = 64, 32768
	seenPerRemote            = 8 // at most, a remote's (seenFeetFor)
	seenSpan                 = 2 * time.Second
)

// seenFeetFor is the most slots the memory keeps while the key table holds
// the keys of n remotes: seenPerRemote for each (a burst of messages, each
// of its segments and their copies sent again), in a power of two from
// minSeenFeet to maxSeenFeet.
func seenFeetFor(n int) int {
	room := minSeenFeet
	for room < seenPerRemote*n && room < maxSeenFeet {
		room *= 2
	}
	return room
}

// trim gives back the slots beyond room (seenFeetFor), on the owner
// goroutine each time it publishes the key table (Core.PublishKeys); the
// readers check at once.
func (m *seenFeet) trim(room int) {
	if m.slots.Load() <= int64(room) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sets)*seenWays > room {
		m.resize(room)
	}
}

// recall looks up a foot: found, and whether it verified (valid: a
// signature seen valid on other bytes is not).
func (m *seenFeet) recall(sig, sum, key uint64) (found, valid bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sets == nil {
		return false, false
	}
	set := &m.sets[sig%uint64(len(m.sets))]
	for i := range set {
		if s := &set[i]; s.key == key && s.sig == sig {
			switch {
			case s.sum == sum:
				return true, s.ok
			case s.ok:
				return true, false // a valid signature on other bytes
			}
		}
	}
	return false, false
}

// note remembers a foot just verified, and resizes the memory for the
// rate it verifies at, within room (seenFeetFor).
func (m *seenFeet) note(sig, sum, key uint64, ok bool, room int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock()
	if m.sets == nil {
		m.resize(minSeenFeet)
		m.spanAt = now
	}
	m.fresh++
	slots := len(m.sets) * seenWays
	switch {
	case now.Sub(m.spanAt) >= seenSpan:
		if m.fresh <= slots/4 && slots > minSeenFeet {
			m.resize(max(minSeenFeet, slots/2))
		}
		m.fresh, m.spanAt = 1, now
	case 2*m.fresh >= slots && slots < room:
		m.resize(2 * slots) // a span's feet would fill more than half
	}
	m.stamp++
	set := &m.sets[sig%uint64(len(m.sets))]
	old := &set[0]
	for i := range set {
		if s := &set[i]; s.key == 0 || (s.key == key && s.sig == sig) {
			old = s
			break
		} else if m.stamp-s.stamp > m.stamp-old.stamp {
			old = s
		}
	}
	*old = seenFoot{sig: sig, sum: sum, key: key, stamp: m.stamp, ok: ok}
}

// resize makes room for `slots` feet, keeping the newest that fit.
func (m *seenFeet) resize(slots int) {
	oldSets := m.sets
	m.sets = make([]seenSet, slots/seenWays)
	m.slots.Store(int64(slots))
	for i := range oldSets {
		for _, s := range oldSets[i] {
			if s.key == 0 {
				continue
			}
			set := &m.sets[s.sig%uint64(len(m.sets))]
			old := &set[0]
			for j := range set {
				if set[j].key == 0 {
					old = &set[j]
					break
				} else if m.stamp-set[j].stamp > m.stamp-old.stamp {
					old = &set[j]
				}
			}
			if old.key == 0 || m.stamp-s.stamp < m.stamp-old.stamp {
				*old = s
			}
		}
	}
}

// NewFootChecker makes a checker that counts its verifications in n.
func NewFootChecker(n *atomic.Uint64) *FootChecker {
	return newFootChecker(n, &seenFeet{seed: maphash.MakeSeed(), clock: time.Now})
}

// Twin makes a checker for another reader of the same stack: it shares
// f's memory of checked feet and its count.
func (f *FootChecker) Twin() *FootChecker { return newFootChecker(f.n, f.mem) }

// OwnFeet has c size f's memory of checked feet (its twins share it) to
// the remotes c publishes: the room gained for remotes that are gone goes
// back as the key table lets them go (PublishKeys), not when a reader next
// parses a datagram, which a main that its remotes left may wait long for.
// Call it before the readers start.
func (c *Core) OwnFeet(f *FootChecker) { c.readers.feet = f.mem }

func newFootChecker(n *atomic.Uint64, mem *seenFeet) *FootChecker {
	f := &FootChecker{mem: mem, n: n}
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
	if f.Shed && h.TransactionKind == codec.TransactionKindAlive && h.PacketKind == codec.PacketKindRequest && !h.Correspondent() {
		in.shed = true
		return
	}
	switch {
	case h.FootKind == codec.FootKindNaCl:
		in.foot = f.check(&in.pkt.Packet, table)
	case h.FootKind == codec.FootKindNada && sessionSealed(h):
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
	sig := maphash.Bytes(f.mem.seed, p.Foot)
	sum := maphash.Bytes(f.mem.seed, p.Raw[:len(p.Raw)-len(p.Foot)])
	if found, ok := f.mem.recall(sig, sum, k.serial); found {
		return footCheck{key: key, ok: ok}
	}
	f.key = key
	f.n.Add(1)
	ok := p.Verify(f.foot) == nil
	f.mem.note(sig, sum, k.serial, ok, seenFeetFor(table.entries()))
	return footCheck{key: key, ok: ok}
}
