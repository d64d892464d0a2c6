package dissect_test

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/packet"
)

var (
	ini  = netip.MustParseAddrPort("127.0.0.1:40001")
	corr = netip.MustParseAddrPort("127.0.0.1:7530")
	t0   = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
)

// tk drives a Tracker with made-up heads.
type tk struct {
	t      *testing.T
	tr     *dissect.Tracker
	seed   maphash.Seed
	now    time.Time
	closed []*dissect.Transaction
}

func newTK(t *testing.T, cfg *dissect.TrackerConfig) *tk {
	k := &tk{t: t, seed: maphash.MakeSeed(), now: t0}
	k.tr = dissect.NewTracker(cfg, nil)
	k.tr.OnClose = func(tx *dissect.Transaction) { k.closed = append(k.closed, tx) }
	return k
}

// pkt sends one packet after dt; cf says who sends it.
func (k *tk) pkt(dt time.Duration, tkind codec.TransactionKind, pk codec.PacketKind, cf bool, mod func(h *codec.Head)) (dissect.Note, []byte) {
	k.now = k.now.Add(dt)
	var h codec.Head
	h.Reset()
	h.TransactionKind, h.PacketKind, h.SessionID, h.TransactionID = tkind, pk, 2, 7
	h.SetCorrespondent(cf)
	coat := []byte{}
	if mod != nil {
		mod(&h)
	}
	if h.Segment() {
		coat = segPayload(int(h.SegmentNumber), int(h.SegmentCount))
	}
	src, dst := ini, corr
	if cf {
		src, dst = corr, ini
	}
	data := []byte(fmt.Sprintf("%v %v %v %d %v", tkind, pk, cf, h.SegmentNumber, h.Flags))
	return k.tr.Observe(k.now, src, dst, &h, coat, data, k.seed, true)
}

// segPayload is segment sn of a message of sc segments of 10 bytes.
func segPayload(sn, sc int) []byte {
	return []byte(fmt.Sprintf("seg%03d....", sn)[:10])
}

func seg(sn, sc int, again, wait bool) func(h *codec.Head) {
	return func(h *codec.Head) {
		h.SegmentNumber, h.SegmentCount, h.MessageLength = uint16(sn), uint16(sc), uint32(10*sc)
		h.SetSegment(true)
		h.SetAgain(again)
		h.SetWait(wait)
	}
}

const (
	msg   = codec.TransactionKindMessage
	join  = codec.TransactionKindJoin
	allow = codec.TransactionKindAllow
	alive = codec.TransactionKindAlive
)

func TestTrackerMessageWithResends(t *testing.T) {
	k := newTK(t, nil)
	const sc = 5
	for _, sn := range []int{0, 1, 3} {
		n, whole := k.pkt(time.Millisecond, msg, codec.PacketKindMessage, false, seg(sn, sc, false, false))
		if whole != nil || n.Retransmit {
			t.Fatalf("segment %d: %+v", sn, n)
		}
	}
	n, _ := k.pkt(time.Millisecond, msg, codec.PacketKindMessage, false, seg(4, sc, false, true))
	if !strings.Contains(n.Event, "segment 4 of 5") {
		t.Fatalf("event %q", n.Event)
	}
	n, _ = k.pkt(time.Millisecond, msg, codec.PacketKindResend, true, nil)
	if n.Event != "resend request (4 of 5 segments seen)" {
		t.Fatalf("resend: %q", n.Event)
	}
	// Segment 3 again (a duplicate), then 2 resent with af: it completes.
	n, whole := k.pkt(time.Millisecond, msg, codec.PacketKindMessage, false, seg(3, sc, true, false))
	if !n.Retransmit || whole != nil {
		t.Fatalf("duplicate: %+v", n)
	}
	n, whole = k.pkt(time.Millisecond, msg, codec.PacketKindMessage, false, seg(2, sc, true, true))
	if !n.Retransmit || string(whole) != "seg000....seg001....seg002....seg003....seg004...." {
		t.Fatalf("completion: %+v %q", n, whole)
	}
	n, _ = k.pkt(time.Millisecond, msg, codec.PacketKindDone, true, nil)
	tx := n.Txn
	if !n.Ends || tx.Outcome != dissect.Done || n.Duration != 7*time.Millisecond || tx.Retransmits != 2 ||
		tx.ResendRequests != 1 || tx.Missing != 0 || !tx.Reassembled {
		t.Fatalf("done: %+v %+v", n, tx)
	}
	// A late retransmission and the stale nack it draws.
	n, _ = k.pkt(time.Millisecond, msg, codec.PacketKindMessage, false, seg(4, sc, true, true))
	if !strings.Contains(n.Event, "after the end") || !n.Retransmit {
		t.Fatalf("late: %+v", n)
	}
	n, _ = k.pkt(time.Millisecond, msg, codec.PacketKindNack, true, nil)
	if !n.Stale || tx.StaleNacks != 1 || tx.Outcome != dissect.Done {
		t.Fatalf("stale nack: %+v %+v", n, tx)
	}
	if len(k.closed) != 1 {
		t.Fatalf("closed %d times", len(k.closed))
	}
}

