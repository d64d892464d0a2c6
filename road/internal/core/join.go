package core

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// Join (tk=1, §8.2): the exchange of names, long-term keys, roles and uids,
// and the key acceptance policy. Join packets are neither coated nor signed.
//
//	joiner                       joinent
//	  request(name,keys) ──────▶   (policy: accepted / pending / rejected)
//	  ◀────── response(uid,keys)   or pend … response once an operator accepts
//	  ack ────────────────────▶    (both: joined; session 0 → 1)

// Join packets are not authenticated, so here they may only start and
// answer their own join: the remote's session (ids, replay window, keys,
// allowed, joined) stays as it is until a join completes, and then a join
// changes no more than the reference needs: the first session id, and the
// hint that the remote may count its sessions afresh (sessionReset), which
// only an authenticated allow acts on. A join completes only for keys that
// are accepted; strangers are budgeted (budgets.go) and nothing is kept on
// disk for them but the pending role file an operator decides on, for at
// most maxPendingStrangers of them.

// pend adds j to the joins the pend timer re-reads the keep for.
func (c *Core) pend(j *joinent) { c.kept.pend(j, c.now) }

func (c *Core) unpend(j *joinent) { c.kept.unpend(j) }

// checkPended re-reads, once per role, the acceptance of the keys the
// pended joins wait on, and hands each join a decision made.
func (c *Core) checkPended() {
	status := make(map[string]keep.Acceptance)
	for _, t := range slices.Clone(c.kept.pended) {
		if !slices.Contains(c.kept.pended, t) {
			continue // ended by an earlier decision
		}
		role := t.b.role
		st, ok := status[role]
		if !ok {
			var err error
			if st, _, err = c.roleStatus(role); err != nil {
				st = keep.Pending // unreadable now: ask again later
			}
			status[role] = st
		}
		if st != keep.Pending {
			c.wake.touch(t.r)
			t.decided(c, st)
		}
	}
	c.kept.pendAt = time.Time{}
	if len(c.kept.pended) > 0 {
		c.kept.pendAt = c.now.Add(pendRedo)
	}
}

// pendStranger pends joinent j of a remote we did not know, dropping the
// oldest pended stranger (and its pending role file) beyond
// maxPendingStrangers.
func (c *Core) pendStranger(j *joinent) {
	n := 0
	var oldest *joinent
	for _, o := range c.kept.pended {
		if !o.r.added {
			n++
			if oldest == nil {
				oldest = o
			}
		}
	}
	if n >= maxPendingStrangers && oldest != nil {
		c.stats.drop(dropPendingStrangersFull)
		oldest.nack(c, codec.PacketKindRefuse)
		c.forgetPendingRole(oldest.b.role)
		c.event(EventRemoved, oldest.r)
	}
	c.pend(j)
}

// forgetPendingRole deletes the kept role of a stranger dropped while its
// keys were pending, unless a remote we know has that role.
func (c *Core) forgetPendingRole(role string) {
	for _, r := range c.roster.remotes {
		if r.role == role {
			return
		}
	}
	c.forgetPending(role)
}

// joinBody is a join request body, or with uid a response body, in the
// reference's key order, with our advertisement last.
func (c *Core) joinBody(response bool, uid uint32) packet.OrderedMap {
	b := packet.OrderedMap{
		{Key: "name", Value: c.local.name},
		{Key: "mode", Value: c.mode()},
		{Key: "kind", Value: int(c.cfg.Kind)},
	}
	if response {
		b = append(b, packet.KV{Key: "uid", Value: int64(uid)})
	}
	b = append(b,
		packet.KV{Key: "verhex", Value: c.local.signing.Verify.Hex()},
		packet.KV{Key: "pubhex", Value: c.local.box.Public.Hex()},
		packet.KV{Key: "role", Value: c.local.role})
	if k := c.ourCaps(); k != nil {
		b = append(b, packet.KV{Key: "caps", Value: k.body()})
	}
	return b
}

// mode is the operation mode byte: bit 0x01 says we are main.
func (c *Core) mode() int {
	if c.local.main {
		return 1
	}
	return 0
}

