package core

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
)

// heldStore is a store that writes behind and reports nothing durable
// until the test says (done), as a keep.Writer whose disk is slow; while
// full it refuses writes as a full queue does.
type heldStore struct {
	*memStore
	seq    uint64       // the last write taken
	writes []*keepWrite // taken, in order
	full   bool
}

func newHeldStore() *heldStore { return &heldStore{memStore: newMemStore()} }

func (h *heldStore) write(w *keepWrite) (uint64, error) {
	if h.full {
		return 0, errKeepFull
	}
	h.seq++
	h.writes = append(h.writes, w)
	_, _ = h.memStore.write(w)
	return h.seq, nil
}

// durable reports every write taken durable to c.
func (h *heldStore) durable(p *pair, c *Core) {
	c.KeepDurable(h.seq, nil, p.now)
	p.pump()
}

// heldPair starts a main, whose keep is a heldStore, and another estate,
// with the main's writes of its start durable.
func heldPair(t *testing.T, mainCfg Config) (*pair, *heldStore) {
	st := newHeldStore()
	p := newRig(t)
	p.main = p.newCore(&estate{Config: mainCfg, Auto: keep.AutoAlways}, st)
	p.other = p.newCore(&estate{Config: Config{Name: "other", AlivePeriod: -1}, Auto: keep.AutoAlways}, nil)
	p.main.Start(p.mainAddr, p.now)
	p.other.Start(p.otherAddr, p.now)
	st.durable(p, p.main)
	return p, st
}

// A join's acceptance reaches the joiner only once the main's keep holds
// what it wrote for it: the response that accepts the joiner waits for the
// role's write, the allow that follows waits for the estate's; each goes
// out when the owner reports the write durable, and then the join
// completes.
func TestJoinAcceptedOnlyWhenDurable(t *testing.T) {
	p, st := heldPair(t, Config{Name: "main", Main: true, AlivePeriod: -1})
	started := len(st.writes)

	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(200 * time.Millisecond) // the joinent's retransmission timer too
	responses := func() int { return len(p.captured(0, p.main, codec.TransactionKindJoin, codec.PacketKindResponse)) }
	if n := responses(); n != 0 {
		t.Fatalf("%d join responses sent before the role's write was durable", n)
	}
	if w := st.writes[started:]; len(w) != 1 || w[0].op != opSaveRole || w[0].role.Acceptance != keep.Accepted {
		t.Fatalf("main wrote %+v; want the joiner's role, accepted", w)
	}
	if o := p.otherRemote(); o != nil && o.joined {
		t.Fatal("the joiner joined before the main's keep held its keys")
	}

	st.durable(p, p.main) // the role: the response goes, the joiner acks
	if n := responses(); n != 1 {
		t.Fatalf("%d join responses once the role was durable; want 1", n)
	}
	r := p.mainRemote()
	if r == nil || !r.joined {
		t.Fatal("the main did not take the joiner's ack")
	}
	if !p.other.roster.byName["main"].joined {
		t.Fatal("the joiner did not take the response")
	}
	// The joiner allows at once; the main's answer waits for the estate.
	cookies := func() int { return len(p.captured(0, p.main, codec.TransactionKindAllow, codec.PacketKindCookie)) }
	if n := cookies(); n != 0 {
		t.Fatalf("%d allow cookies sent before the joined estate was durable", n)
	}
	select {
	case err := <-res:
		t.Fatalf("the join ended (%v) before the main's keep held the joined estate", err)
	default:
	}
	for range 3 { // the estate; then the allowed estate
		st.durable(p, p.main)
	}
	p.advance(10 * time.Millisecond)
	select {
	case err := <-res:
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatal("no outcome once the writes were durable")
	}
	if !r.allowed || !p.otherRemote().allowed {
		t.Fatal("not allowed on both sides")
	}
	var estate *keepWrite
	for _, w := range st.writes {
		if w.op == opSaveRemote && w.remote.Name == "other" && w.remote.Joined != nil && *w.remote.Joined {
			estate = w
		}
	}
	if estate == nil {
		t.Fatalf("no joined estate written: %+v", st.writes)
	}
	if p.main.KeepPending() {
		t.Fatal("writes still pending")
	}
}

