package core

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/raet-go/raet/keep"
)

// Reason says why a join did not complete, why it waits, or why a remote
// was rejected or removed: it is in the joiner's *JoinError, in the
// events of both sides, and in the main's log. Between raet-go estates a
// reject carries it in its body (key "reason", which the reference
// ignores); with the reference, the joiner infers it from what it sent
// and what came back.
type Reason uint8

// The reasons.
const (
	ReasonNone Reason = iota
	// ReasonNameTaken: another estate with other keys has the name at the
	// main.
	ReasonNameTaken
	// ReasonAddressChanged: a known estate joined from another address, on
	// an immutable road.
	ReasonAddressChanged
	// ReasonIdentityChanged: a known estate joined with another role,
	// kind, main flag or keys, on an immutable road.
	ReasonIdentityChanged
	// ReasonPendingTheirs: our keys wait for the remote's operator.
	ReasonPendingTheirs
	// ReasonPendingOurs: the remote's keys wait for our operator.
	ReasonPendingOurs
	// ReasonKeysRejected: an operator rejected the keys, or the role's
	// keys changed where the acceptance mode refuses that (once, never).
	ReasonKeysRejected
	// ReasonMainKeysChanged: the main we joined before offers other keys
	// than the ones we trusted on first use (see Config.Auto).
	ReasonMainKeysChanged
	// ReasonNotMain: a join of an estate we are not known to, sent to an
	// estate that is not a main.
	ReasonNotMain
	// ReasonBodyKind: the remote cannot read the body kind of our join.
	ReasonBodyKind
	// ReasonNoAnswer: nothing answered from the address.
	ReasonNoAnswer
	// ReasonUnknownToRemote: the remote does not know us any more (it lost
	// its keep) and the road is immutable.
	ReasonUnknownToRemote
	// ReasonRejected: the remote rejected us and said no more (the
	// reference does not say why).
	ReasonRejected
	// ReasonSilent: a remote forgotten after it was reaped and stayed
	// silent ForgetAfter.
	ReasonSilent
	// ReasonTooMany: a remote forgotten, the longest silent, because there
	// were more than MaxRemotes.
	ReasonTooMany
	// ReasonKeepBusy: the estate joined cannot write its keep fast enough
	// now (or at all): the join waits and is asked again.
	ReasonKeepBusy
	reasonCount
)

var reasonNames = [reasonCount]string{"", "name-taken", "address-changed", "identity-changed", "pending-theirs",
	"pending-ours", "keys-rejected", "main-keys-changed", "not-main", "body-kind", "no-answer", "unknown-to-remote",
	"rejected", "silent", "too-many-remotes", "keep-busy"}

// String returns the reason's name as it goes in a reject body and on
// raet serve's event lines ("address-changed"), "" for ReasonNone.
func (r Reason) String() string {
	if r < reasonCount {
		return reasonNames[r]
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// parseReason reads a reject body's reason; an unknown or missing one is
// ReasonNone.
func parseReason(s string) Reason {
	for i, n := range reasonNames {
		if n == s && i > 0 {
			return Reason(i)
		}
	}
	return ReasonNone
}

var reasonTexts = [reasonCount]string{"", "the name is taken by an estate with other keys",
	"the estate joined from another address, which an immutable road refuses",
	"the estate joined with another role, kind, main flag or keys, which an immutable road refuses",
	"our keys wait for the remote's operator", "the remote's keys wait for our operator",
	"the keys were rejected", "the main offers other keys than the ones trusted when we first joined it",
	"the remote is not a main estate, and does not know us", "the remote cannot read the body kind of our join",
	"nothing answered", "the remote does not know us (it lost its keep?), which an immutable road cannot mend",
	"the remote rejected the join without a reason (a reference estate, or an older raet-go)",
	"the remote was silent for Interim and then ForgetAfter", "there were more remotes than MaxRemotes and it was the longest silent",
	"the keep cannot take the join's writes now"}

// Describe returns the reason in words.
func (r Reason) Describe() string {
	if r < reasonCount {
		return reasonTexts[r]
	}
	return r.String()
}

// JoinError is a join that failed, or is waiting, and why. Its Err is the
// sentinel to branch on (ErrRejected, ErrTimeout, ErrRefused,
// ErrRenewImmutable, …); errors.As finds the JoinError inside the
// *TxnError that Join returns, which names the remote (its address until
// it answered). Error says why and what to do, not who.
type JoinError struct {
	Reason Reason
	Addr   netip.AddrPort // the address joined
	Remote string         // the remote's name, if it said
	Tries  int            // requests sent, for ReasonNoAnswer
	// Hint is what resolves it: a command to run at the remote or here.
	Hint string
	Err  error
}

func (e *JoinError) Error() string {
	var s string
	switch e.Reason {
	case ReasonNoAnswer:
		s = fmt.Sprintf("no answer from %s after %d tries", e.Addr, e.Tries)
	case ReasonNone:
		s = e.Err.Error()
	default:
		s = e.Reason.Describe()
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	if e.Err != nil && e.Reason != ReasonNone {
		s += " (" + e.Err.Error() + ")"
	}
	return s
}

// Unwrap returns Err.
func (e *JoinError) Unwrap() error { return e.Err }

// ReasonOf returns the Reason of a Join error, or ReasonNone.
func ReasonOf(err error) Reason {
	var je *JoinError
	if errors.As(err, &je) {
		return je.Reason
	}
	return ReasonNone
}

// hostPort writes a kept address as host:port.
func hostPort(h keep.HostPort) string { return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port))) }