var errBadJoinBody = errors.New("invalid join body")

// intField is the join body field key, an integer from lo to hi.
func intField(m map[string]any, key string, lo, hi int64) (int64, error) {
	v, ok := intValue(m[key])
	if !ok || v < lo || v > hi {
		return 0, fmt.Errorf("%w: %s", errBadJoinBody, key)
	}
	return v, nil
}

// parseJoinBody checks a join body the way the reference does (§8.2); any
// missing or invalid field is an error.
func parseJoinBody(p *rxPacket, response bool) (joinBody, error) {
	ser, err := packet.Builtin(p.Head.BodyKind)
	if err != nil {
		return joinBody{}, err
	}
	var m map[string]any
	if err := ser.Unmarshal(p.Coat, &m); err != nil {
		return joinBody{}, err
	}
	var b joinBody
	var ok bool
	if b.name, ok = m["name"].(string); !ok || b.name == "" {
		return b, fmt.Errorf("%w: name", errBadJoinBody)
	}
	mode, err := intField(m, "mode", 0, 255)
	if err != nil {
		return b, err
	}
	b.main = mode&1 != 0
	kind, err := intField(m, "kind", 0, 255)
	if err != nil {
		return b, err
	}
	b.kind = uint8(kind)
	if response {
		uid, err := intField(m, "uid", 1, 0xffffffff)
		if err != nil {
			return b, err
		}
		b.uid = uint32(uid)
	}
	vh, _ := m["verhex"].(string)
	if b.verify, err = keys.ParseVerifyKey(vh); err != nil {
		return b, fmt.Errorf("%w: verhex: %v", errBadJoinBody, err)
	}
	ph, _ := m["pubhex"].(string)
	if b.pub, err = keys.ParsePublicKey(ph); err != nil {
		return b, fmt.Errorf("%w: pubhex: %v", errBadJoinBody, err)
	}
	if b.role, ok = m["role"].(string); !ok || b.role == "" {
		return b, fmt.Errorf("%w: role", errBadJoinBody)
	}
	if keep.CheckName(b.name) != nil || keep.CheckName(b.role) != nil {
		return b, fmt.Errorf("%w: name or role unusable", errBadJoinBody)
	}
	b.caps = parseCaps(m["caps"])
	return b, nil
}

// sameRoleKeys and sameAll compare a join body with what r holds.
func sameRoleKeys(r *remote, b *joinBody) bool {
	return b.role == r.role && b.verify.Equal(r.verify) && b.pub.Equal(r.pub)
}

func sameAll(r *remote, b *joinBody, from netip.AddrPort, fuid uint32) bool {
	return sameRoleKeys(r, b) && b.name == r.name && from == r.ha && fuid == r.fuid && b.main == r.main && b.kind == r.kind
}

// apply takes the body's identity into r (a mutable road's change).
func (c *Core) apply(r *remote, b *joinBody, from netip.AddrPort, fuid uint32) error {
	if b.name != r.name {
		if err := c.renameRemote(r, b.name); err != nil {
			return err
		}
	}
	r.ha, r.fuid, r.main, r.kind, r.role, r.verify, r.pub = from, fuid, b.main, b.kind, b.role, b.verify, b.pub
	c.markKeys(r)
	return nil
}

// --- joiner ----------------------------------------------------------------

// startJoiner starts a join with r unless one is in process.
func (c *Core) startJoiner(r *remote, cascade, renewal bool) {
	if len(r.inProcess(codec.TransactionKindJoin)) > 0 {
		return
	}
	j := &joiner{r: r, ti: r.nextTid(), se: r.nuid, de: r.fuid, vacuous: r.fuid == 0, renewal: renewal, cascade: cascade,
		timeout: after(c.now, c.cfg.JoinTimeout), redo: newRedo(time.Second, 4*time.Second)}
	r.joined = false
	body, err := c.marshal(c.joinBody(false, 0))
	if err != nil {
		c.log.Error("raet: join body", "err", err)
		return
	}
	j.send(c, codec.PacketKindRequest, body)
	if j.last == nil {
		c.failJoin(r, fmt.Errorf("cannot pack a join request"))
		return
	}
	c.addTxn(r, j)
	if j.vacuous {
		c.roster.joinees[r.ha] = r
	}
}

