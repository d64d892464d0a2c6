package core

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// The state of the transactions a remote holds (txn): what each kind
// keeps between its packets. What they do is in message.go, join.go,
// allow.go and alive.go.

type messenger struct {
	r      *remote
	si, ti uint32
	body   []byte  // the serialized body, kept to send again in a new session
	buf    *[]byte // body's pooled buffer (SendFor), or nil; given back at the outcome (release)
	bk     codec.BodyKind
	id     MsgID            // its stable id, sent to peers that negotiated message ids
	coat   []byte           // the sealed body; with aead, the plain body that each packet seals a piece of
	aead   *packet.AEADCoat // the session's AEAD coat when it has one
	// prefix is what an aead coat seals in front of coat, its id envelope
	// (to a peer that negotiated message ids), in env: not joined to the
	// body, which is sealed from where it is.
	prefix  []byte
	env     [1 + 3*binary.MaxVarintLen64]byte // the longest envelope
	segSize int
	count   int
	flags   []uint8
	flag1   [1]uint8 // flags of a message of one packet: no allocation
	current int      // the next segment of the burst
	misseds []int    // asked for again, in order, unique
	acked   bool     // something came back
	lastSeg int      // the segment sent last; -1 before the first
	last    []byte   // its bytes, to send again unchanged (no new signature; not with aead)
	// lastSign signs last when its foot was left to sign (signLater).
	lastSign *packet.NaClFoot
	sentAt   time.Time // when a packet went last; zero when it is not timed (timeRequest)
	timeout  expiry
	heapSlot // in its remote's clock (timers.go)
	redo     redo
	started  time.Time
	result   Waiter // takes the outcome; nil when nobody waits
	// bundled: it travels as an entry of bundles (bundle.go), queued for
	// the flush of this moment; retry: the next one is a retransmission.
	bundled, queued, retry bool
	// repeated: a packet went again after every segment went once, so the
	// receiver may have finished the message and lost its done (a nack).
	repeated bool
	// large: it is counted in its remote's send window (sendwin.go).
	large bool
	// resent: a packet of it went again (answeredSend).
	resent bool
	// sendLinks are its neighbours in its remote's send order, seq and
	// xmit its last transmission's number and time, and lostAt when it
	// counts as lost unless its done comes first (zero: not armed;
	// rack.go).
	sendLinks    links[*messenger]
	seq          uint32
	xmit, lostAt time.Time
}

func (m *messenger) kind() codec.TransactionKind { return codec.TransactionKindMessage }
func (m *messenger) key() txnKey                 { return txnKey{si: m.si, ti: m.ti} }

// deadline is its timeout and its retransmission timer, but for one queued
// for the bundles of this moment: its timer has nothing to do until the
// flush sends it (and restarts the timer), so a caller that ticks again
// before it flushes finds nothing due.
func (m *messenger) deadline() time.Time {
	if m.queued {
		return time.Time(m.timeout)
	}
	return earliest(time.Time(m.timeout), m.redo.at, m.lostAt)
}

type messengent struct {
	r       *remote
	si, ti  uint32
	wait    bool // wf of the packet that started it, copied onto our replies
	ck      codec.CoatKind
	fk      codec.FootKind
	lowest  int
	highest int
	pending Message // whole (when whole), waiting for room to deliver
	id      MsgID   // pending's id, from a peer that negotiated message ids
	// decoding: pending's body is being decoded off the owner goroutine
	// (a BatchSerializer's kind); complete waits for decoded.
	decoding bool
	first    time.Time // its first packet
	dec      Decode    // pending's body, for the decoder
	timeout  expiry
	heapSlot // in its remote's clock (timers.go)
	redo     redo

	whole    bool // it has pending
	roomWait bool // in inbox.roomWaits
	ended    bool // removed
}

func (m *messengent) kind() codec.TransactionKind { return codec.TransactionKindMessage }
func (m *messengent) key() txnKey                 { return txnKey{rf: true, si: m.si, ti: m.ti} }
func (m *messengent) deadline() time.Time         { return earliest(time.Time(m.timeout), m.redo.at) }
func (m *messengent) msgKey() msgKey              { return msgKey{m.r.nuid, m.si, m.ti} }

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

type joiner struct {
	r        *remote
	ti       uint32
	se, de   uint32 // fixed at the start: every packet carries the request's uids
	vacuous  bool
	renewal  bool
	cascade  bool
	pended   bool   // by the joinent: its operator decides on our keys, or its keep is busy
	pendWhy  Reason // why it pended: ReasonPendingTheirs or ReasonKeepBusy
	answered bool   // the joinent said something
	tries    int    // requests sent
	timeout  expiry
	heapSlot // in its remote's clock (timers.go)
	redo     redo
	last     []byte
	lastKind codec.PacketKind
}