// A join that finds the keep's writes backed up is answered with a pend
// that says keep-busy, counted and reported on both sides, and nothing is
// written for it; the joiner asks again and joins once the keep caught up.
// A full store queue (the core holds the writes, in order) makes joins
// keep-busy too, until the writes went.
func TestJoinKeepBusy(t *testing.T) {
	p, st := heldPair(t, Config{Name: "main", Main: true, AlivePeriod: -1, KeepQueue: 2})

	// A stranger's join leaves one write not yet durable: half the queue,
	// all a stranger may wait on.
	p.inject(p.main, p.namedJoin(t, "first"), netip.MustParseAddrPort("127.50.0.1:9000"))
	if len(st.writes) != 2 {
		t.Fatalf("%d writes; want the local estate and first's role", len(st.writes))
	}
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	if n := p.main.Counters().Drops["keep_busy"]; n != 1 {
		t.Fatalf("keep_busy drops %d; want 1", n)
	}
	if len(st.writes) != 2 {
		t.Fatalf("a busy join wrote: %+v", st.writes[2:])
	}
	busy := func(c *Core) bool {
		for _, e := range p.events[c] {
			if e.Kind == EventPending && e.Reason == ReasonKeepBusy {
				return true
			}
		}
		return false
	}
	if !busy(p.main) || !busy(p.other) {
		t.Fatalf("keep-busy not reported: main %v, other %v", p.events[p.main], p.events[p.other])
	}
	if p.main.roster.byName["other"] != nil {
		t.Fatal("a busy join made a remote")
	}

	// The store fills up: the core holds the writes, joins stay busy.
	st.full = true
	st.durable(p, p.main)
	p.main.saveLocal()
	if len(p.main.kept.queue.backlog) != 1 || !p.main.keepBusy(false) {
		t.Fatalf("backlog %d, busy %v; want the write held and joins busy", len(p.main.kept.queue.backlog), p.main.keepBusy(false))
	}
	p.advance(1500 * time.Millisecond) // the joiner asks again
	if n := p.main.Counters().Drops["keep_busy"]; n < 2 {
		t.Fatalf("keep_busy drops %d with the store full; want 2 or more", n)
	}

	st.full = false
	st.durable(p, p.main) // the held write goes, then is durable
	st.durable(p, p.main)
	for i := 0; i < 20 && len(res) == 0; i++ {
		p.advance(500 * time.Millisecond)
		st.durable(p, p.main)
	}
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("the join after the keep caught up: %v", err)
		}
	default:
		t.Fatal("the joiner never joined")
	}
}

// A store that fails fails the keep for good: what waited on it is dropped
// (keep_failed), and joins are answered keep-busy with a hint that says
// so.
func TestKeepFailed(t *testing.T) {
	p, st := heldPair(t, Config{Name: "main", Main: true, AlivePeriod: -1})
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	disk := fmt.Errorf("%w: no space left on device", keep.ErrWriterFailed)
	p.main.KeepDurable(st.seq, disk, p.now)
	p.pump()
	if !errors.Is(p.main.KeepErr(), keep.ErrWriterFailed) || p.main.KeepPending() {
		t.Fatalf("KeepErr %v, pending %v", p.main.KeepErr(), p.main.KeepPending())
	}
	if n := p.main.Counters().Drops["keep_failed"]; n != 1 {
		t.Fatalf("keep_failed drops %d; want the held response", n)
	}
	if n := len(p.captured(0, p.main, codec.TransactionKindJoin, codec.PacketKindResponse)); n != 0 {
		t.Fatalf("%d responses sent for keys the keep did not hold", n)
	}
	before := len(st.writes)
	p.advance(1500 * time.Millisecond) // the main's joinent sends its response again: dropped too
	p.inject(p.main, p.namedJoin(t, "second"), netip.MustParseAddrPort("127.50.0.1:9000"))
	if len(st.writes) != before {
		t.Fatal("a failed keep was written")
	}
	if n := len(p.captured(0, p.main, codec.TransactionKindJoin, codec.PacketKindResponse)); n != 0 {
		t.Fatalf("%d responses sent again for keys the keep did not hold", n)
	}
	if p.main.Counters().Drops["keep_busy"] != 1 {
		t.Fatal("a join to a failed keep was not answered keep-busy")
	}
}