func (j *joiner) head(c *Core, pk codec.PacketKind) codec.Head {
	h := c.outHead(codec.TransactionKindJoin, pk, j.se, j.de, 0, j.ti, false)
	h.BodyKind = c.cfg.BodyKind
	return h
}

func (j *joiner) send(c *Core, pk codec.PacketKind, body []byte) {
	h := j.head(c, pk)
	if b := c.sendNew(j.r, &h, body, j.r.ha); b != nil {
		j.last, j.lastKind = b, pk
		j.redo.restart(c.now)
		c.wake.retime(j)
		if pk == codec.PacketKindRequest {
			j.tries++
		}
	}
}

func (j *joiner) remove(c *Core) {
	c.removeTxn(j.r, j)
	if j.vacuous && c.roster.joinees[j.r.ha] == j.r && j.r.numTxns() == 0 {
		delete(c.roster.joinees, j.r.ha)
	}
}

func (j *joiner) receive(c *Core, p *rxPacket) {
	if p.from != j.r.ha {
		c.stats.drop(dropJoinWrongSource) // the joinent answers from where we sent
		return
	}
	j.answered = true
	switch p.Head.PacketKind {
	case codec.PacketKindPend:
		why := ReasonPendingTheirs
		if bodyReason(p) == ReasonKeepBusy {
			why = ReasonKeepBusy // the main's keep is behind: it asks us to ask again
		}
		if !j.pended || j.pendWhy != why {
			j.pended, j.pendWhy = true, why
			j.timeout = after(c.now, c.cfg.PendTimeout)
			c.wake.retime(j)
			c.report(EventPending, c.nameOf(j.r), j.r.nuid, why, j.r.ha, c.hint(why, j.r.name))
		}
	case codec.PacketKindResponse:
		j.accept(c, p)
	case codec.PacketKindNack, codec.PacketKindRefuse:
		if j.pended && j.pendWhy == ReasonPendingTheirs && j.lastKind == codec.PacketKindRequest {
			j.askAgain(c)
			return
		}
		j.remove(c)
		c.failJoin(j.r, j.failure(c, ErrRefused))
	case codec.PacketKindRenew:
		j.renew(c)
	case codec.PacketKindReject:
		j.rejected(c, p)
	}
}

// renew starts a fresh vacuous join when the joinent does not know us: on
// a mutable road, or when it may never have seen our last join complete
// (unconfirmed: its joinent timed out before our ack and allow came, and
// it forgot us), since then there is nothing of ours it lost.
func (j *joiner) renew(c *Core) {
	j.remove(c)
	if !c.cfg.Mutable && !j.r.unconfirmed {
		c.report(EventRejected, j.r.name, j.r.nuid, ReasonUnknownToRemote, j.r.ha, c.hint(ReasonUnknownToRemote, j.r.name))
		c.failJoin(j.r, &JoinError{Reason: ReasonUnknownToRemote, Err: ErrRenewImmutable, Hint: c.hint(ReasonUnknownToRemote, j.r.name)})
		return
	}
	j.r.fuid = 0 // a fresh vacuous join
	c.saveRemote(j.r, false)
	c.startJoiner(j.r, j.cascade, true)
}

// askAgain answers a nack or refuse of a join the joinent pended: the
// reference's joinent ends a pended join after its 5 s (JoinentTimeout,
// §13) with a nack while its operator decides, and it refuses a request
// that crossed another join; after an accept it answers only a new request.
// So the joiner asks again, with a new join of its own id, at the next pend
// redo, and waits on until its PendTimeout (the timeout set at the pend).
func (j *joiner) askAgain(c *Core) {
	c.removeTxn(j.r, j)
	j.ti = j.r.nextTid()
	j.last = nil
	j.redo.cur = min(pendRedo, c.cfg.PendTimeout)
	j.redo.restart(c.now)
	c.addTxn(j.r, j)
}