func (j *joiner) kind() codec.TransactionKind { return codec.TransactionKindJoin }
func (j *joiner) key() txnKey                 { return txnKey{si: 0, ti: j.ti} }
func (j *joiner) deadline() time.Time         { return earliest(time.Time(j.timeout), j.redo.at) }

type joinent struct {
	r       *remote
	ti      uint32
	from    netip.AddrPort
	se, de  uint32 // the head values we send: the request's de and se
	vacuous bool
	pended  bool
	added   bool // r was added for this join (a stranger): forgotten if it does not complete
	// b is the request, whose advertisement (and on a mutable road, whose
	// changed identity: change) the remote takes only once the join
	// completes.
	b        joinBody
	reid     uint32
	change   bool
	timeout  expiry
	heapSlot // in its remote's clock (timers.go)
	redo     redo
	last     []byte
	lastKind codec.PacketKind
}

func (j *joinent) kind() codec.TransactionKind { return codec.TransactionKindJoin }
func (j *joinent) key() txnKey                 { return txnKey{rf: true, si: 0, ti: j.ti} }
func (j *joinent) deadline() time.Time         { return earliest(time.Time(j.timeout), j.redo.at) }

type allower struct {
	r         *remote
	si, ti    uint32
	cascade   bool
	short     keys.Box       // the new session's short-term pair
	peerShort keys.PublicKey // the allowent's, from its cookie
	// helloKey is the key of the hello's box, which the cookie opens with;
	// session that of the initiate's, the new session's.
	helloKey, session *handshake.Key
	oreo              handshake.Oreo
	asked             time.Time // when the initiate went, timed (timeRequest)
	timeout           expiry
	heapSlot          // in its remote's clock (timers.go)
	redo              redo
	last              []byte
	lastKind          codec.PacketKind
}

func (a *allower) kind() codec.TransactionKind { return codec.TransactionKindAllow }
func (a *allower) key() txnKey                 { return txnKey{si: a.si, ti: a.ti} }
func (a *allower) deadline() time.Time         { return earliest(time.Time(a.timeout), a.redo.at) }

type allowent struct {
	r         *remote
	si, ti    uint32
	short     keys.Box       // the new session's short-term pair
	peerShort keys.PublicKey // the allower's, from its hello
	oreo      handshake.Oreo
	// caps is what the hello's plain says of the advertisements (capsNone:
	// the reference's plain; capsSame; capsOther).
	caps     uint8
	asked    time.Time // when the cookie or the ack went, timed (timeRequest)
	timeout  expiry
	heapSlot // in its remote's clock (timers.go)
	redo     redo
	last     []byte
	lastKind codec.PacketKind
}

func (a *allowent) kind() codec.TransactionKind { return codec.TransactionKindAllow }
func (a *allowent) key() txnKey                 { return txnKey{rf: true, si: a.si, ti: a.ti} }
func (a *allowent) deadline() time.Time         { return earliest(time.Time(a.timeout), a.redo.at) }

type aliver struct {
	r       *remote
	si, ti  uint32
	cascade bool
	timeout expiry
	redo    redo
	last    []byte

	heapSlot // in its remote's clock (timers.go)
}

func (a *aliver) kind() codec.TransactionKind { return codec.TransactionKindAlive }
func (a *aliver) key() txnKey                 { return txnKey{si: a.si, ti: a.ti} }
func (a *aliver) deadline() time.Time         { return earliest(time.Time(a.timeout), a.redo.at) }

// Fairness among a remote's messages at its reassembly quota. Segments of
// a message that found no room are dropped, and the sender sends them
// again on its timer; but a slot that frees goes to whichever message's
// segment comes first, and the segments of a message the sender just
// started come at once. So a remote that keeps more segmented messages
// under way than our room (a sender whose room is larger than ours, or the
// reference, which keeps no window) could see one message refused again
// and again. We remember the oldest message refused for want of the
// remote's own room (its starved record), and while it waits the last
// free slot of the remote's room is kept for it: the first segments of
// newer messages are refused. The record names one message per remote, is
// set only by authenticated packets of that remote, keeps only that
// remote's own room, and lapses after starveHold.
type starved struct {
	si, ti uint32
	until  time.Time
}

