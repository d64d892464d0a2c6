package road

import "github.com/raet-go/raet/road/internal/core"

// The types the stack shares with its core (package road/internal/core),
// which documents them.
type (
	// EventKind is what happened to a remote.
	EventKind = core.EventKind
	// Event is a change in a remote's state.
	Event = core.Event
	// Remote describes a remote estate as the stack knows it.
	Remote = core.Remote
	// Message is a message received from a remote. A body sent as bytes
	// (Send or Go with a []byte or string; the reference's bk=2) has
	// Kind codec.BodyKindRaw, Raw the bytes as sent and Body nil; any other
	// is decoded into Body, with Raw its serialized form.
	Message = core.Message
	// Counters are a stack's statistics since it started.
	Counters = core.Counters
	// RTTStats summarizes message round trips.
	RTTStats = core.RTTStats
	// Profile selects what an estate offers its peers.
	Profile = core.Profile
	// AEADMode says whether the fast profile offers the AEAD coats.
	AEADMode = core.AEADMode
)

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