// adopt gives the remote of a vacuous join the uid the main's response
// gives it and, unless the join renews a session, the name and keys it
// offers. It reports false after failing the join.
func (j *joiner) adopt(c *Core, b *joinBody) bool {
	r := j.r
	r.fuid = b.uid
	if j.renewal {
		return true
	}
	if b.name != r.name {
		if o := c.roster.byName[b.name]; o != nil && o != r {
			j.nack(c, codec.PacketKindReject)
			c.failJoin(r, &JoinError{Reason: ReasonNameTaken, Err: ErrRejected,
				Hint: fmt.Sprintf("this estate knows another %q: raet keys forget --keep %s %s", b.name, c.keepArg(), b.name)})
			return false
		}
		if err := c.renameRemote(r, b.name); err != nil {
			j.remove(c)
			c.failJoin(r, err)
			return false
		}
	}
	r.main, r.kind, r.role, r.verify, r.pub = b.main, b.kind, b.role, b.verify, b.pub
	c.markKeys(r)
	return true
}

func (j *joiner) accept(c *Core, p *rxPacket) {
	b, err := parseJoinBody(p, true)
	if err != nil {
		c.stats.drop(dropJoinBody)
		j.remove(c)
		c.failJoin(j.r, err)
		return
	}
	r := j.r
	if j.vacuous && !j.adopt(c, &b) {
		return
	}
	sameKeys := sameRoleKeys(r, &b)
	if !sameAll(r, &b, p.from, b.uid) && !c.cfg.Mutable {
		why := mismatch(r, &b, p.from)
		if why == ReasonNameTaken {
			why = ReasonMainKeysChanged
		}
		j.nack(c, codec.PacketKindReject)
		c.report(EventRejected, r.name, r.nuid, why, r.ha, c.hint(why, r.name))
		c.failJoin(r, &JoinError{Reason: why, Err: ErrRejected, Hint: c.hint(why, r.name)})
		return
	}
	status, why, err := c.trustMain(&b, p.from)
	if err != nil {
		c.log.Error("raet: key status", "role", b.role, "err", err)
		status, why = keep.Rejected, ReasonKeysRejected
	}
	if status != keep.Accepted { // trustMain never pends
		c.report(EventRejected, r.name, r.nuid, why, r.ha, c.hint(why, r.name))
		if sameKeys {
			j.remove(c)
			c.failJoin(r, &JoinError{Reason: why, Err: ErrRejected, Hint: c.hint(why, r.name)})
			c.removeRemote(r, ErrRejected)
		} else {
			j.nack(c, codec.PacketKindReject)
			c.failJoin(r, &JoinError{Reason: why, Err: ErrRejected, Hint: c.hint(why, r.name)})
		}
		return
	}
	if err := c.apply(r, &b, p.from, b.uid); err != nil {
		j.nack(c, codec.PacketKindReject)
		c.failJoin(r, err)
		return
	}
	r.peerCaps = c.shareCaps(b.caps)
	j.completify(c)
}

// joined completes a join on either side: the first session starts (sid
// 0 → 1) and both estates are kept. A vacuous join may come from a remote
// that lost its keep and counts its sessions from 1 again: the reference
// resets rsid here; we only note it, for the next allow, which is
// authenticated, to act on (see route and allowed).
func (c *Core) joined(r *remote, vacuous bool) {
	if r.sid == 0 {
		r.nextSid()
		c.replaceStaleInitiators(r)
	}
	if vacuous {
		r.sessionReset = true
	}
	r.joined = true
	r.answered = nil
	r.capsFresh = true
	// Kept with the session the allow that follows makes, so that the
	// allow need not write the estate again (allowed): on a main that
	// joins many, one file a join instead of a second one that replaces
	// it. A restart counts on from the kept session, past every one used.
	r.keptSid = sidAfter(r.sid)
	c.saveRemote(r, true) // the allow that follows, or our ack, waits for it
}

