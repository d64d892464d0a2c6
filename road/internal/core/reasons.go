package core

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
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

// report records an event about the remote named name and, for the
// changes an operator cares about (joined, pending, rejected, removed),
// logs it at Info with the reason and hint, the command that resolves it.
func (c *Core) report(k EventKind, name string, uid uint32, why Reason, addr netip.AddrPort, hint string) {
	c.events = append(c.events, Event{Kind: k, Remote: name, UID: uid, Time: c.now, Reason: why})
	c.stats.event(k, why)
	switch k {
	case EventJoined, EventPending, EventRejected, EventRemoved, EventForgotten:
	default:
		return
	}
	suppressed, ok := c.joinLogs.take(c.now)
	if !ok {
		return
	}
	attrs := []any{"remote", name}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed_before", suppressed)
	}
	if addr.IsValid() && addr.String() != name {
		attrs = append(attrs, "addr", addr.String())
	}
	if why != ReasonNone {
		attrs = append(attrs, "reason", why.String(), "why", why.Describe())
	}
	if hint != "" {
		attrs = append(attrs, "resolve", hint)
	}
	c.log.Info("raet: "+k.String(), attrs...)
}

// nameOf names r in events, logs and errors: by its address until it
// answered a join (before that its name is a placeholder).
func (c *Core) nameOf(r *remote) string {
	if r.fuid == 0 && !r.joined {
		return r.ha.String()
	}
	return r.name
}

// keepArg is the keep directory as the raet commands take it.
func (c *Core) keepArg() string {
	if c.cfg.KeepDir == "" {
		return "DIR"
	}
	return c.cfg.KeepDir
}

// hint is what resolves why for the remote named name, as seen here.
func (c *Core) hint(why Reason, name string) string {
	switch why {
	case ReasonPendingOurs, ReasonKeysRejected:
		return fmt.Sprintf("if %s's keys are right, run: raet keys accept --keep %s %s", name, c.keepArg(), name)
	case ReasonPendingTheirs:
		return fmt.Sprintf("the remote's operator runs: raet keys accept --keep DIR %s", c.local.name)
	case ReasonNameTaken:
		return fmt.Sprintf("the joiner takes another name; or, if %s's keys changed for good, stop this estate and run: raet keys forget --keep %s %s",
			name, c.keepArg(), name)
	case ReasonAddressChanged, ReasonIdentityChanged:
		return fmt.Sprintf("the joiner joins from its old address; or run this estate with --mutable (Config.Mutable); or stop it and run: raet keys forget --keep %s %s",
			c.keepArg(), name)
	case ReasonMainKeysChanged:
		return fmt.Sprintf("if %s's keys really changed, run: raet keys forget --keep %s %s", name, c.keepArg(), name)
	case ReasonUnknownToRemote:
		return fmt.Sprintf("to join %s afresh, forget it here: raet keys forget --keep %s %s; or run with --mutable (Config.Mutable)",
			name, c.keepArg(), name)
	case ReasonNotMain:
		return "join a main estate (raet serve --main, Config.Main)"
	case ReasonBodyKind:
		return "join with JSON bodies (--body json, Config.BodyKind)"
	case ReasonKeepBusy:
		return "the main's keep is behind with its writes: the join is asked again each second; if it lasts, see the main's log"
	}
	return ""
}

// rejectBody is the body of a reject to a raet-go joiner: the reason.
func (c *Core) rejectBody(why Reason, b *joinBody) []byte {
	// A body the joinent cannot read comes from a raet-go joiner: the
	// reference sends only JSON or msgpack.
	if why == ReasonNone || (b == nil || b.caps == nil) && why != ReasonBodyKind {
		return nil // the reference: an empty reject, as it sends
	}
	body, err := packet.JSONBody{}.Marshal(nil, packet.OrderedMap{{Key: "reason", Value: why.String()}})
	if err != nil {
		return nil
	}
	return body
}

// reject answers the joiner with a reject that says why (to a raet-go
// joiner, in the body), reports it, and ends the join. b is the request,
// nil when it could not be read.
func (j *joinent) reject(c *Core, why Reason, b *joinBody) {
	name := j.r.name
	if b != nil {
		name = b.name
	}
	c.report(EventRejected, name, j.r.nuid, why, j.from, c.hint(why, name))
	h := c.outHead(codec.TransactionKindJoin, codec.PacketKindReject, j.se, j.de, 0, j.ti, true)
	h.BodyKind = codec.BodyKindJSON
	c.sendNew(j.r, &h, c.rejectBody(why, b), j.from)
	j.remove(c)
}

// mismatch says what differs between a rejoin and what is known of r.
func mismatch(r *remote, b *joinBody, from netip.AddrPort) Reason {
	switch {
	case b.name == r.name && !sameRoleKeys(r, b):
		return ReasonNameTaken
	case from != r.ha:
		return ReasonAddressChanged
	}
	return ReasonIdentityChanged
}

