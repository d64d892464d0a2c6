package road

import "github.com/raet-go/raet/road/internal/core"

// Reason says why a join did not complete, why it waits, or why a remote
// was rejected or removed (documented in road/internal/core, which makes
// them): it is in the joiner's *JoinError, in the events of both sides,
// and in the main's log.
type Reason = core.Reason

// JoinError is a join that failed, or is waiting, and why; errors.As
// finds it inside the *TxnError that Join returns.
type JoinError = core.JoinError

// The reasons.
const (
	ReasonNone            = core.ReasonNone
	ReasonNameTaken       = core.ReasonNameTaken       // another estate with other keys has the name at the main
	ReasonAddressChanged  = core.ReasonAddressChanged  // a known estate joined from another address, on an immutable road
	ReasonIdentityChanged = core.ReasonIdentityChanged // a known estate joined with another role, kind, main flag or keys, on an immutable road
	ReasonPendingTheirs   = core.ReasonPendingTheirs   // our keys wait for the remote's operator
	ReasonPendingOurs     = core.ReasonPendingOurs     // the remote's keys wait for our operator
	ReasonKeysRejected    = core.ReasonKeysRejected    // an operator rejected the keys, or changed keys the mode refuses
	ReasonMainKeysChanged = core.ReasonMainKeysChanged // the main we joined before offers other keys than we trusted on first use
	ReasonNotMain         = core.ReasonNotMain         // a vacuous join sent to an estate that is not a main
	ReasonBodyKind        = core.ReasonBodyKind        // the remote cannot read the body kind of our join
	ReasonNoAnswer        = core.ReasonNoAnswer        // nothing answered from the address
	ReasonUnknownToRemote = core.ReasonUnknownToRemote // the remote lost us and the road is immutable
	ReasonRejected        = core.ReasonRejected        // the remote rejected us and said no more
	ReasonSilent          = core.ReasonSilent          // forgotten: reaped, then silent ForgetAfter
	ReasonTooMany         = core.ReasonTooMany         // forgotten: the longest silent of more than MaxRemotes
	ReasonKeepBusy        = core.ReasonKeepBusy        // the remote cannot write its keep fast enough now (or at all): the join waits
)

// ReasonOf returns the Reason of a Join error, or ReasonNone.
func ReasonOf(err error) Reason { return core.ReasonOf(err) }