func (j *joiner) completify(c *Core) {
	r := j.r
	c.joined(r, j.vacuous)
	if j.vacuous {
		r.unconfirmed = true // until a session is allowed
	}
	j.send(c, codec.PacketKindAck, nil)
	r.joinAck, r.joinAckTi = j.last, j.ti
	j.remove(c)
	c.event(EventJoined, r)
	if j.cascade {
		c.startAllower(r, true)
	} else {
		c.notifyWaiters(r, nil)
	}
}

func (j *joiner) nack(c *Core, pk codec.PacketKind) {
	j.send(c, pk, nil)
	j.remove(c)
}

func (j *joiner) abort(c *Core, pk codec.PacketKind) {
	j.nack(c, pk)
	c.failJoin(j.r, ErrSessionChanged)
}

func (j *joiner) tick(c *Core) {
	if j.timeout.due(c.now) {
		j.remove(c)
		c.failJoin(j.r, j.failure(c, ErrTimeout))
		return
	}
	if !j.redo.due(c.now) || j.lastKind != codec.PacketKindRequest {
		return
	}
	if j.last == nil { // the joinent ended our pended join: a new one (askAgain)
		body, err := c.marshal(c.joinBody(false, 0))
		if err == nil {
			j.send(c, codec.PacketKindRequest, body)
		}
		if j.last == nil {
			j.remove(c)
			c.failJoin(j.r, fmt.Errorf("cannot pack a join request"))
		}
		return
	}
	if j.pended { // by the joinent: ask again now and then
		j.redo.cur = min(pendRedo, c.cfg.PendTimeout)
		j.redo.restart(c.now)
		c.wake.retime(j)
	} else {
		j.redo.backoff(c.now)
		c.wake.retime(j)
	}
	c.retransmit(j.last, j.r.ha)
	j.tries++
}

// failJoin ends the Join calls waiting on r; a remote that never answered
// is named by its address.
func (c *Core) failJoin(r *remote, err error) {
	if je, ok := err.(*JoinError); ok {
		je.Addr = r.ha
		if r.fuid != 0 {
			je.Remote = r.name
		}
	}
	c.notifyWaiters(r, &TxnError{Txn: "join", Remote: c.nameOf(r), Err: err})
}

// --- joinent ---------------------------------------------------------------

func (c *Core) startJoinent(p *rxPacket, r *remote) {
	j := &joinent{r: r, ti: p.Head.TransactionID, from: p.from, se: p.Head.DestinationID, de: p.Head.SourceID,
		timeout: after(c.now, c.cfg.JoinentTimeout), redo: newRedo(100*time.Millisecond, 2*time.Second)}
	j.redo.cur = 0
	j.join(c, p)
}

func (j *joinent) send(c *Core, pk codec.PacketKind, body []byte) {
	h := c.outHead(codec.TransactionKindJoin, pk, j.se, j.de, 0, j.ti, true)
	h.BodyKind = c.cfg.BodyKind
	if b := c.sendNew(j.r, &h, body, j.from); b != nil {
		j.last, j.lastKind = b, pk
		j.redo.restart(c.now)
		c.wake.retime(j)
	}
}

func (j *joinent) remove(c *Core) {
	c.removeTxn(j.r, j)
	c.unpend(j)
	if j.vacuous && c.roster.joinees[j.from] == j.r && j.r.numTxns() == 0 {
		delete(c.roster.joinees, j.from)
	}
	if j.added {
		j.added = false
		c.kept.strangers--
		if !j.r.joined && j.r.answered != j {
			c.removeRemote(j.r, ErrTimeout)
		}
	}
}

// nack answers the joiner with pk (to the address it wrote from) and ends.
func (j *joinent) nack(c *Core, pk codec.PacketKind) {
	h := c.outHead(codec.TransactionKindJoin, pk, j.se, j.de, 0, j.ti, true)
	h.BodyKind = c.cfg.BodyKind
	c.sendNew(j.r, &h, nil, j.from)
	j.remove(c)
}

func (j *joinent) abort(c *Core, pk codec.PacketKind) { j.nack(c, pk) }