// rejected is the joiner's end of a reject: the reason from the body
// (raet-go), else inferred; the Join calls fail with it. A remote that was
// never joined (a placeholder for an address) is forgotten; one joined
// before stays, so that a rejection of our changed address does not cost
// us the remote.
func (j *joiner) rejected(c *Core, p *rxPacket) {
	why := ReasonRejected
	if r := bodyReason(p); r != ReasonNone {
		why = r
	}
	if why == ReasonRejected && !j.vacuous && c.local.keptAHA.Port != 0 && c.local.keptAHA != c.local.aha {
		why = ReasonAddressChanged // the reference says nothing; our address did change
	}
	j.remove(c)
	r := j.r
	c.report(EventRejected, c.nameOf(r), r.nuid, why, r.ha, j.rejectHint(c, why))
	c.failJoin(r, &JoinError{Reason: why, Err: ErrRejected, Hint: j.rejectHint(c, why)})
	if r.sid == 0 {
		c.removeRemote(r, ErrRejected)
	}
}

// bodyReason is the reason a raet-go joinent gave in the body of a reject
// or pend; ReasonNone when there is none.
func bodyReason(p *rxPacket) Reason {
	var m map[string]any
	if len(p.Coat) == 0 || (packet.JSONBody{}).Unmarshal(p.Coat, &m) != nil {
		return ReasonNone
	}
	s, _ := m["reason"].(string)
	return parseReason(s)
}

// rejectHint is what a joiner can do about a rejection.
func (j *joiner) rejectHint(c *Core, why Reason) string {
	switch why {
	case ReasonAddressChanged:
		if c.local.keptAHA.Port != 0 && c.local.keptAHA != c.local.aha {
			return fmt.Sprintf("join from %s as before (raet send --listen %s), or the main runs with --mutable",
				hostPort(c.local.keptAHA), hostPort(c.local.keptAHA))
		}
		return "join from the address the main knows, or the main runs with --mutable"
	case ReasonNameTaken:
		return "join with another name, or the main's operator forgets the old estate of this name (raet keys forget)"
	case ReasonKeysRejected:
		return fmt.Sprintf("the main's operator accepts our keys: raet keys accept --keep DIR %s", c.local.name)
	case ReasonRejected:
		return "the main's log says why"
	}
	return c.hint(why, j.r.name)
}

// trustMain decides the keys of the estate we chose to join: trusted on
// first use (AutoOnce) when Config.Auto is AutoNever, so that a new estate
// can join a main without an operator on its own side, and refused when
// they change later (ReasonMainKeysChanged). Under AutoOnce or AutoAlways
// keys are never pending: the status is accepted or rejected, and the
// reason is set when they are rejected.
func (c *Core) trustMain(b *joinBody, at netip.AddrPort) (keep.Acceptance, Reason, error) {
	auto := max(c.cfg.Auto, keep.AutoOnce)
	stored, known, _ := c.roleStatus(b.role)
	status, err := c.statusRole(auto, b.role, b.verify, b.pub, at)
	switch {
	case err != nil || status == keep.Accepted:
		return status, ReasonNone, err
	case known && stored == keep.Rejected:
		return status, ReasonKeysRejected, nil
	}
	return status, ReasonMainKeysChanged, nil
}

// failure is the error of a joiner that ends with err (ErrTimeout,
// ErrRefused, or a Join call's context error) before it completed: what
// it waited for (the joinent's operator), no answer at all, or err alone.
func (j *joiner) failure(c *Core, err error) error {
	switch {
	case j.pended:
		return &JoinError{Reason: j.pendWhy, Err: err, Hint: c.hint(j.pendWhy, j.r.name)}
	case !j.answered:
		je := &JoinError{Reason: ReasonNoAnswer, Tries: j.tries, Err: err, Hint: "is an estate listening there?"}
		if c.cfg.BodyKind != codec.BodyKindJSON {
			je.Hint = fmt.Sprintf("is an estate listening there? If it is, it may not read %v bodies: join with --body json", c.cfg.BodyKind)
		}
		return je
	}
	return err
}

// JoinWaitError is the error of a Join call whose ctx ended while the join
// with the estate at ap was under way: what it waits for.
func (c *Core) JoinWaitError(ap netip.AddrPort, err error) error {
	r := c.remoteAt(ap)
	if r == nil {
		return err
	}
	for _, t := range r.inProcess(codec.TransactionKindJoin) {
		if j, ok := t.(*joiner); ok {
			je := j.failure(c, err)
			if je == err {
				return err
			}
			if e, ok := je.(*JoinError); ok {
				e.Addr = ap
				if r.fuid != 0 {
					e.Remote = r.name
				}
			}
			return &TxnError{Txn: "join", Remote: c.nameOf(r), Err: je}
		}
	}
	return err
}

// hostPort writes a kept address as host:port.
func hostPort(h keep.HostPort) string { return net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port))) }