// remote is a remote estate, owned by the core. What a message to it or
// from it reads and writes comes first, in the struct's first lines (its
// negotiated profile among them): with ten thousand remotes, each message
// finds its remote out of the cache, and every other line it touches is
// another miss. What joins, allows and presence read comes after.
type remote struct {
	nuid uint32 // our uid for it (the key of core.remotes)
	fuid uint32 // its uid for us

	sid  uint32 // session of transactions we start
	rsid uint32 // last session of transactions it started
	tid  uint32 // last transaction id we gave

	// The flags sit together: the struct is one of the costs of a remote.
	main       bool
	kind       uint8
	joined     bool
	allowed    bool
	alived     bool
	aliveKnown bool
	reaped     bool
	added      bool // in core.remotes (a vacuous joinent's remote is not, until accepted)
	capsFresh  bool // peerCaps come from a join of this run (not lost in a restart)
	// sessionReset says it joined afresh (vacuously) since the window's
	// session began, so that its next allow may set rsid back (see route).
	sessionReset bool
	rttSeeded    bool // srtt has only the handshake's samples (observeRTT)
	// unconfirmed: we joined it vacuously and have allowed no session
	// since, so it may never have seen our join complete (renew).
	unconfirmed bool
	// mends counts our allows with it that failed in a row (mendLater).
	mends uint8

	// srtt and rttvar estimate, as TCP does (RFC 6298), how long the remote
	// takes to answer a request: a message's last packet sent, and the
	// handshake's (timeRequest). The message timers start from it, so a
	// remote (or a machine) slowed down by load gets fewer needless
	// retransmissions, from its first message on. Zero srtt: no sample
	// yet. In µs: the struct is a cost of every remote.
	srtt, rttvar int32

	// rttMin is the least sample of a message, rttLast the latest (µs;
	// zero: none): rack.go's thresholds.
	rttMin, rttLast int32

	// sendOrder holds its messages under way in the order of their last
	// transmission, sendSeq that transmission's number, and rackSeq the
	// newest transmission a done answered (rack.go).
	sendOrder        orderList[*messenger]
	sendSeq, rackSeq uint32

	ha   netip.AddrPort
	coat packet.Coat // the session's coat: NaCl, or a negotiated coat (Config.Coat)
	// prof is the negotiated profile of this session, in negotiated; nil:
	// the reference's.
	prof *profile

	// ours and theirs are its transactions that we and it started (txn,
	// eachTxn); each nil when it has none.
	ours, theirs map[txnID]txn
	// heapSlot is its place in the core's timer heap, marked that it
	// waits in the wake clock's touched (wake.go).
	heapSlot
	// clock holds its transactions by deadline (timers.go).
	clock timerHeap[txn]
	// saved holds messages waiting to start, in order: those whose
	// messenger a new session made stale (sent again after the next
	// allow) and those the send window holds back (sendwin.go).
	saved []*messenger
	// savedDue is when a message in saved may time out: no later than the
	// earliest of their timeouts (it may be earlier, once the message
	// that set it has left; the tick at it walks saved and sets it
	// anew), so that neither a flush nor a tick walks saved for a
	// deadline; zero: none of them times out.
	savedDue expiry
	// win is what its messages under way hold (sendwin.go); nil: none.
	win *sendWindow
	// starved is its oldest message refused for room, while it waits
	// (fair.go); nil: none.
	starved   *starved
	roomWaits int32 // its whole messages waiting for room to deliver (inbox.roomWaits)
	// retransmits counts its packets sent again (Remote): in what would
	// be padding, as any counter more would take a remote to a larger
	// size class of the heap.
	retransmits uint32

	presence time.Time // next alive
	reapAt   time.Time // reaped if no alive success by then
	heard    time.Time // its last authenticated packet (or when we added it)
	// heardLinks are its neighbours in the core's remotes by when they
	// were last heard (silenceList, forget.go): prev heard before it.
	heardLinks links[*remote]

	// negotiated holds prof's profile, beside the rest of what a message
	// reads.
	negotiated profile

	// window holds the transaction ids it used in its session rsid.
	window replayWindow
	mids   midFilter // message ids delivered, across sessions

	name string
	role string
	fqdn string

	verify keys.VerifyKey
	pub    keys.PublicKey

	// keptSid is the session its kept estate holds (0: none written in
	// this run): a restart counts on from it (restore), so it is never
	// older than sid, and may be newer (joined reserves the allow's).
	keptSid uint32
	// joinAckTi is the transaction of joinAck.
	joinAckTi uint32

	short     keys.Box       // our short-term pair for this session (privee)
	peerShort keys.PublicKey // its short-term public key (publee)
	peerCaps  *caps          // what it advertised in the last join; nil: nothing (the reference), shared (shareCaps)

	// replies and joins are its budgets of replies to packets of no live
	// transaction and of join requests.
	replies, joins bucket

	reasmWarned int64     // unix ns: no reassembly warning logged for it before this
	forgetAt    time.Time // once reaped: forgotten if still silent then (forget.go)

	// waiters are Join calls waiting for this remote to be allowed.
	waiters []chan error
	// joinAck is the ack of the last join we completed as joiner, sent
	// again if the joinent repeats its response (joinAckTi).
	joinAck []byte
	// answered is our joinent that accepted its join and ended without
	// its ack (joinent.unacked): its first signed hello completes it.
	answered *joinent
	// mendAt (unix ns): presence starts no allow of ours with it before
	// (mendLater).
	mendAt int64
}

