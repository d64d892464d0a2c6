package road

import (
	"errors"
	"fmt"
	"net/netip"
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

// pendRedo is how often a pended join re-reads the keep for an operator's
// decision (the reference: every 60 s).
const pendRedo = time.Second

// joinBody is a join request or response body.
type joinBody struct {
	caps   *caps // the raet-go advertisement; nil when absent
	name   string
	main   bool
	kind   uint8
	uid    uint32 // responses only
	verify keys.VerifyKey
	pub    keys.PublicKey
	role   string
}

// joinBody is a join request body, or with uid a response body, in the
// reference's key order, with our advertisement last.
func (c *core) joinBody(response bool, uid uint32) packet.OrderedMap {
	b := packet.OrderedMap{
		{Key: "name", Value: c.name},
		{Key: "mode", Value: c.mode()},
		{Key: "kind", Value: int(c.cfg.Kind)},
	}
	if response {
		b = append(b, packet.KV{Key: "uid", Value: int64(uid)})
	}
	b = append(b,
		packet.KV{Key: "verhex", Value: c.signing.Verify.Hex()},
		packet.KV{Key: "pubhex", Value: c.box.Public.Hex()},
		packet.KV{Key: "role", Value: c.role})
	if k := c.ourCaps(); k != nil {
		b = append(b, packet.KV{Key: "caps", Value: k.body()})
	}
	return b
}

// mode is the operation mode byte: bit 0x01 says we are main.
func (c *core) mode() int {
	if c.mainFlag {
		return 1
	}
	return 0
}

var errBadJoinBody = errors.New("invalid join body")

// parseJoinBody checks a join body the way the reference does (§8.2); any
// missing or invalid field is an error.
func parseJoinBody(p *rxPacket, response bool) (joinBody, error) {
	ser, err := packet.SerializerFor(p.Head.BodyKind)
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
	mode, ok := intValue(m["mode"])
	if !ok || mode < 0 || mode > 255 {
		return b, fmt.Errorf("%w: mode", errBadJoinBody)
	}
	b.main = mode&1 != 0
	kind, ok := intValue(m["kind"])
	if !ok || kind < 0 || kind > 255 {
		return b, fmt.Errorf("%w: kind", errBadJoinBody)
	}
	b.kind = uint8(kind)
	if response {
		uid, ok := intValue(m["uid"])
		if !ok || uid <= 0 || uid > 0xffffffff {
			return b, fmt.Errorf("%w: uid", errBadJoinBody)
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

func intValue(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case uint64:
		if x <= 1<<62 {
			return int64(x), true
		}
	case int:
		return int64(x), true
	}
	return 0, false
}

// sameRoleKeys and sameAll compare a join body with what r holds.
func sameRoleKeys(r *remote, b *joinBody) bool {
	return b.role == r.role && b.verify.Equal(r.verify) && b.pub.Equal(r.pub)
}

func sameAll(r *remote, b *joinBody, from netip.AddrPort, fuid uint32) bool {
	return sameRoleKeys(r, b) && b.name == r.name && from == r.ha && fuid == r.fuid && b.main == r.main && b.kind == r.kind
}

// apply takes the body's identity into r (a mutable road's change).
func (c *core) apply(r *remote, b *joinBody, from netip.AddrPort, fuid uint32) error {
	if b.name != r.name {
		if err := c.renameRemote(r, b.name); err != nil {
			return err
		}
	}
	r.ha, r.fuid, r.main, r.kind, r.role, r.verify, r.pub = from, fuid, b.main, b.kind, b.role, b.verify, b.pub
	c.keysChanged = true
	return nil
}

// --- joiner ----------------------------------------------------------------

type joiner struct {
	r        *remote
	ti       uint32
	se, de   uint32 // fixed at the start: every packet carries the request's uids
	vacuous  bool
	renewal  bool
	cascade  bool
	pended   bool
	timeout  expiry
	redo     redo
	last     []byte
	lastKind codec.PacketKind
}

func (j *joiner) kind() codec.TransactionKind { return codec.TransactionKindJoin }
func (j *joiner) key() txnKey                 { return txnKey{si: 0, ti: j.ti} }
func (j *joiner) deadline() time.Time         { return earliest(time.Time(j.timeout), j.redo.at) }

// startJoiner starts a join with r unless one is in process.
func (c *core) startJoiner(r *remote, cascade, renewal bool) {
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
		c.joinees[r.ha] = r
	}
}

func (j *joiner) head(c *core, pk codec.PacketKind) codec.Head {
	h := c.outHead(codec.TransactionKindJoin, pk, j.se, j.de, 0, j.ti, false)
	h.BodyKind = c.cfg.BodyKind
	return h
}

func (j *joiner) send(c *core, pk codec.PacketKind, body []byte) {
	h := j.head(c, pk)
	if b := c.sendNew(j.r, &h, body, j.r.ha); b != nil {
		j.last, j.lastKind = b, pk
		j.redo.restart(c.now)
	}
}

func (j *joiner) remove(c *core) {
	c.removeTxn(j.r, j)
	if j.vacuous && c.joinees[j.r.ha] == j.r && len(j.r.txns) == 0 {
		delete(c.joinees, j.r.ha)
	}
}

func (j *joiner) receive(c *core, p *rxPacket) {
	switch p.Head.PacketKind {
	case codec.PacketKindPend:
		if !j.pended {
			j.pended = true
			j.timeout = after(c.now, c.cfg.PendTimeout)
			c.event(EventPending, j.r)
		}
	case codec.PacketKindResponse:
		j.accept(c, p)
	case codec.PacketKindNack, codec.PacketKindRefuse:
		j.remove(c)
		c.failJoin(j.r, ErrRefused)
	case codec.PacketKindRenew:
		j.renew(c)
	case codec.PacketKindReject:
		j.remove(c)
		c.event(EventRejected, j.r)
		c.removeRemote(j.r, ErrRejected)
	}
}

func (j *joiner) renew(c *core) {
	j.remove(c)
	if !c.cfg.Mutable {
		c.failJoin(j.r, ErrRenewImmutable)
		return
	}
	j.r.fuid = 0 // a fresh vacuous join
	c.saveRemote(j.r)
	c.startJoiner(j.r, j.cascade, true)
}

func (j *joiner) accept(c *core, p *rxPacket) {
	b, err := parseJoinBody(p, true)
	if err != nil {
		c.stats.drop("join_body")
		j.remove(c)
		c.failJoin(j.r, err)
		return
	}
	r := j.r
	if j.vacuous {
		r.fuid = b.uid
		if !j.renewal {
			if b.name != r.name {
				if o := c.byName[b.name]; o != nil && o != r {
					j.nack(c, codec.PacketKindReject)
					c.failJoin(r, fmt.Errorf("%w: name %q is already a remote", ErrRejected, b.name))
					return
				}
				if err := c.renameRemote(r, b.name); err != nil {
					j.remove(c)
					c.failJoin(r, err)
					return
				}
			}
			r.main, r.kind, r.role, r.verify, r.pub = b.main, b.kind, b.role, b.verify, b.pub
			c.keysChanged = true
		}
	}
	sameKeys := sameRoleKeys(r, &b)
	if !sameAll(r, &b, p.from, b.uid) && !c.cfg.Mutable {
		j.nack(c, codec.PacketKindReject)
		c.failJoin(r, fmt.Errorf("%w: the remote's identity changed on an immutable road", ErrRejected))
		return
	}
	status, err := c.store.statusRole(b.role, b.verify, b.pub)
	if err != nil {
		c.log.Error("raet: key status", "role", b.role, "err", err)
		status = keep.Rejected
	}
	if status == keep.Rejected {
		c.event(EventRejected, r)
		if sameKeys {
			j.remove(c)
			c.removeRemote(r, ErrRejected)
		} else {
			j.nack(c, codec.PacketKindReject)
			c.failJoin(r, ErrRejected)
		}
		return
	}
	if err := c.apply(r, &b, p.from, b.uid); err != nil {
		j.nack(c, codec.PacketKindReject)
		c.failJoin(r, err)
		return
	}
	r.peerCaps = b.caps
	if status == keep.Accepted {
		j.completify(c)
		return
	}
	c.saveRemote(r)
	j.pended = true
	j.timeout = after(c.now, c.cfg.PendTimeout)
	c.event(EventPending, r)
	j.send(c, codec.PacketKindPend, nil)
}

// joined completes a join on either side: the first session starts (sid
// 0 → 1), a vacuous join resets the remote's session, and both estates are
// kept.
func (c *core) joined(r *remote, vacuous bool) {
	if r.sid == 0 {
		r.nextSid()
		c.replaceStaleInitiators(r)
	}
	if vacuous {
		r.rsid = 0
	}
	r.joined = true
	r.capsFresh = true
	c.saveRemote(r)
	c.saveLocal()
}

func (j *joiner) completify(c *core) {
	r := j.r
	c.joined(r, j.vacuous)
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

func (j *joiner) nack(c *core, pk codec.PacketKind) {
	j.send(c, pk, nil)
	j.remove(c)
}

func (j *joiner) abort(c *core, pk codec.PacketKind) {
	j.nack(c, pk)
	c.failJoin(j.r, ErrSessionChanged)
}

func (j *joiner) tick(c *core) {
	if j.timeout.due(c.now) {
		j.remove(c)
		c.failJoin(j.r, ErrTimeout)
		return
	}
	if !j.redo.due(c.now) {
		return
	}
	if j.pended {
		j.redo.cur = min(pendRedo, c.cfg.PendTimeout)
		j.redo.restart(c.now)
	} else {
		j.redo.backoff(c.now)
	}
	if j.lastKind == codec.PacketKindRequest {
		c.retransmit(j.last, j.r.ha)
		return
	}
	switch status, _, err := c.store.roleStatus(j.r.role); {
	case err != nil:
	case status == keep.Accepted:
		j.completify(c)
	case status == keep.Rejected:
		j.remove(c)
		c.event(EventRejected, j.r)
		c.removeRemote(j.r, ErrRejected)
	}
}

// failJoin ends the Join calls waiting on r.
func (c *core) failJoin(r *remote, err error) {
	c.notifyWaiters(r, &TxnError{Txn: "join", Remote: r.name, Err: err})
}

// --- joinent ---------------------------------------------------------------

type joinent struct {
	r        *remote
	ti       uint32
	from     netip.AddrPort
	se, de   uint32 // the head values we send: the request's de and se
	vacuous  bool
	pended   bool
	added    bool
	timeout  expiry
	redo     redo
	last     []byte
	lastKind codec.PacketKind
}

func (j *joinent) kind() codec.TransactionKind { return codec.TransactionKindJoin }
func (j *joinent) key() txnKey                 { return txnKey{rf: true, si: 0, ti: j.ti} }
func (j *joinent) deadline() time.Time         { return earliest(time.Time(j.timeout), j.redo.at) }

func (c *core) startJoinent(p *rxPacket, r *remote) {
	j := &joinent{r: r, ti: p.Head.TransactionID, from: p.from, se: p.Head.DestinationID, de: p.Head.SourceID,
		timeout: after(c.now, c.cfg.JoinentTimeout), redo: newRedo(100*time.Millisecond, 2*time.Second)}
	j.redo.cur = 0
	j.join(c, p)
}

func (j *joinent) send(c *core, pk codec.PacketKind, body []byte) {
	h := c.outHead(codec.TransactionKindJoin, pk, j.se, j.de, 0, j.ti, true)
	h.BodyKind = c.cfg.BodyKind
	if b := c.sendNew(j.r, &h, body, j.from); b != nil {
		j.last, j.lastKind = b, pk
		j.redo.restart(c.now)
	}
}

func (j *joinent) remove(c *core) {
	c.removeTxn(j.r, j)
	if j.vacuous && c.joinees[j.r.ha] == j.r && len(j.r.txns) == 0 {
		delete(c.joinees, j.r.ha)
	}
}

// nack answers the joiner with pk (to the address it wrote from) and ends.
func (j *joinent) nack(c *core, pk codec.PacketKind) {
	h := c.outHead(codec.TransactionKindJoin, pk, j.se, j.de, 0, j.ti, true)
	h.BodyKind = c.cfg.BodyKind
	c.sendNew(j.r, &h, nil, j.from)
	j.remove(c)
}

func (j *joinent) abort(c *core, pk codec.PacketKind) { j.nack(c, pk) }

func (j *joinent) receive(c *core, p *rxPacket) {
	switch p.Head.PacketKind {
	case codec.PacketKindRequest:
		j.join(c, p)
	case codec.PacketKindPend:
		j.pended = true
	case codec.PacketKindAck:
		j.complete(c)
	case codec.PacketKindNack, codec.PacketKindRefuse:
		j.remove(c)
	case codec.PacketKindReject:
		j.remove(c)
		c.removeRemote(j.r, ErrRejected)
	}
}

func (j *joinent) join(c *core, p *rxPacket) {
	b, err := parseJoinBody(p, false)
	if err != nil {
		c.stats.drop("join_body")
		j.remove(c)
		return
	}
	j.vacuous = p.Head.DestinationID == 0
	reid := p.Head.SourceID
	r := j.r
	for _, t := range r.inProcess(codec.TransactionKindJoin) {
		if t == txn(j) {
			return // a duplicate request
		}
		if other, ok := t.(*joiner); ok {
			switch {
			case j.vacuous && !other.vacuous:
				j.nack(c, codec.PacketKindRefuse)
				return
			case !j.vacuous && other.vacuous:
				other.nack(c, codec.PacketKindRefuse)
			case c.name < b.name:
				j.nack(c, codec.PacketKindRefuse)
				return
			default:
				other.nack(c, codec.PacketKindRefuse)
			}
			continue
		}
		j.nack(c, codec.PacketKindRefuse) // another joinent already
		return
	}
	if j.vacuous {
		if !c.mainFlag {
			j.nack(c, codec.PacketKindReject)
			return
		}
		if known := c.byName[b.name]; known != nil {
			r = known
			j.r = r
		} else {
			// A new estate, or our own vacuous joiner's remote (both sides
			// joining at once): it takes the name and keys offered.
			if err := c.renameRemote(r, b.name); err != nil {
				j.nack(c, codec.PacketKindReject)
				return
			}
			r.main, r.kind, r.role, r.verify, r.pub = b.main, b.kind, b.role, b.verify, b.pub
			c.keysChanged = true
			if r.fuid != reid {
				if r.fuid != 0 {
					j.nack(c, codec.PacketKindReject)
					return
				}
				r.fuid = reid
			}
		}
	} else if c.remotes[p.Head.DestinationID] != r {
		j.nack(c, codec.PacketKindReject)
		return
	}
	sameKeys := sameRoleKeys(r, &b)
	same := sameAll(r, &b, p.from, reid)
	if !same && !c.cfg.Mutable {
		c.event(EventRejected, r)
		j.nack(c, codec.PacketKindReject)
		return
	}
	status, err := c.store.statusRole(b.role, b.verify, b.pub)
	if err != nil {
		c.log.Error("raet: key status", "role", b.role, "err", err)
		status = keep.Rejected
	}
	if status == keep.Rejected {
		c.event(EventRejected, r)
		if sameKeys && r.added {
			c.removeRemote(r, ErrRejected)
		} else {
			j.nack(c, codec.PacketKindReject)
		}
		return
	}
	if same {
		if !r.added {
			if o := c.byName[r.name]; o != nil {
				j.nack(c, codec.PacketKindReject)
				return
			}
			c.addRemote(r)
			c.schedulePresence(r, true)
		}
	} else {
		if o := c.byName[b.name]; o != nil && o != r {
			j.nack(c, codec.PacketKindReject)
			return
		}
		if err := c.apply(r, &b, p.from, reid); err != nil {
			j.nack(c, codec.PacketKindReject)
			return
		}
	}
	c.addTxn(r, j)
	if j.vacuous {
		c.joinees[r.ha] = r
	}
	r.joined = false
	r.peerCaps = b.caps
	if status == keep.Accepted {
		j.redo.backoff(c.now)
		j.ackAccept(c)
		return
	}
	c.saveRemote(r)
	j.pended = true
	j.timeout = after(c.now, c.cfg.PendTimeout)
	c.event(EventPending, r)
	j.send(c, codec.PacketKindPend, nil)
}

func (j *joinent) ackAccept(c *core) {
	body, err := c.marshal(c.joinBody(true, j.r.nuid))
	if err != nil {
		j.remove(c)
		return
	}
	j.send(c, codec.PacketKindResponse, body)
}

func (j *joinent) complete(c *core) {
	c.joined(j.r, j.vacuous)
	j.remove(c)
	c.event(EventJoined, j.r)
}

func (j *joinent) tick(c *core) {
	if j.timeout.due(c.now) {
		j.nack(c, codec.PacketKindNack)
		return
	}
	if !j.redo.due(c.now) {
		return
	}
	if j.pended {
		j.redo.cur = min(pendRedo, c.cfg.PendTimeout)
		j.redo.restart(c.now)
	} else {
		j.redo.backoff(c.now)
	}
	if j.lastKind == codec.PacketKindResponse {
		c.retransmit(j.last, j.from)
		return
	}
	switch status, _, err := c.store.roleStatus(j.r.role); {
	case err != nil:
	case status == keep.Accepted:
		j.pended = false
		j.timeout = after(c.now, c.cfg.JoinentTimeout)
		j.ackAccept(c)
	case status == keep.Rejected:
		j.remove(c)
		c.event(EventRejected, j.r)
		c.removeRemote(j.r, ErrRejected)
	}
}