func TestTrackerMissingAndTimeout(t *testing.T) {
	k := newTK(t, &dissect.TrackerConfig{MessageTimeout: time.Second})
	k.pkt(0, msg, codec.PacketKindMessage, false, seg(0, 4, false, false))
	k.pkt(time.Millisecond, msg, codec.PacketKindMessage, false, seg(3, 4, false, true))
	// Another transaction two seconds later times the first out.
	n, _ := k.pkt(2*time.Second, alive, codec.PacketKindRequest, false, nil)
	if len(k.closed) != 1 || k.closed[0].Outcome != dissect.TimedOut || k.closed[0].Missing != 2 {
		t.Fatalf("closed %+v", k.closed)
	}
	n, _ = k.pkt(time.Millisecond, alive, codec.PacketKindAck, true, nil)
	if n.Txn.Outcome != dissect.Done {
		t.Fatalf("alive: %+v", n.Txn)
	}
	// A nack for nothing in the capture is stale.
	n, _ = k.pkt(time.Millisecond, join, codec.PacketKindNack, true, func(h *codec.Head) { h.TransactionID = 99 })
	if !n.Stale || !strings.Contains(n.Event, "no such transaction") {
		t.Fatalf("nack: %+v", n)
	}
	k.tr.Flush()
}

func TestTrackerHandshakes(t *testing.T) {
	k := newTK(t, nil)
	k.pkt(0, join, codec.PacketKindRequest, false, nil)
	n, _ := k.pkt(time.Millisecond, join, codec.PacketKindPend, true, nil)
	if n.Txn.Outcome != dissect.Pended {
		t.Fatalf("pend: %+v", n.Txn)
	}
	// The joiner repeats its request: the same bytes.
	n, _ = k.pkt(time.Second, join, codec.PacketKindRequest, false, nil)
	if !n.Retransmit {
		t.Fatalf("repeat: %+v", n)
	}
	k.pkt(time.Millisecond, join, codec.PacketKindResponse, true, nil)
	n, _ = k.pkt(time.Millisecond, join, codec.PacketKindAck, false, nil)
	if n.Txn.Outcome != dissect.Done || !n.Ends {
		t.Fatalf("join: %+v", n.Txn)
	}
	// The same ids again after the end: a new transaction (a stack restarted).
	n, _ = k.pkt(time.Second, join, codec.PacketKindRequest, false, nil)
	if n.Txn.Outcome != dissect.Open || n.Txn.Packets != 1 || n.Retransmit {
		t.Fatalf("restart: %+v", n.Txn)
	}
	k.pkt(time.Millisecond, join, codec.PacketKindReject, true, nil)
	for _, step := range []struct {
		pk codec.PacketKind
		cf bool
	}{{codec.PacketKindHello, false}, {codec.PacketKindCookie, true}, {codec.PacketKindInitiate, false}, {codec.PacketKindAck, true}} {
		n, _ = k.pkt(time.Millisecond, allow, step.pk, step.cf, nil)
		if n.Ends {
			t.Fatalf("allow ended at %v", step.pk)
		}
	}
	n, _ = k.pkt(time.Millisecond, allow, codec.PacketKindAck, false, nil)
	if n.Txn.Outcome != dissect.Done || n.Duration != 4*time.Millisecond {
		t.Fatalf("allow: %+v", n)
	}
	k.pkt(time.Millisecond, alive, codec.PacketKindRequest, false, nil)
	n, _ = k.pkt(time.Millisecond, alive, codec.PacketKindUnallowed, true, nil)
	if n.Txn.Outcome != dissect.Unallowed {
		t.Fatalf("alive: %+v", n.Txn)
	}
}

// The tracker's memory is bounded: transactions beyond the cap are evicted,
// least recently active first, and reassembly stops at its byte limit.
func TestTrackerBounds(t *testing.T) {
	st := dissect.NewStats()
	tr := dissect.NewTracker(&dissect.TrackerConfig{MaxTransactions: 10,
		Reassembly: packet.ReassemblyConfig{MaxBuffered: 1000}}, st)
	seed := maphash.MakeSeed()
	var h codec.Head
	for i := 0; i < 100; i++ {
		h.Reset()
		h.SessionID, h.TransactionID = 2, uint32(i)
		h.SegmentNumber, h.SegmentCount, h.MessageLength = 0, 3, 900
		h.SetSegment(true)
		tr.Observe(t0.Add(time.Duration(i)*time.Millisecond), ini, corr, &h, make([]byte, 300), []byte{byte(i)}, seed, true)
		if tr.Len() > 10 {
			t.Fatalf("%d transactions kept", tr.Len())
		}
	}
	if st.Evicted != 90 {
		t.Fatalf("evicted %d", st.Evicted)
	}
	// A first segment of 300 bytes of a 900-byte message is charged its
	// 1 KiB chunk and the bookkeeping: 3 fit in 4000 bytes, the fourth is
	// refused.
	if c := 1024 + packet.SlotCharge + packet.SegmentCharge; 3*c > 4000 || 4*c <= 4000 {
		t.Fatalf("a message is charged %d", c)
	}
	tr = dissect.NewTracker(&dissect.TrackerConfig{Reassembly: packet.ReassemblyConfig{MaxBuffered: 4000}}, nil)
	var refused int
	for i := 0; i < 4; i++ {
		h.Reset()
		h.SessionID, h.TransactionID = 2, uint32(i)
		h.SegmentNumber, h.SegmentCount, h.MessageLength = 0, 3, 900
		h.SetSegment(true)
		n, _ := tr.Observe(t0, ini, corr, &h, make([]byte, 300), []byte{byte(i)}, seed, true)
		if n.Err != nil {
			refused++
		}
	}
	if refused != 1 {
		t.Fatalf("%d refused", refused)
	}
	tr.Flush()
	if tr.Len() != 0 {
		t.Fatal("flush kept transactions")
	}
}
