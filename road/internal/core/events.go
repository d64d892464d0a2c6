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

// Event, Remote, Message, Counters and RTTStats are the core's side of the
// road package's types of the same names, which document their fields: the
// stack converts each to its public twin (road/events.go), so the fields of
// the two must stay the same, in the same order.

type Event struct {
	Kind   EventKind
	Remote string
	UID    uint32
	Time   time.Time
	Reason Reason
}

type Remote struct {
	Name                  string
	UID                   uint32
	FUID                  uint32
	Addr                  netip.AddrPort
	Role                  string
	Kind                  uint8
	Main                  bool
	Joined                bool
	Allowed               bool
	Alive                 bool
	Reaped                bool
	SID                   uint32
	RSID                  uint32
	HeadKind              codec.HeadKind
	FootKind              codec.FootKind
	CoatKind              codec.CoatKind
	MaxPacketSize         int
	SRTT, RTTVar          time.Duration
	LastHeard             time.Time
	Retransmits           uint64
	Transactions, Waiting int
}

type Message struct {
	From string
	Kind codec.BodyKind
	Body map[string]any
	Raw  []byte
}

type Counters struct {
	PacketsIn, PacketsOut          map[string]uint64
	BytesIn, BytesOut              map[string]uint64
	Drops                          map[string]uint64
	Retransmits                    uint64
	SpuriousRetransmits            uint64
	Duplicates                     uint64
	MessagesIn                     uint64
	MessagesOut                    uint64
	MessageFails                   uint64
	RTT                            RTTStats
	Events                         map[string]uint64
	EventDrops                     uint64
	SendErrors                     uint64
	Verifications                  uint64
	Reassembling, ReassemblyMemory int
	ReceiveQueue, EventQueue       int
}

type RTTStats struct {
	Count         uint64
	Min, Max, Avg time.Duration
}
