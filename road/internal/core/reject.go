package core

import (
	"fmt"
	"net/netip"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

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
