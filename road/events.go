package road

import (
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/road/internal/core"
)

// The enums the stack shares with its core (package road/internal/core),
// which makes them.
type (
	// EventKind is what happened to a remote.
	EventKind = core.EventKind
	// Profile selects what an estate offers its peers.
	Profile = core.Profile
	// AEADMode says whether the fast profile offers the AEAD coats.
	AEADMode = core.AEADMode
)

// Event is a change in a remote's state (Stack.Events).
type Event struct {
	Kind   EventKind
	Remote string // the remote's name
	UID    uint32 // our uid for it
	Time   time.Time
	// Reason says why, for pending, rejected, removed and forgotten
	// (ReasonNone otherwise).
	Reason Reason
}

// Remote describes a remote estate as the stack knows it (Stack.Remotes,
// Stack.Join).
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

// Message is a message received from a remote (Stack.Receive). A body sent
// as bytes (Send or Go with a []byte or string; the reference's bk=2) has
// Kind codec.BodyKindRaw, Raw the bytes as sent and Body nil; any other is
// decoded into Body, with Raw its serialized form.
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

// Counters are a stack's statistics since it started (Stack.Counters).
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

// RTTStats summarizes message round trips: how many, and the shortest,
// longest and mean.
type RTTStats struct {
	Count         uint64
	Min, Max, Avg time.Duration
}

// The core's Message, Event and Remote have the same fields as the public
// ones, so a conversion copies them (no allocation on the receive path), and
// a field added to one and not the other stops the build here. Counters
// differs in its RTTStats field: countersOf copies it field by field, and
// TestCountersTwins checks it copies every field.

func messageOf(m *core.Message) Message { return Message(*m) }

func eventOf(e *core.Event) Event { return Event(*e) }

func remoteOf(r core.Remote) Remote { return Remote(r) }

func remotesOf(rs []core.Remote) []Remote {
	if rs == nil {
		return nil
	}
	out := make([]Remote, len(rs))
	for i := range rs {
		out[i] = Remote(rs[i])
	}
	return out
}

func countersOf(c core.Counters) Counters {
	return Counters{
		PacketsIn:           c.PacketsIn,
		PacketsOut:          c.PacketsOut,
		BytesIn:             c.BytesIn,
		BytesOut:            c.BytesOut,
		Drops:               c.Drops,
		Retransmits:         c.Retransmits,
		SpuriousRetransmits: c.SpuriousRetransmits,
		Duplicates:          c.Duplicates,
		MessagesIn:          c.MessagesIn,
		MessagesOut:         c.MessagesOut,
		MessageFails:        c.MessageFails,
		RTT:                 RTTStats(c.RTT),
		Events:              c.Events,
		EventDrops:          c.EventDrops,
		SendErrors:          c.SendErrors,
		Verifications:       c.Verifications,
		Reassembling:        c.Reassembling,
		ReassemblyMemory:    c.ReassemblyMemory,
		ReceiveQueue:        c.ReceiveQueue,
		EventQueue:          c.EventQueue,
	}
}

// The events a stack reports.
const (
	EventJoined   = core.EventJoined   // a join completed
	EventPending  = core.EventPending  // the remote's keys wait for an operator (keep pending)
	EventRejected = core.EventRejected // a join or allow was rejected (keys or identity)
	EventAllowed  = core.EventAllowed  // an allow completed: the session is up
	EventAlive    = core.EventAlive    // an alive succeeded after the remote was dead or unknown
	EventDead     = core.EventDead     // an alive timed out
	EventReaped   = core.EventReaped   // a main estate gave up on a silent remote
	EventUnreaped = core.EventUnreaped // a reaped remote spoke again
	EventRemoved  = core.EventRemoved  // the remote was forgotten (rejected keys)
	// EventForgotten: the remote was dropped from memory, its keep kept
	// (ReasonSilent: reaped and silent ForgetAfter; ReasonTooMany: the
	// longest silent of more than MaxRemotes).
	EventForgotten = core.EventForgotten
)

// The profiles.
const (
	// ProfileAuto advertises the fast profile and uses it with peers that
	// advertise it too (raet-go estates); others get the reference profile.
	ProfileAuto = core.ProfileAuto
	// ProfileReference advertises nothing: every peer gets the reference
	// profile (native heads, Ed25519 on every packet, 1024-byte packets).
	ProfileReference = core.ProfileReference
)

// The AEAD modes (Config.AEAD).
const (
	// AEADPrefer offers the AEAD coats and seals a fast-profile session
	// with one when the peer offers one too.
	AEADPrefer = core.AEADPrefer
	// AEADRefuse offers none: fast-profile sessions keep the NaCl coat and
	// the MAC foot.
	AEADRefuse = core.AEADRefuse
)
