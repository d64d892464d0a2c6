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

func (m *messenger) key() txnKey { return txnKey{si: m.si, ti: m.ti} }

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
	roomWait bool // in Core.roomWaits
	ended    bool // removed
}

func (m *messengent) kind() codec.TransactionKind { return codec.TransactionKindMessage }

func (m *messengent) key() txnKey { return txnKey{rf: true, si: m.si, ti: m.ti} }

func (m *messengent) deadline() time.Time { return earliest(time.Time(m.timeout), m.redo.at) }

func (m *messengent) msgKey() msgKey { return msgKey{m.r.nuid, m.si, m.ti} }

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

func (j *joiner) key() txnKey { return txnKey{si: 0, ti: j.ti} }

func (j *joiner) deadline() time.Time { return earliest(time.Time(j.timeout), j.redo.at) }

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

func (j *joinent) key() txnKey { return txnKey{rf: true, si: 0, ti: j.ti} }

func (j *joinent) deadline() time.Time { return earliest(time.Time(j.timeout), j.redo.at) }

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

func (a *allower) key() txnKey { return txnKey{si: a.si, ti: a.ti} }

func (a *allower) deadline() time.Time { return earliest(time.Time(a.timeout), a.redo.at) }

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

func (a *allowent) key() txnKey { return txnKey{rf: true, si: a.si, ti: a.ti} }

func (a *allowent) deadline() time.Time { return earliest(time.Time(a.timeout), a.redo.at) }

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

func (a *aliver) key() txnKey { return txnKey{si: a.si, ti: a.ti} }

func (a *aliver) deadline() time.Time { return earliest(time.Time(a.timeout), a.redo.at) }

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