func (j *joinent) receive(c *Core, p *rxPacket) {
	if p.from != j.from {
		c.stats.drop(dropJoinWrongSource)
		return
	}
	switch p.Head.PacketKind {
	case codec.PacketKindRequest:
		j.join(c, p)
	case codec.PacketKindPend:
		// The joiner's keep pends our keys: it asks again until its
		// operator decides, and our timer waits for it.
		j.pended = true
		j.redo.at = time.Time{}
		c.wake.retime(j)
	case codec.PacketKindAck:
		j.complete(c)
	case codec.PacketKindNack:
		// A nack of our response sent again: the reference's joiner
		// completed its join when it sent its ack (lost), and answers
		// what comes after with a stale nack. Or it gave up.
		j.unacked(c)
		j.remove(c)
	case codec.PacketKindRefuse, codec.PacketKindReject:
		// The joiner gives up (a reject: it refuses our keys); a remote
		// we knew stays as it was.
		j.remove(c)
	}
}

// unacked ends a joinent whose accept went and was answered by a nack, not
// an ack: the reference's joiner holds the join complete once it sent its
// ack, and answers our response sent again (its ack lost) with a stale
// nack; it allows next, naming the uid our response gave. The remote is
// kept (not joined; the reference's joinent keeps it too), and its first
// signed hello completes the join (completeAnswered) as the ack would
// have. A joiner that gave up instead joins again, by name. A stranger
// that says nothing is still forgotten at the timeout.
func (j *joinent) unacked(c *Core) {
	if j.lastKind == codec.PacketKindResponse && !j.r.joined {
		j.r.answered = j
	}
}

// completeAnswered completes, at r's first signed hello, the join whose
// ack was lost (unacked): the hello names the uid only our response gave,
// under the keys of the request our keep accepted.
func (c *Core) completeAnswered(r *remote) {
	j := r.answered
	r.answered = nil
	if j == nil || r.joined || !r.added {
		return
	}
	if j.finish(c) == nil {
		c.event(EventJoined, r)
	}
}

func (j *joinent) join(c *Core, p *rxPacket) {
	b, err := parseJoinBody(p, false)
	if err != nil {
		c.stats.drop(dropJoinBody)
		if _, serr := packet.SerializerFor(p.Head.BodyKind); serr != nil {
			j.reject(c, ReasonBodyKind, nil) // the joiner learns why
			return
		}
		j.remove(c)
		return
	}
	j.vacuous = p.Head.DestinationID == 0
	reid := p.Head.SourceID
	r := j.r
	if r.txn(j.key()) == txn(j) {
		return // a duplicate request
	}
	target := r
	if known := c.roster.byName[b.name]; j.vacuous && known != nil {
		target = known
	}
	if !c.joinBudget(target, p.from) {
		c.stats.drop(dropJoinBudget)
		return
	}
	if !j.contend(c, p, &b) {
		return
	}
	r, ok := j.bind(c, p, &b, target, reid)
	if !ok {
		return
	}
	sameKeys := sameRoleKeys(r, &b)
	same := sameAll(r, &b, p.from, reid)
	if !same && !c.cfg.Mutable {
		j.reject(c, mismatch(r, &b, p.from), &b)
		return
	}
	if o := c.roster.byName[b.name]; !same && o != nil && o != r {
		j.reject(c, ReasonNameTaken, &b) // the new name is another remote's
		return
	}
	if c.keepBusy(!r.added) {
		j.busy(c, &b)
		return
	}
	status, ok := j.keyStatus(c, p, &b, r, sameKeys)
	if !ok {
		return
	}
	j.b, j.reid, j.change = b, reid, !same
	j.admit(c, r, status)
}

