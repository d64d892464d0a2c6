package dissect

import (
	"container/list"
	"fmt"
	"hash/maphash"
	"net/netip"
	"strconv"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Outcome is where a transaction stands.
type Outcome uint8

// The outcomes. Open and Pended transactions are still running; the others
// are final, but a timed-out transaction that later completes changes to
// the new outcome.
const (
	Open       Outcome = iota // still running
	Pended                    // a join waiting for an operator to accept the keys
	Done                      // completed: join and allow acked, alive acked, message done
	Nacked                    // ended by a nack
	Refused                   // refuse: another transaction in the way, or a timeout
	Rejected                  // reject: keys or identity refused
	Renewed                   // renew: the joinent lost the joiner's uid
	Unjoined                  // the correspondent does not know the initiator as joined
	Unallowed                 // the correspondent has no allowed session with the initiator
	TimedOut                  // no packet for longer than the kind's timeout
	Incomplete                // the capture ended while it was running
	Evicted                   // dropped to bound the tracker's memory while running
)

var outcomeNames = [...]string{"open", "pended", "done", "nacked", "refused", "rejected", "renewed",
	"unjoined", "unallowed", "timed out", "incomplete", "evicted"}

func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Final reports whether the transaction has ended.
func (o Outcome) Final() bool { return o != Open && o != Pended }

// TrackerConfig bounds a Tracker. The zero value gives the defaults.
type TrackerConfig struct {
	// MaxTransactions is how many transactions are remembered at once,
	// running or recently ended; the least recently active is dropped
	// first. Default 4096.
	MaxTransactions int
	// Reassembly bounds the segmented messages being put together, per
	// sender and in all (defaults: 65536 at once, any number of them from
	// one sender, 64 MiB in all, messages up to the protocol's 64 MiB).
	Reassembly packet.ReassemblyConfig
	// Retention is how long an ended transaction is remembered, to tell
	// late retransmissions and stale nacks; default 10 minutes (the
	// reference's MsgStaleTimeout).
	Retention time.Duration
	// Timeouts by transaction kind: a running transaction with no packet
	// for this long is TimedOut. Defaults: join 5s, allow 4s, alive 2s
	// (the initiators' timeouts, raet-protocol.md §8.1), message 60s (the
	// reference never times a message out; raet-go does after a minute).
	JoinTimeout, AllowTimeout, AliveTimeout, MessageTimeout time.Duration
}

func (c *TrackerConfig) populate() {
	if c.MaxTransactions <= 0 {
		c.MaxTransactions = 4096
	}
	if c.Reassembly.MaxBuffered <= 0 {
		c.Reassembly.MaxBuffered = 64 << 20
	}
	if c.Reassembly.MaxPerRemote <= 0 {
		c.Reassembly.MaxPerRemote = packet.DefaultMaxReassemblies // a capture is not a peer to be fair to
	}
	if c.Retention <= 0 {
		c.Retention = 10 * time.Minute
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.JoinTimeout, 5*time.Second)
	def(&c.AllowTimeout, 4*time.Second)
	def(&c.AliveTimeout, 2*time.Second)
	def(&c.MessageTimeout, time.Minute)
}

// Transaction is one exchange between two estates, as seen in a capture.
// A transaction is identified by its initiator and correspondent addresses,
// session id, transaction id and kind: the initiator sends with cf clear,
// the correspondent with cf set (§8.1).
type Transaction struct {
	ID                       int
	Kind                     codec.TransactionKind
	Initiator, Correspondent netip.AddrPort
	SessionID, TID           uint32
	First, Last              time.Time
	End                      time.Time // when it ended (zero while running)
	Outcome                  Outcome
	Packets, Bytes           int
	Retransmits              int // packets seen again: af set, or the same bytes or segment again
	ResendRequests           int // resend packets of a message's correspondent
	Requested                int // segment numbers the resends asked for (when they could be read)
	StaleNacks               int // nacks after the end, or for nothing in the capture
	Segments                 int // a message's segment count (sc)
	SegmentsSeen             int // distinct segments seen
	MessageLength            int // a message's ml, or its coat length
	Missing                  int // segments never seen, when it ended
	Reassembled              bool

	key      txnKey
	elem     *list.Element
	segs     []uint64 // bitset of segments seen
	hashes   [8]uint64
	nh       int
	closed   bool // OnClose was called
	response bool // join: a response was seen; allow: the correspondent acked
	hs       *allowState
}

// Duration is the time from the first packet to the end, or to the last
// packet while it runs.
func (t *Transaction) Duration() time.Duration {
	if !t.End.IsZero() {
		return t.End.Sub(t.First)
	}
	return t.Last.Sub(t.First)
}

type txnKey struct {
	init, corr netip.AddrPort
	si, ti     uint32
	tk         codec.TransactionKind
}

// Note is what the tracker says about one packet.
type Note struct {
	Txn        *Transaction
	Initiator  bool   // sent by the transaction's initiator
	Retransmit bool   // af set, or seen before
	Event      string // what the packet does in its transaction
	Ends       bool   // the packet ends the transaction
	Completes  bool   // the packet completes a message: all its segments are in
	Stale      bool   // a nack for a transaction already ended or not in the capture
	// Outcome and Duration are the transaction's when the packet ends it.
	Outcome  Outcome
	Duration time.Duration
	// Err is set for a segment the reassembly refused (a
	// *packet.SegmentError): one that disagrees with the others.
	Err error
}

// Tracker follows transactions across packets: it reassembles segmented
// messages, marks retransmissions, resend requests, missing segments and
// stale nacks, times each transaction and times out those that stall. Its
// memory is bounded by TrackerConfig. It is driven by capture time, not the
// clock. A Tracker is not safe for concurrent use.
type Tracker struct {
	cfg     TrackerConfig
	txns    map[txnKey]*Transaction
	lru     *list.List                                  // of *Transaction, least recently active first
	reasm   *packet.Reassembler[netip.AddrPort, txnKey] // owned by the sender
	nextID  int
	lastExp time.Time
	stats   *Stats
	// OnClose, when set, is called once for each transaction when it ends,
	// times out, is evicted, or is still running at Flush.
	OnClose func(*Transaction)
}

// NewTracker returns a tracker bounded by cfg (nil for defaults) that adds
// its counts to stats (which may be nil).
func NewTracker(cfg *TrackerConfig, stats *Stats) *Tracker {
	t := &Tracker{txns: map[txnKey]*Transaction{}, lru: list.New(), stats: stats}
	if cfg != nil {
		t.cfg = *cfg
	}
	t.cfg.populate()
	t.reasm = packet.NewReassembler[netip.AddrPort, txnKey](&t.cfg.Reassembly)
	if t.stats == nil {
		t.stats = NewStats()
	}
	return t
}

// Len returns the number of transactions remembered.
func (tr *Tracker) Len() int { return len(tr.txns) }

func (tr *Tracker) timeout(k codec.TransactionKind) time.Duration {
	switch k {
	case codec.TransactionKindJoin:
		return tr.cfg.JoinTimeout
	case codec.TransactionKindAllow:
		return tr.cfg.AllowTimeout
	case codec.TransactionKindAlive:
		return tr.cfg.AliveTimeout
	}
	return tr.cfg.MessageTimeout
}

// isStart reports whether a packet starts a transaction of its kind.
func isStart(h *codec.Head) bool {
	if h.Correspondent() || h.Again() {
		return false
	}
	switch h.TransactionKind {
	case codec.TransactionKindJoin, codec.TransactionKindAlive:
		return h.PacketKind == codec.PacketKindRequest
	case codec.TransactionKindAllow:
		return h.PacketKind == codec.PacketKindHello
	case codec.TransactionKindMessage:
		return h.PacketKind == codec.PacketKindMessage
	}
	return false
}

// Observe follows one decoded road packet, the datagram data from src to
// dst captured at now, with head h and the given coat. seed hashes data to
// recognize a packet sent again. With reassemble set it keeps the segments
// of messages and returns, with the packet that completes a message, the
// message's whole coat (a fresh slice); without, it only counts them (a
// caller that cannot open the coat saves the copies). It returns the note
// for the packet.
func (tr *Tracker) Observe(now time.Time, src, dst netip.AddrPort, h *codec.Head, coat, data []byte, seed maphash.Seed, reassemble bool) (Note, []byte) {
	return tr.observe(now, src, dst, h, coat, data, len(data), seed, reassemble)
}

// ObserveEntry follows one message of a bundle packet as the message it
// is: h is the bundle's head, e the entry (its ti, flags and length).
func (tr *Tracker) ObserveEntry(now time.Time, src, dst netip.AddrPort, h *codec.Head, e *packet.BundleEntry, seed maphash.Seed) Note {
	m := *h
	m.PacketKind, m.TransactionID, m.Flags = codec.PacketKindMessage, e.TI, e.Flags
	note, _ := tr.observe(now, src, dst, &m, nil, nil, e.Len, seed, false)
	return note
}

// ObserveAnswer follows one id of an answers list (of an answers packet or
// a bundle) as the done or ack of that transaction: h is the packet's head,
// sent by the transactions' correspondent.
func (tr *Tracker) ObserveAnswer(now time.Time, src, dst netip.AddrPort, h *codec.Head, kind codec.PacketKind, ti uint32, seed maphash.Seed) Note {
	a := *h
	a.PacketKind, a.TransactionKind, a.TransactionID = kind, codec.TransactionKindMessage, ti
	a.SegmentNumber, a.SegmentCount = 0, 1
	a.Flags = a.Flags&^codec.FlagAgain | codec.FlagCorrespondent
	note, _ := tr.observe(now, src, dst, &a, nil, nil, 0, seed, false)
	return note
}

func (tr *Tracker) observe(now time.Time, src, dst netip.AddrPort, h *codec.Head, coat, data []byte, size int, seed maphash.Seed, reassemble bool) (Note, []byte) {
	tr.expire(now)
	init, corr := src, dst
	if h.Correspondent() {
		init, corr = dst, src
	}
	key := txnKey{init, corr, h.SessionID, h.TransactionID, h.TransactionKind}
	tx := tr.txns[key]
	if tx != nil && tx.Outcome.Final() && tx.Outcome != TimedOut && isStart(h) {
		tr.finalize(tx) // the same ids again: a new transaction (a restarted stack counts from 1)
		tx = nil
	}
	fresh := tx == nil
	if fresh {
		tx = tr.newTxn(key, now)
	} else {
		tr.lru.MoveToBack(tx.elem)
	}
	wasFinal := tx.Outcome.Final() && tx.Outcome != TimedOut
	note := Note{Txn: tx, Initiator: !h.Correspondent()}
	tx.Packets++
	tx.Bytes += size
	tx.Last = now
	if tx.Outcome == TimedOut {
		tx.Outcome = Open
	}
	segment := h.TransactionKind == codec.TransactionKindMessage && h.PacketKind == codec.PacketKindMessage
	dup := false
	if segment {
		dup = tx.seeSegment(h)
		note.Retransmit = dup || h.Again()
	} else {
		note.Retransmit = tx.seeHash(maphash.Bytes(seed, data)) || h.Again()
	}
	if note.Retransmit {
		tx.Retransmits++
		tr.stats.Retransmits++
	}
	pk := h.PacketKind
	var whole []byte
	switch {
	case pk == codec.PacketKindNack:
		if wasFinal || fresh {
			note.Stale = true
			tx.StaleNacks++
			tr.stats.StaleNacks++
			if fresh {
				note.Event = "stale nack: no such transaction in the capture"
				tr.end(tx, Nacked, now, &note)
			} else {
				note.Event = "stale nack: the transaction had ended (" + tx.Outcome.String() + ")"
			}
		} else {
			note.Event = "nack"
			tr.end(tx, Nacked, now, &note)
		}
	case segment:
		whole = tr.segment(tx, h, coat, &note, wasFinal, dup, reassemble)
	default:
		tr.control(tx, h, now, &note, wasFinal)
	}
	return note, whole
}

func (tr *Tracker) newTxn(key txnKey, now time.Time) *Transaction {
	for len(tr.txns) >= tr.cfg.MaxTransactions {
		old := tr.lru.Front().Value.(*Transaction)
		if !old.Outcome.Final() {
			old.Outcome = Evicted
			old.End = old.Last
			tr.stats.Evicted++
			tr.close(old)
		}
		tr.finalize(old)
	}
	tr.nextID++
	tx := &Transaction{ID: tr.nextID, Kind: key.tk, Initiator: key.init, Correspondent: key.corr,
		SessionID: key.si, TID: key.ti, First: now, Last: now, key: key}
	tx.elem = tr.lru.PushBack(tx)
	tr.txns[key] = tx
	return tx
}

// seeSegment records segment sn and reports whether it was seen before.
func (tx *Transaction) seeSegment(h *codec.Head) bool {
	sc := max(int(h.SegmentCount), 1)
	if tx.Segments == 0 {
		tx.Segments = sc
		tx.MessageLength = int(h.MessageLength)
	}
	sn := int(h.SegmentNumber)
	if sn >= tx.Segments {
		return false
	}
	if tx.segs == nil {
		tx.segs = make([]uint64, (tx.Segments+63)/64)
	}
	w, b := sn/64, uint64(1)<<(sn%64)
	if tx.segs[w]&b != 0 {
		return true
	}
	tx.segs[w] |= b
	tx.SegmentsSeen++
	return false
}

// seeHash records a packet's hash and reports whether it was seen before.
func (tx *Transaction) seeHash(sum uint64) bool {
	for i := 0; i < min(tx.nh, len(tx.hashes)); i++ {
		if tx.hashes[i] == sum {
			return true
		}
	}
	tx.hashes[tx.nh%len(tx.hashes)] = sum
	tx.nh++
	return false
}

// segment handles a message packet: it reassembles the coat.
func (tr *Tracker) segment(tx *Transaction, h *codec.Head, coat []byte, note *Note, wasFinal, dup, reassemble bool) []byte {
	sc := int(h.SegmentCount)
	segmented := h.Segment() || sc > 1
	if segmented {
		note.Event = "segment " + strconv.Itoa(int(h.SegmentNumber)) + " of " + strconv.Itoa(sc)
	} else {
		note.Event = "message"
	}
	if note.Retransmit {
		note.Event += ", again"
	}
	if wasFinal {
		note.Event += " after the end (" + tx.Outcome.String() + ")"
		return nil
	}
	if tx.Reassembled || dup {
		return nil
	}
	if !segmented {
		if tx.MessageLength == 0 {
			tx.MessageLength = len(coat)
		}
		tx.Reassembled, note.Completes = true, true
		if !reassemble {
			return nil
		}
		return append([]byte(nil), coat...)
	}
	if !reassemble {
		if tx.SegmentsSeen == tx.Segments {
			tx.Reassembled, note.Completes = true, true
			note.Event += ", completes the message (" + strconv.Itoa(sc) + " segments, " + strconv.Itoa(tx.MessageLength) + " bytes)"
		}
		return nil
	}
	whole, _, err := tr.reasm.Add(tx.key.init, tx.key, h, coat)
	if err != nil {
		note.Err = err
		note.Event += ": refused"
		return nil
	}
	if whole != nil {
		tx.Reassembled, note.Completes = true, true
		note.Event += ", completes the message (" + strconv.Itoa(sc) + " segments, " + strconv.Itoa(len(whole)) + " bytes)"
	}
	return whole
}

// control handles every packet of a transaction other than message
// segments and nacks.
func (tr *Tracker) control(tx *Transaction, h *codec.Head, now time.Time, note *Note, wasFinal bool) {
	pk, cf := h.PacketKind, h.Correspondent()
	note.Event = pk.String()
	if note.Retransmit {
		note.Event += ", again"
	}
	if wasFinal {
		note.Event += " after the end (" + tx.Outcome.String() + ")"
		return
	}
	switch pk {
	case codec.PacketKindRefuse:
		tr.end(tx, Refused, now, note)
		return
	case codec.PacketKindReject:
		tr.end(tx, Rejected, now, note)
		return
	case codec.PacketKindRenew:
		tr.end(tx, Renewed, now, note)
		return
	case codec.PacketKindUnjoined:
		tr.end(tx, Unjoined, now, note)
		return
	case codec.PacketKindUnallowed:
		tr.end(tx, Unallowed, now, note)
		return
	case codec.PacketKindPend:
		tx.Outcome = Pended
		note.Event = "pend: keys wait for an operator"
		return
	}
	switch tx.Kind {
	case codec.TransactionKindJoin:
		switch {
		case pk == codec.PacketKindResponse && cf:
			tx.response = true
			if tx.Outcome == Pended {
				tx.Outcome = Open
			}
		case pk == codec.PacketKindAck && !cf && tx.response:
			tr.end(tx, Done, now, note)
		}
	case codec.TransactionKindAllow:
		switch {
		case pk == codec.PacketKindAck && cf:
			tx.response = true
			note.Event = "ack: the correspondent allows"
		case pk == codec.PacketKindAck && !cf && tx.response:
			note.Event = "ack final"
			tr.end(tx, Done, now, note)
		}
	case codec.TransactionKindAlive:
		if pk == codec.PacketKindAck && cf {
			tr.end(tx, Done, now, note)
		}
	case codec.TransactionKindMessage:
		switch {
		case pk == codec.PacketKindDone && cf:
			tr.end(tx, Done, now, note)
		case pk == codec.PacketKindResend && cf:
			tx.ResendRequests++
			tr.stats.ResendRequests++
			note.Event = "resend request"
			if tx.Segments > 0 {
				note.Event += fmt.Sprintf(" (%d of %d segments seen)", tx.SegmentsSeen, tx.Segments)
			}
		case pk == codec.PacketKindAck && cf:
			note.Event = fmt.Sprintf("ack through segment %d", h.SegmentNumber)
		}
	}
}

// NoteRequested records the segment numbers a resend asked for, once its
// body could be read.
func (tr *Tracker) NoteRequested(tx *Transaction, n int) {
	tx.Requested += n
	tr.stats.Requested += n
}

// end sets a transaction's outcome and end time.
func (tr *Tracker) end(tx *Transaction, o Outcome, now time.Time, note *Note) {
	tx.Outcome = o
	tx.End = now
	note.Ends = true
	note.Outcome, note.Duration = o, tx.Duration()
	if tx.Segments > 0 && tx.SegmentsSeen < tx.Segments {
		tx.Missing = tx.Segments - tx.SegmentsSeen
	}
	if o == Done {
		note.Event += fmt.Sprintf(", %s in %s", tx.Kind, fmtDuration(tx.Duration()))
		if tx.Missing > 0 {
			note.Event += fmt.Sprintf(" (%d segments never seen in the capture)", tx.Missing)
		}
	}
	tr.reasm.Drop(tx.key)
	tx.segs = nil
	tr.close(tx)
}

func (tr *Tracker) close(tx *Transaction) {
	if !tx.closed {
		tx.closed = true
		if tr.OnClose != nil {
			tr.OnClose(tx)
		}
	}
}

// finalize forgets a transaction and adds it to the statistics.
func (tr *Tracker) finalize(tx *Transaction) {
	if tr.txns[tx.key] == tx {
		delete(tr.txns, tx.key)
	}
	tr.lru.Remove(tx.elem)
	if !tx.Outcome.Final() || tx.Outcome == TimedOut {
		tr.reasm.Drop(tx.key)
	}
	tr.stats.addTxn(tx)
}

// expire times out stalled transactions and forgets old ended ones. It
// scans at most once per 100ms of capture time.
func (tr *Tracker) expire(now time.Time) {
	if now.Sub(tr.lastExp) < 100*time.Millisecond && !tr.lastExp.IsZero() {
		return
	}
	tr.lastExp = now
	minTimeout := min(tr.cfg.JoinTimeout, tr.cfg.AllowTimeout, tr.cfg.AliveTimeout, tr.cfg.MessageTimeout)
	for e := tr.lru.Front(); e != nil; {
		tx := e.Value.(*Transaction)
		next := e.Next()
		idle := now.Sub(tx.Last)
		if idle < minTimeout {
			break // the rest are more recent
		}
		switch {
		case tx.Outcome.Final() && idle > tr.cfg.Retention:
			tr.finalize(tx)
		case !tx.Outcome.Final() && idle > tr.timeout(tx.Kind):
			tx.Outcome = TimedOut
			tx.End = tx.Last
			if tx.Segments > 0 {
				tx.Missing = tx.Segments - tx.SegmentsSeen
			}
			tr.stats.TimedOut++
			tr.reasm.Drop(tx.key)
			tr.close(tx)
		}
		e = next
	}
}

// Flush ends the capture: running transactions become Incomplete, and
// every transaction is added to the statistics and forgotten.
func (tr *Tracker) Flush() {
	for e := tr.lru.Front(); e != nil; {
		next := e.Next()
		tx := e.Value.(*Transaction)
		if !tx.Outcome.Final() {
			tx.Outcome = Incomplete
			if tx.Segments > 0 {
				tx.Missing = tx.Segments - tx.SegmentsSeen
			}
			tr.close(tx)
		}
		tr.finalize(tx)
		e = next
	}
}

// fmtDuration prints a duration rounded to what a reader wants.
func fmtDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