// txnKey indexes a remote's transactions (§8.1): who started it, session
// and transaction id. The uids of the reference's index are the remote's.
type txnKey struct {
	rf bool // the remote initiated it
	si uint32
	ti uint32
}

// txnID is a txnKey but for who started it: the key of one side's table
// (remote.ours, remote.theirs), 8 bytes that a map hashes as one word
// (txnKey, with rf, has a hash of its own per field: each message looked
// its key up several times).
type txnID struct{ si, ti uint32 }

func (k txnKey) id() txnID { return txnID{k.si, k.ti} }

// txn is a transaction state machine. It never blocks or does I/O: it
// handles packets and timer expiries by calling the core, which queues what
// to send.
type txn interface {
	kind() codec.TransactionKind
	key() txnKey
	receive(c *Core, p *rxPacket)
	// tick runs the timers that are due at c.now.
	tick(c *Core)
	// deadline is when tick must run next (zero: no timer).
	deadline() time.Time
	// abort ends the transaction because its session went stale, sending
	// the peer a nack of kind pk when it is not zero.
	abort(c *Core, pk codec.PacketKind)
	// timerSlot is its place in its remote's clock, by deadline (each
	// kind embeds a heapSlot); whatever moves its deadline retimes it.
	timerSlot() *heapSlot
}

// sendSpan is how many transaction ids a remote's messages under way may
// span.
const sendSpan = replayIDs / 2

// sendWindow is what a remote's messages under way hold; a remote has one
// only while it has messages under way.
type sendWindow struct {
	// started are the messages started, in order (their ids increase),
	// from head on; those that ended are dropped as they reach the head.
	started []txnKey
	head    int
	// first is the messenger at started[head] when oldest found it under
	// way: while it is, oldest looks nothing up (it asks at every start and
	// every done).
	first  *messenger
	large  int // segmented messages under way
	charge int // what they may be charged in the receiver's reassembly
}

// spareWinRoom bounds the room of the windows kept in spares.wins.
const spareWinRoom = 16

// roomCharge is what the receiver's Reassembler charges at most for m's
// segments (packet.MessageCharge, for its count of segments).
func roomCharge(m *messenger) int {
	return packet.MessageCharge(m.coatLen()) - packet.SegmentCharge*(codec.MaxSegmentCount-m.count)
}

// A Waiter takes the outcome of a message (SendFor): nil when the remote
// said done, else why it failed. The core calls MessageDone once per
// message, on the owner goroutine, so it must not block.
type Waiter interface{ MessageDone(err error) }

// errChan is the Waiter of Send: a channel with room for the outcome.
type errChan chan<- error

func (ch errChan) MessageDone(err error) { ch <- err }

// roomWait names a whole message waiting for room in the receive queue:
// by its key, looked up again when room frees, since one that ended
// meanwhile (timed out, nacked, forgotten with its remote) is no longer
// there, and one the bundler moved has been copied (bundle.go).
type roomWait struct {
	r *remote
	k txnKey
}

// waiting is the message w names while it still waits, else nil.
func (w roomWait) waiting() *messengent {
	if m, ok := w.r.txn(w.k).(*messengent); ok && m.roomWait {
		return m
	}
	return nil
}

// Decode is a whole received message whose body (of a
// packet.BatchSerializer's kind, with Config.DecodeLater) waits for a
// decoder; Decoded takes the outcome.
type Decode struct {
	Kind codec.BodyKind
	Raw  []byte
	m    *messengent
}

// coatLen is the length of the message's coat: with aead, of the plain
// text its packets seal.
func (m *messenger) coatLen() int { return len(m.prefix) + len(m.coat) }

// table is the map of r's transactions of k's side.
func (r *remote) table(k txnKey) *map[txnID]txn {
	if k.rf {
		return &r.theirs
	}
	return &r.ours
}

// txn is r's transaction at k; nil when there is none.
func (r *remote) txn(k txnKey) txn { return (*r.table(k))[k.id()] }

// numTxns is how many transactions r has.
func (r *remote) numTxns() int { return len(r.ours) + len(r.theirs) }

// eachTxn yields r's transactions, ours then theirs; the one yielded may
// be removed.
func (r *remote) eachTxn(yield func(txn) bool) {
	for _, m := range [2]map[txnID]txn{r.ours, r.theirs} {
		for _, t := range m {
			if !yield(t) {
				return
			}
		}
	}
}