// contend settles j against the other joins of its remote under way: ours
// (the vacuous one, or the one of the estate named first, goes on) and an
// older joinent from the same joiner (which j replaces). It reports false
// after refusing j.
func (j *joinent) contend(c *Core, p *rxPacket, b *joinBody) bool {
	for _, t := range j.r.inProcess(codec.TransactionKindJoin) {
		if other, ok := t.(*joiner); ok {
			switch {
			case j.vacuous && !other.vacuous:
				j.nack(c, codec.PacketKindRefuse)
				return false
			case !j.vacuous && other.vacuous:
				other.nack(c, codec.PacketKindRefuse)
			case c.local.name < b.name:
				j.nack(c, codec.PacketKindRefuse)
				return false
			default:
				other.nack(c, codec.PacketKindRefuse)
			}
			continue
		}
		if old, ok := t.(*joinent); ok && old.from == p.from && old.de == p.Head.SourceID {
			// The joiner started another join: it gave up on this one,
			// whose answer it never got. The new one takes its place, and
			// the stranger it was (if it was).
			j.added, old.added = old.added, false
			old.remove(c)
			continue
		}
		j.nack(c, codec.PacketKindRefuse) // another joinent already
		return false
	}
	return true
}

// bind finds the remote j joins as: for a vacuous join, target (the
// estate of that name we know) or j's new remote, which takes the name and
// keys offered; otherwise j's, which the request must name. It reports
// false after rejecting j.
func (j *joinent) bind(c *Core, p *rxPacket, b *joinBody, target *remote, reid uint32) (*remote, bool) {
	r := j.r
	if !j.vacuous {
		if c.roster.remotes[p.Head.DestinationID] != r {
			j.reject(c, ReasonIdentityChanged, b)
			return nil, false
		}
		return r, true
	}
	if !c.local.main {
		j.reject(c, ReasonNotMain, b)
		return nil, false
	}
	if target != r {
		j.r = target
		return target, true
	}
	// A new estate, or our own vacuous joiner's remote (both sides
	// joining at once), not joined yet: it takes the name and keys
	// offered.
	if err := c.renameRemote(r, b.name); err != nil {
		j.reject(c, ReasonNameTaken, b)
		return nil, false
	}
	r.main, r.kind, r.role, r.verify, r.pub = b.main, b.kind, b.role, b.verify, b.pub
	c.markKeys(r)
	if r.fuid != reid {
		if r.fuid != 0 {
			j.reject(c, ReasonIdentityChanged, b)
			return nil, false
		}
		r.fuid = reid
	}
	return r, true
}

// keyStatus is our keep's acceptance of the keys j's request offers for
// r. It reports false after rejecting j, or removing r when our operator
// rejected the keys it was joined with.
func (j *joinent) keyStatus(c *Core, p *rxPacket, b *joinBody, r *remote, sameKeys bool) (keep.Acceptance, bool) {
	status, err := c.statusRole(c.cfg.Auto, b.role, b.verify, b.pub, j.from)
	if err != nil {
		c.log.Error("raet: key status", "role", b.role, "err", err)
		status = keep.Rejected
	}
	if status != keep.Rejected {
		return status, true
	}
	if sameKeys && r.added {
		c.report(EventRejected, r.name, r.nuid, ReasonKeysRejected, p.from, c.hint(ReasonKeysRejected, r.name))
		c.removeRemote(r, ErrRejected)
	} else {
		j.reject(c, ReasonKeysRejected, b)
	}
	return status, false
}

// admit adds j to r: acked at once when its keys are accepted, else
// pended for our operator's decision.
func (j *joinent) admit(c *Core, r *remote, status keep.Acceptance) {
	c.addTxn(r, j)
	if j.vacuous {
		c.roster.joinees[j.from] = r // r.ha on all but a mutable road's move
	}
	if status == keep.Accepted {
		j.redo.backoff(c.now)
		c.wake.retime(j)
		j.ackAccept(c)
		return
	}
	c.saveRemote(r, false) // a remote we know; nothing is kept for a stranger
	j.pended = true
	j.timeout = after(c.now, c.cfg.PendTimeout)
	c.wake.retime(j)
	c.report(EventPending, r.name, r.nuid, ReasonPendingOurs, j.from, c.hint(ReasonPendingOurs, r.name))
	j.send(c, codec.PacketKindPend, nil)
	j.redo.at = time.Time{} // the pend timer decides now
	if r.added {
		c.pend(j)
	} else {
		c.pendStranger(j)
	}
}

