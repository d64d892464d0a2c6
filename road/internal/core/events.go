package core

import (
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
)

// EventKind is what happened to a remote.
type EventKind uint8

// The events a stack reports.
const (
	EventJoined    EventKind = iota + 1 // a join completed
	EventPending                        // the remote's keys wait for an operator (keep pending)
	EventRejected                       // a join or allow was rejected (keys or identity)
	EventAllowed                        // an allow completed: the session is up
	EventAlive                          // an alive succeeded after the remote was dead or unknown
	EventDead                           // an alive timed out
	EventReaped                         // a main estate gave up on a silent remote
	EventUnreaped                       // a reaped remote spoke again
	EventRemoved                        // the remote was forgotten (rejected keys)
	EventForgotten                      // the remote was dropped from memory, its keep kept (Reason: silent, too-many-remotes)
)

var eventNames = [...]string{"", "joined", "pending", "rejected", "allowed", "alive", "dead", "reaped", "unreaped", "removed", "forgotten"}

func (k EventKind) String() string {
	if int(k) < len(eventNames) && k > 0 {
		return eventNames[k]
	}
	return "event(?)"
}

// Event is a change in a remote's state.
type Event struct {
	Kind   EventKind
	Remote string // the remote's name
	UID    uint32 // our uid for it
	Time   time.Time
	// Reason says why, for pending, rejected, removed and forgotten
	// (ReasonNone otherwise).
	Reason Reason
}

// Remote describes a remote estate as the stack knows it.
type Remote struct {
	Name    string
	UID     uint32 // our uid for it (nuid); it uses it as de
	FUID    uint32 // its uid for us (fuid); we use it as de
	Addr    netip.AddrPort
	Role    string
	Kind    uint8
	Main    bool
	Joined  bool
	Allowed bool
	Alive   bool
	Reaped  bool
	SID     uint32 // our session id with it
	RSID    uint32 // its session id with us
	// The profile of the session (see Config.Profile): the head, foot and
	// coat kinds and the largest packet used for everything but joins and
	// allows (an AEAD coat has no foot: FootKind nada).
	HeadKind      codec.HeadKind
	FootKind      codec.FootKind
	CoatKind      codec.CoatKind
	MaxPacketSize int
	// SRTT and RTTVar are the round-trip estimate the message timers
	// start from (zero: no sample yet); LastHeard is when its last
	// authenticated packet came.
	SRTT, RTTVar time.Duration
	LastHeard    time.Time
	// Retransmits counts its messages' and alives' packets sent again
	// (since it was added; it wraps at 2^32). Messages are counted per
	// stack only (Counters): a remote's memory is kept as it was.
	Retransmits uint64
	// Transactions is the number of its transactions under way (messages
	// sent and received, and joins, allows and alives); Waiting the
	// number of its messages held back, waiting to start (the send
	// window, or a new session).
	Transactions, Waiting int
}

// Message is a message received from a remote.
type Message struct {
	From string         // the sender's estate name
	Kind codec.BodyKind // its body kind
	// Body is the decoded mapping (empty for an empty body); nil for a raw
	// body.
	Body map[string]any
	// Raw is the serialized body as received (after the coat is opened),
	// the message's to keep: the messages of one bundle share one block of
	// memory, each Raw capped to its own bytes (an append copies).
	Raw []byte
}

// Counters are a stack's statistics since it started.
type Counters struct {
	PacketsIn  map[string]uint64 // by "transaction/packet" kind, e.g. "message/ack"
	PacketsOut map[string]uint64
	// BytesIn and BytesOut are the lengths of PacketsIn and PacketsOut, by
	// the same kinds (packets sent again are in Retransmits only).
	BytesIn, BytesOut map[string]uint64
	Drops             map[string]uint64 // received datagrams dropped, by reason
	Retransmits       uint64            // packets sent again (redo timers, losses found and resend requests)
	// SpuriousRetransmits counts messages sent again whose done then came
	// sooner after the copy than any round trip took: it answered an
	// earlier copy, so the copy was not needed.
	SpuriousRetransmits uint64
	// Duplicates counts message segments (and messages) received again
	// while held: the sender's retransmissions that were spurious, or
	// the network's duplicates.
	Duplicates   uint64
	MessagesIn   uint64
	MessagesOut  uint64 // messages done
	MessageFails uint64
	RTT          RTTStats // from a message's first packet to its done
	// Events counts the events reported (whether or not Events() was
	// read), by kind, and "kind/reason" where there is a reason, e.g.
	// "joined", "pending/pending-ours", "rejected/keys-rejected".
	Events     map[string]uint64
	EventDrops uint64 // events lost because Events() was not read
	SendErrors uint64 // datagrams the system refused to send (no route, too big, …)
	// Verifications counts the Ed25519 signatures checked: each received
	// datagram at most once, and a datagram seen before not again.
	Verifications uint64
	// Reassembling is the number of segmented messages being reassembled,
	// ReassemblyMemory the memory charged for them (Config.Reassembly).
	Reassembling, ReassemblyMemory int
	// ReceiveQueue is the number of messages received and not yet read
	// from Receive(); EventQueue the events not yet read from Events().
	ReceiveQueue, EventQueue int
}

// RTTStats summarizes message round trips.
type RTTStats struct {
	Count         uint64
	Min, Max, Avg time.Duration
}
