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

// The readers' checks of Ed25519 feet (FootChecker) and their shared
// memory of checked feet, and the outcomes handle reads.

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

// footCheck is the outcome of checking a packet's Ed25519 foot: the verify
// key it was checked with (nil: no key was known for its de) and whether
// the signature holds.
type footCheck struct {
	key *[32]byte
	ok  bool
}

// aeadCheck is the outcome of opening a packet's AEAD coat on the reader
// goroutine: the coat it was opened with (nil: none was tried), and the
// body or the error.
type aeadCheck struct {
	coat  *packet.AEADCoat
	plain []byte
	err   error
}

// rxPacket is a received packet, parsed and verified.
type rxPacket struct {
	packet.Packet
	from netip.AddrPort
}

// msgKey identifies an incoming segmented message.
type msgKey struct {
	nuid, si, ti uint32
}

// Inbound is a received datagram, parsed and, for an Ed25519 foot,
// checked, for an AEAD coat opened (FootChecker.Parse): what Receive
// takes.
type Inbound struct {
	pkt      rxPacket
	parseErr error
	foot     footCheck
	aead     aeadCheck
	shed     bool // an alive request FootChecker.Shed left unchecked
}

// sessionSealed says whether a packet of head h is one the session's AEAD
// coat opens: an AEAD coat kind, and not a join or an allow (those are
// never sealed so). The readers open only those, so that each coat a reader
// tries reaches openAEAD, which watches its cipher states (usedAEAD).
func sessionSealed(h *codec.Head) bool {
	tk := h.TransactionKind
	return packet.IsAEAD(h.CoatKind) && tk != codec.TransactionKindJoin && tk != codec.TransactionKindAllow
}

// readerKeys is what the readers check with: the table the core publishes
// its remotes' keys in and the readers' memory of checked feet, with the
// marks of what the next PublishKeys brings up to date.
type readerKeys struct {
	table KeyTable
	// dirty are the uids whose entries may be out of date, all says all
	// may be.
	dirty []uint32
	all   bool
	// feet is the readers' memory of checked feet, sized to the table's
	// remotes as it is published (OwnFeet); nil: none given.
	feet *seenFeet
}

// mark marks uid's entry, or all once the marks of a core of n remotes
// cost more than a full rebuild.
func (k *readerKeys) mark(uid uint32, n int) {
	if k.all {
		return
	}
	if len(k.dirty) >= n+keyShards {
		k.all, k.dirty = true, k.dirty[:0]
		return
	}
	k.dirty = append(k.dirty, uid)
}

// trimFeet gives back the slots of the readers' memory of checked feet
// beyond what the remotes of the table published need (OwnFeet).
func (k *readerKeys) trimFeet() {
	if k.feet != nil {
		k.feet.trim(seenFeetFor(k.table.entries()))
	}
}