// While a batch is written, the writes made go to the store together once
// it is durable, a file written twice among them once (the later, in its
// place), and what waited on the earlier write to it waits on the later.
func TestKeepGroupCommit(t *testing.T) {
	st := newHeldStore()
	p := newRig(t)
	p.main = p.newCore(&estate{Config: Config{Name: "main", Main: true, AlivePeriod: -1}, Auto: keep.AutoAlways}, st)
	p.main.Start(p.mainAddr, p.now)
	c := p.main
	r := c.newRemote(p.otherAddr, 5, 0)
	r.name, r.role = "other", "other"
	c.addRemote(r)
	c.saveRemote(r, true) // the local estate is in flight: this waits
	c.deleteRemote("gone")
	r.sid = 7
	c.saveRemote(r, false) // replaces the first; the hold moves to it
	if len(st.writes) != 1 || len(c.kept.queue.backlog) != 3 {
		t.Fatalf("%d writes taken, %d queued; want the local estate, and 3 for the next batch", len(st.writes), len(c.kept.queue.backlog))
	}
	c.transmit([]byte("held"), nil, p.otherAddr, &codec.Head{}, nil)
	if len(c.tx.out) != 0 || len(c.kept.queue.held) != 1 {
		t.Fatal("a datagram to an address with a write under way was not held")
	}
	c.KeepDurable(st.seq, nil, p.now) // the local estate: the next batch goes
	if w := st.writes[1:]; len(w) != 2 || w[0].op != opDeleteRemote || w[1].op != opSaveRemote || w[1].remote.SID != 7 {
		t.Fatalf("the next batch: %+v; want the delete, then other's estate once (sid 7)", w)
	}
	c.KeepDurable(st.seq-1, nil, p.now) // the delete, made after the estate it replaced
	if len(c.tx.out) != 0 {
		t.Fatal("released before the estate that replaced the one it waited on was durable")
	}
	c.KeepDurable(st.seq, nil, p.now)
	if len(c.tx.out) != 1 || c.KeepPending() {
		t.Fatalf("%d datagrams out, pending %v once all is durable", len(c.tx.out), c.KeepPending())
	}
}

// A join and the allow that follows write the joiner's estate once on the
// main: the joined estate keeps the session the allow makes, so the allow
// writes nothing (a main joining many writes one estate file a join, not a
// second that replaces it). A later allow writes its new session; and a
// main restarted from its keep starts past every session it used.
func TestJoinAllowOneEstateWrite(t *testing.T) {
	p, st := heldPair(t, Config{Name: "main", Main: true, AlivePeriod: -1})
	started := len(st.writes)
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	for range 5 {
		p.pump()
		st.durable(p, p.main)
		p.advance(10 * time.Millisecond)
	}
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("join and allow: %v (%v)", err, ok)
	}
	r := p.mainRemote()
	estates := func(from int) []keep.RemoteEstate {
		var es []keep.RemoteEstate
		for _, w := range st.writes[from:] {
			if w.op == opSaveRemote && w.remote.Name == "other" {
				es = append(es, w.remote)
			}
		}
		return es
	}
	es := estates(started)
	if !r.allowed || len(es) != 1 || es[0].Joined == nil || !*es[0].Joined || es[0].SID != r.sid || r.sid != 2 {
		t.Fatalf("allowed %v, session %d; estates written %+v; want one, joined, with the allow's session 2", r.allowed, r.sid, es)
	}

	before := len(st.writes)
	if err, ok := p.reallow(time.Second); !ok || err != nil {
		t.Fatalf("allow again: %v (%v)", err, ok)
	}
	st.durable(p, p.main)
	if es := estates(before); r.sid != 3 || len(es) != 1 || es[0].SID != 3 {
		t.Fatalf("session %d; a later allow wrote %+v; want its session 3", r.sid, es)
	}

	again, err := New(&Config{Name: "main", Main: true, AlivePeriod: -1, Auto: keep.AutoAlways}, st.memStore, p.now)
	if err != nil {
		t.Fatal(err)
	}
	if rr := again.roster.byName["other"]; rr == nil || rr.sid != 4 {
		t.Fatalf("restarted: %+v; want other at session 4, past the 3 used", rr)
	}
}