// busy answers a join that must wait for the keep (keepBusy) with a pend
// that says so (in its body, to a raet-go joiner, which asks again a second
// later), and ends it: nothing is kept of it.
func (j *joinent) busy(c *Core, b *joinBody) {
	c.stats.drop(dropKeepBusy)
	c.report(EventPending, b.name, j.r.nuid, ReasonKeepBusy, j.from, c.keepBusyHint())
	h := c.outHead(codec.TransactionKindJoin, codec.PacketKindPend, j.se, j.de, 0, j.ti, true)
	h.BodyKind = codec.BodyKindJSON
	c.sendNew(j.r, &h, c.rejectBody(ReasonKeepBusy, b), j.from)
	j.remove(c)
}

// joinBudget says whether a join request from `from` for remote r may be
// served: a remote we know, at its address, has its own budget; anyone else
// is a stranger.
func (c *Core) joinBudget(r *remote, from netip.AddrPort) bool {
	if r.added && r.ha == from {
		return r.joins.take(c.now, joinRate, joinBurst)
	}
	if c.kept.strangers >= c.cfg.StrangerJoins {
		return false // as many strangers' joins under way as we take
	}
	return c.lim.stranger(c.now, from.Addr(), c.cfg.StrangerJoinRate)
}

// ackAccept answers a request whose keys are accepted: a stranger becomes a
// remote now (its next packets, signed, name its new uid), to be forgotten
// if its join does not complete.
func (j *joinent) ackAccept(c *Core) {
	r := j.r
	if !r.added {
		if o := c.roster.byName[r.name]; o != nil {
			j.reject(c, ReasonNameTaken, &j.b)
			return
		}
		c.addRemote(r)
		c.schedulePresence(r, true)
		j.added = true
		c.kept.strangers++
	}
	body, err := c.marshal(c.joinBody(true, r.nuid))
	if err != nil {
		j.remove(c)
		return
	}
	j.send(c, codec.PacketKindResponse, body)
}

// complete ends the join when the joiner acknowledges our response. An ack
// of anything else (a pend: the keys wait for an operator) completes
// nothing: only accepted keys join.
func (j *joinent) complete(c *Core) {
	if j.lastKind != codec.PacketKindResponse {
		c.stats.drop(dropJoinAckUnaccepted)
		return
	}
	if err := j.finish(c); err != nil {
		j.reject(c, ReasonNameTaken, &j.b)
		return
	}
	j.remove(c)
	c.event(EventJoined, j.r)
}

// finish makes the remote joined, with what the request offered.
func (j *joinent) finish(c *Core) error {
	r := j.r
	if j.change {
		if err := c.apply(r, &j.b, j.from, j.reid); err != nil {
			return err
		}
	}
	r.peerCaps = c.shareCaps(j.b.caps)
	c.joined(r, j.vacuous)
	c.awaitAllow(r) // the joiner allows next
	return nil
}

func (j *joinent) tick(c *Core) {
	if j.timeout.due(c.now) {
		j.nack(c, codec.PacketKindNack)
		return
	}
	if j.pended || !j.redo.due(c.now) {
		return
	}
	j.redo.backoff(c.now)
	c.wake.retime(j)
	if j.lastKind == codec.PacketKindResponse {
		c.retransmit(j.last, j.from)
	}
}

// decided takes our operator's decision (accepted or rejected).
func (j *joinent) decided(c *Core, status keep.Acceptance) {
	if status == keep.Accepted {
		j.pended = false
		j.timeout = after(c.now, c.cfg.JoinentTimeout)
		c.wake.retime(j)
		j.ackAccept(c)
		return
	}
	r := j.r
	if r.added {
		c.report(EventRejected, r.name, r.nuid, ReasonKeysRejected, j.from, c.hint(ReasonKeysRejected, r.name))
		j.remove(c)
		c.removeRemote(r, ErrRejected)
		return
	}
	j.reject(c, ReasonKeysRejected, &j.b)
	c.event(EventRemoved, r) // the pended stranger is forgotten
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
