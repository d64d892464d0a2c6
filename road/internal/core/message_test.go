package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/packet"
)

// payload is the deterministic body of message i: sizes from 10 B to 64 KiB.
func payload(i int) string {
	r := rand.New(rand.NewPCG(uint64(i), 99))
	sizes := []int{10, 200, 900, 1500, 4000, 20000, 65536}
	n := sizes[r.IntN(len(sizes))]
	return strings.Repeat(string(rune('a'+i%26)), n)
}

// sendMany has from send n messages (payload(i) under "data", i under
// "id") to its peer, at most window at a time, advancing the clock until
// all are done or limit passes, and returns the outcomes.
func (p *pair) sendMany(from *Core, n, window int, limit time.Duration) map[int]error {
	p.tb.Helper()
	to := p.otherRemote().name
	if from == p.main {
		to = p.mainRemote().name
	}
	results := make([]chan error, n)
	done := map[int]error{}
	next := 0
	end := p.now.Add(limit)
	for len(done) < n && p.now.Before(end) {
		for next < n && next-len(done) < window {
			b, err := from.marshal(map[string]any{"id": next, "data": payload(next)})
			if err != nil {
				p.tb.Fatal(err)
			}
			results[next] = make(chan error, 1)
			from.Send(to, b, from.cfg.BodyKind, MsgID{}, results[next], p.now, p.now)
			next++
		}
		p.pump()
		p.advance(time.Millisecond)
		for i := range next {
			if _, ok := done[i]; ok {
				continue
			}
			if err, ok := outcome(results[i]); ok {
				done[i] = err
			}
		}
	}
	return done
}

// Over a link that loses, duplicates, reorders and delays datagrams, 300
// messages of mixed sizes (1000 without -short) are each delivered exactly
// once and intact, with the fast profile (the NaCl coat and MAC foot, and
// an AEAD coat: retransmissions sealed anew) and with the reference one;
// with the reference and AEAD profiles also with the feet left for the
// stack to sign (Config.SignLater: the reference's signed later, AEAD
// packets have none).
func TestLossyNetworkExactlyOnce(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 300
	}
	for _, tc := range []struct {
		loss      float64
		prof      testProfile
		signLater bool
	}{{0, macProfile, false}, {0.10, macProfile, false}, {0.30, macProfile, false}, {0, aeadProfile, false}, {0.10, aeadProfile, false},
		{0.30, aeadProfile, false}, {0.10, refProfile, false}, {0.10, refProfile, true}, {0.10, aeadProfile, true}} {
		name := tc.prof.name
		if tc.signLater {
			name += "-signlater"
		}
		t.Run(fmt.Sprintf("%s/loss%.0f%%", name, tc.loss*100), func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) {
				tc.prof.set(m, o)
				m.SignLater, o.SignLater = tc.signLater, tc.signLater
			})
			l := p.impair(t, netsim.Impairment{Loss: tc.loss, Duplicate: 0.05, Reorder: 0.10, Delay: 200 * time.Microsecond,
				Jitter: 100 * time.Microsecond, Seed: uint64(tc.loss * 1000)})
			var joinErr error
			for range 10 {
				res := make(chan error, 1)
				if _, up := p.other.Join(p.mainAddr, res, p.now); up {
					break
				}
				p.pump()
				p.advance(30 * time.Second)
				var ok bool
				if joinErr, ok = outcome(res); ok && joinErr == nil {
					break
				}
			}
			if joinErr != nil {
				t.Fatal(joinErr)
			}
			want := map[testProfile]codec.FootKind{refProfile: codec.FootKindNaCl, macProfile: codec.FootKindMAC, aeadProfile: codec.FootKindNada}[tc.prof]
			if r, _ := p.other.RemoteNamed("main"); r.FootKind != want || packet.IsAEAD(r.CoatKind) != (tc.prof == aeadProfile) {
				t.Fatalf("session profile %+v", r)
			}
			results := p.sendMany(p.other, n, 32, 10*time.Minute)
			for i := range n {
				if err, ok := results[i]; !ok || err != nil {
					t.Errorf("send %d: %v (done %v)", i, err, ok)
				}
			}
			p.advance(2 * time.Second) // late duplicates and retransmissions
			received := map[int]int{}
			for _, m := range p.delivered[p.main] {
				var id int
				fmt.Sscan(fmt.Sprint(m.Body["id"]), &id)
				received[id]++
				if m.Body["data"] != payload(id) {
					t.Errorf("message %d arrived damaged", id)
				}
			}
			for i := range n {
				if received[i] != 1 {
					t.Errorf("message %d delivered %d times", i, received[i])
				}
			}
			if b := p.count(p.other, codec.TransactionKindMessage, codec.PacketKindBundle); (b > 0) != (tc.prof != refProfile) {
				t.Errorf("%d bundles sent: the fast profile bundles, the reference does not", b)
			}
			st := l.stats()
			if tc.loss > 0 && (st.Dropped == 0 || st.Duplicated == 0 || st.Reordered == 0) {
				t.Errorf("the link did not impair: %+v", st)
			}
			c := p.other.Counters()
			t.Logf("%s profile, loss %.0f%%: %d messages; sender retransmits %d; link %+v", name, tc.loss*100, n, c.Retransmits, st)
		})
	}
}

// A large message in small bursts: each burst waits for its ack, segments
// lost on the way are asked for again (resend), and it arrives whole.
func TestMessageBurstsAndResends(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { o.BurstSize = 8 })
	p.join()
	n := 0
	p.cut = func(w wired) bool {
		var pk packet.Packet
		if w.from != p.other || packet.Parse(w.b, &pk) != nil || pk.Head.PacketKind != codec.PacketKindMessage {
			return false
		}
		n++
		return n%5 == 0 && !pk.Head.Again() // a first copy in five is lost
	}
	body := map[string]any{"data": strings.Repeat("y", 200_000)}
	if err := p.send(p.other, body); err != nil {
		if !errors.Is(err, errNoOutcome) {
			t.Fatal(err)
		}
		p.advance(5 * time.Second)
	}
	got := p.delivered[p.main]
	if len(got) != 1 || got[0].Body["data"] != body["data"] {
		t.Fatalf("delivered %d messages", len(got))
	}
	if p.count(p.main, codec.TransactionKindMessage, codec.PacketKindAck) == 0 ||
		p.count(p.main, codec.TransactionKindMessage, codec.PacketKindResend) == 0 {
		t.Fatal("no acks or no resends")
	}
	if c := p.other.Counters(); c.MessagesOut != 1 || c.Retransmits == 0 || c.RTT.Count != 1 {
		t.Fatalf("sender counters %+v", c)
	}
}

// A message with no answer is sent again (its last packet, unchanged),
// then fails with ErrTimeout at MessageTimeout; the receiver of a message
// that stops half way nacks it at its own timeout.
func TestMessageTimeouts(t *testing.T) {
	// Long enough for three copies on the timer of a first message: 1 s,
	// then 2 s and 2.5 s (firstMessageRedo, backed off).
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.MessageTimeout, o.MessageTimeout = 6*time.Second, 6*time.Second })
	p.join()
	p.cut = func(w wired) bool { return w.from == p.main }
	res := make(chan error, 1)
	b, _ := p.other.marshal(map[string]any{"n": 1})
	p.other.Send("main", b, codec.BodyKindJSON, MsgID{}, res, p.now, p.now)
	p.pump()
	p.advance(5900 * time.Millisecond)
	if _, ok := outcome(res); ok {
		t.Fatal("ended before its timeout")
	}
	p.advance(200 * time.Millisecond)
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrTimeout) {
		t.Fatalf("send: %v (%v)", err, ok)
	}
	if c := p.other.Counters(); c.Retransmits < 3 || c.MessageFails != 1 {
		t.Fatalf("counters %+v", c)
	}

	// Half a message: main waits for the rest, asks for it, then nacks.
	nacks := p.count(p.main, codec.TransactionKindMessage, codec.PacketKindNack)
	seen := 0
	p.cut = func(w wired) bool {
		if w.from != p.other {
			return false
		}
		seen++
		return seen > 2
	}
	big, _ := p.other.marshal(map[string]any{"data": strings.Repeat("z", 20_000)})
	p.other.Send("main", big, codec.BodyKindJSON, MsgID{}, make(chan error, 1), p.now, p.now)
	p.pump()
	p.advance(7 * time.Second)
	if got := p.count(p.main, codec.TransactionKindMessage, codec.PacketKindNack); got != nacks+1 {
		t.Fatalf("main nacked %d times, want once", got-nacks)
	}
	if n := len(p.mainRemote().inProcess(codec.TransactionKindMessage)); n != 0 {
		t.Fatalf("main holds %d messages", n)
	}
}

// A message to a remote that is not allowed fails at once; one nacked by
// the receiver fails with ErrRejected.
func TestMessageRefused(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	r := p.otherRemote()
	r.allowed = false
	err := p.send(p.other, map[string]any{"n": 1})
	if !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("to a remote not allowed: %v", err)
	}
	r.allowed = true
	p.mainRemote().allowed = false // main nacks what it gets
	if err := p.send(p.other, map[string]any{"n": 2}); !errors.Is(err, ErrRejected) {
		t.Fatalf("nacked: %v", err)
	}
}

// holdDeliveries carries the datagrams between the rig's estates for steps
// of 50 ms while main's deliveries stay queued, untaken.
func (p *pair) holdDeliveries(steps int) {
	for range steps {
		for _, c := range p.cores() {
			out := c.TakeOut(nil)
			for i := range out {
				if to := p.coreAt(out[i].To); to != nil {
					p.wire = append(p.wire, wired{from: c, b: append([]byte(nil), out[i].B...)})
					p.feed(to, out[i].B, p.addrOf(c))
				}
				out[i].Release()
			}
		}
		p.now = p.now.Add(50 * time.Millisecond)
		for _, c := range p.cores() {
			if d := c.Deadline(); !d.IsZero() && !d.After(p.now) {
				c.Tick(p.now)
			}
		}
	}
}

// While the receive queue is full, a whole message is held, not
// acknowledged; as the queue is taken, those held are delivered into the
// room it frees at once, in the order they came, and done: no timer waits
// (which stalled a window of messages for the sender's 1 s redo).
func TestReceiveQueueFull(t *testing.T) {
	const queue, sent = 2, 7
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.ReceiveQueue = queue })
	p.join()
	hold := p.main
	var res []chan error
	for i := range sent {
		ch := make(chan error, 1)
		res = append(res, ch)
		b, _ := p.other.marshal(map[string]any{"n": i})
		p.other.Send("main", b, codec.BodyKindJSON, MsgID{}, ch, p.now, p.now)
	}
	p.holdDeliveries(20)
	if n := len(hold.Deliveries()); n != queue {
		t.Fatalf("%d deliveries queued, want the queue's %d", n, queue)
	}
	for i := queue; i < sent; i++ {
		if _, ok := outcome(res[i]); ok {
			t.Fatalf("held message %d was done", i)
		}
	}
	if got := hold.stats.drops[dropReceiveQueueFull]; got != sent-queue {
		t.Fatalf("receive_queue_full counted %d, want one per held message (%d)", got, sent-queue)
	}
	// Take the queue a few at a time, the clock stopped.
	for range sent {
		p.collect(hold)
		p.pump()
	}
	if len(p.delivered[hold]) != sent {
		t.Fatalf("delivered %d of %d with the clock stopped", len(p.delivered[hold]), sent)
	}
	for i, m := range p.delivered[hold] {
		if m.Body["n"] != float64(i) && m.Body["n"] != int64(i) && m.Body["n"] != uint64(i) {
			t.Fatalf("delivery %d is message %v: out of order", i, m.Body["n"])
		}
	}
	for i, ch := range res {
		if err, ok := outcome(ch); !ok || err != nil {
			t.Fatalf("send %d: %v (%v), the clock stopped", i, err, ok)
		}
	}
	if hold.rx.roomWaits.len() != 0 {
		t.Fatalf("%d left waiting for room", hold.rx.roomWaits.len())
	}
}

// Two messages of one id (a sender restarted on its durable queue) both
// held for room: the first is delivered, the second is done and not.
func TestReceiveQueueHeldRepeatedID(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.ReceiveQueue = 1 })
	p.join()
	if !p.mainRemote().prof.mids {
		t.Fatal("the pair did not negotiate message ids")
	}
	ids := []MsgID{{}, {Stream: 7, Seq: 1, Floor: 1}, {Stream: 7, Seq: 1, Floor: 1}}
	var res []chan error
	for i, id := range ids {
		ch := make(chan error, 1)
		res = append(res, ch)
		b, _ := p.other.marshal(map[string]any{"n": i})
		p.other.Send("main", b, codec.BodyKindJSON, id, ch, p.now, p.now)
	}
	p.holdDeliveries(20)
	for range ids {
		p.collect(p.main)
		p.pump()
	}
	if n := len(p.delivered[p.main]); n != 2 {
		t.Fatalf("delivered %d, want 2: the repeated id once", n)
	}
	for i, ch := range res {
		if err, ok := outcome(ch); !ok || err != nil {
			t.Fatalf("send %d: %v (%v)", i, err, ok)
		}
	}
	if p.main.stats.drops[dropMessageIDRepeated] != 1 {
		t.Fatalf("message_id_repeated %d, want 1", p.main.stats.drops[dropMessageIDRepeated])
	}
}

// A message held for room that times out is nacked, and room freed later
// does not deliver it.
func TestReceiveQueueHeldTimesOut(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.ReceiveQueue, m.MessageTimeout = 1, 5*time.Second })
	p.join()
	res := []chan error{make(chan error, 1), make(chan error, 1)}
	for i, ch := range res {
		b, _ := p.other.marshal(map[string]any{"n": i})
		p.other.Send("main", b, codec.BodyKindJSON, MsgID{}, ch, p.now, p.now)
	}
	p.holdDeliveries(6 * 20) // 6 s: past main's message timeout
	if err, ok := outcome(res[1]); !ok || !errors.Is(err, ErrRejected) {
		t.Fatalf("held past its timeout: %v (%v), want ErrRejected", err, ok)
	}
	if n := p.main.rx.roomWaiting; n != 0 {
		t.Fatalf("timed out, and %d counted waiting", n)
	}
	p.collect(p.main)
	p.pump()
	if n := len(p.delivered[p.main]); n != 1 {
		t.Fatalf("delivered %d, want only the one queued", n)
	}
	if p.main.rx.roomWaits.len() != 0 {
		t.Fatalf("%d left waiting for room", p.main.rx.roomWaits.len())
	}
}

// underWayAcrossAllow has what send sends go under way on a network that
// carries nothing, then other allow main again (a new session) with the
// network back.
func (p *pair) underWayAcrossAllow(send func()) {
	p.cut = func(wired) bool { return true }
	send()
	p.pump()
	p.cut = nil
	r := p.otherRemote()
	r.allowed = false
	p.other.startAllower(r, false)
	p.pump()
}

// A message under way when the session changes (a new allow) is saved and
// sent again in the new session, delivered once.
func TestMessageSavedAcrossAllow(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	res := make(chan error, 1)
	p.underWayAcrossAllow(func() {
		b, _ := p.other.marshal(map[string]any{"saved": true})
		sendPooled(p.other, "main", b, MsgID{}, res, p.now)
	})
	p.advance(time.Second)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("the saved message: %v (%v)", err, ok)
	}
	if got := p.delivered[p.main]; len(got) != 1 || got[0].Body["saved"] != true {
		t.Fatalf("delivered %+v", got)
	}
}

// Shutdown fails the Sends and Joins still waiting with ErrClosed.
func TestShutdown(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	p.cut = func(w wired) bool { return true }
	send := make(chan error, 1)
	b, _ := p.other.marshal(map[string]any{"n": 1})
	sendPooled(p.other, "main", b, MsgID{}, send, p.now)
	join := make(chan error, 1)
	p.other.Join(netip.MustParseAddrPort("127.0.0.3:7530"), join, p.now)
	p.other.Shutdown()
	for name, ch := range map[string]chan error{"send": send, "join": join} {
		if err, ok := outcome(ch); !ok || !errors.Is(err, ErrClosed) {
			t.Fatalf("%s: %v (%v)", name, err, ok)
		}
	}
}

// batchJSON is JSON under a kind of its own that is a BatchSerializer, so
// that a core with DecodeLater leaves its bodies to a decoder.
type batchJSON struct{ packet.Serializer }

func (batchJSON) Kind() codec.BodyKind { return codec.BodyKindZstdJSON }
func (b batchJSON) MarshalBatch(ctx context.Context, vs []any) ([][]byte, error) {
	return nil, errors.ErrUnsupported
}
func (b batchJSON) UnmarshalBatch(ctx context.Context, bodies [][]byte, vs []any) error {
	return errors.ErrUnsupported
}

// With DecodeLater, a body of a BatchSerializer's kind waits for the
// decoder (Decodes, Handed); Decoded delivers it, or nacks one that did not
// decode, and a message that ended meanwhile is left alone.
func TestDecodeLater(t *testing.T) {
	json, err := packet.SerializerFor(codec.BodyKindJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := packet.RegisterSerializer(batchJSON{json}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { packet.UnregisterSerializer(codec.BodyKindZstdJSON) })
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.DecodeLater = true; m.MessageTimeout = 2 * time.Second })
	p.join()
	send := func(n int) chan error {
		res := make(chan error, 1)
		b, _ := json.Marshal(nil, map[string]any{"n": n})
		p.other.Send("main", b, codec.BodyKindZstdJSON, MsgID{}, res, p.now, p.now)
		p.pump()
		return res
	}
	ok1, bad, late := send(1), send(2), send(3)
	ds := p.main.Decodes()
	if len(ds) != 3 || ds[0].Kind != codec.BodyKindZstdJSON || len(p.delivered[p.main]) != 0 {
		t.Fatalf("%d decodes, %d delivered", len(ds), len(p.delivered[p.main]))
	}
	d1, d2, d3 := ds[0], ds[1], ds[2]
	p.main.Handed(2)
	if len(p.main.Decodes()) != 1 || p.main.Decodes()[0] != d3 {
		t.Fatal("Handed did not take the first two")
	}
	var body map[string]any
	if err := json.Unmarshal(d1.Raw, &body); err != nil {
		t.Fatal(err)
	}
	p.main.Decoded(d1, body, nil, p.now)
	p.main.Decoded(d2, nil, errors.New("bad body"), p.now)
	p.pump()
	p.advance(3 * time.Second) // the third times out at main
	p.main.Decoded(d3, map[string]any{"n": 3}, nil, p.now)
	p.pump()
	if got := p.delivered[p.main]; len(got) != 1 || got[0].Body["n"] != body["n"] {
		t.Fatalf("delivered %+v", got)
	}
	if err, ok := outcome(ok1); !ok || err != nil {
		t.Fatalf("decoded: %v (%v)", err, ok)
	}
	if err, ok := outcome(bad); !ok || !errors.Is(err, ErrRejected) {
		t.Fatalf("undecodable: %v (%v)", err, ok)
	}
	if err, ok := outcome(late); ok && err == nil {
		t.Fatal("the timed-out message was done")
	}
}

// Messages that wait for room and time out, wave after wave while nobody
// takes deliveries, leave no more entries behind than twice the most that
// waited at once (and a floor), not one for each that ever waited.
func TestReceiveQueueWaitsBounded(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		m.ReceiveQueue, m.MessageTimeout, o.MessageTimeout = 1, time.Second, time.Second
	})
	p.join()
	const waves, perWave = 20, minRemoteWaits
	for w := range waves {
		for i := range perWave {
			b, _ := p.other.marshal(map[string]any{"w": w, "n": i})
			p.other.Send("main", b, codec.BodyKindJSON, MsgID{}, make(chan error, 1), p.now, p.now)
		}
		p.holdDeliveries(3 * 20) // 3 s: all of this wave time out
		if n := p.main.rx.roomWaits.len(); n > 2*perWave+minRoomSweep {
			t.Fatalf("wave %d: %d entries left, for at most %d waiting at once", w, n, perWave)
		}
	}
	if got := p.main.stats.drops[dropReceiveQueueFull]; got < waves*perWave/2 {
		t.Fatalf("only %d waited: the test did not fill the line", got)
	}
}

// sendEach has each of from send n messages to main, numbered, and
// returns their outcomes.
func (p *pair) sendEach(from []*Core, n int) []chan error {
	var res []chan error
	for _, c := range from {
		for i := range n {
			ch := make(chan error, 1)
			res = append(res, ch)
			b, _ := c.marshal(map[string]any{"n": i})
			sendPooled(c, "main", b, MsgID{}, ch, p.now)
		}
	}
	return res
}

// drain takes main's deliveries until all of res are done (or 30 s of
// the fake clock), and fails unless each estate's messages (sent counts
// of them, numbered) were delivered once and every send succeeded.
func (p *pair) drain(res []chan error, sent map[*Core]int) {
	p.tb.Helper()
	var errs []error
	for range 600 {
		p.advance(50 * time.Millisecond)
		for i := 0; i < len(res); i++ {
			if err, ok := outcome(res[i]); ok {
				errs = append(errs, err)
				res = slices.Delete(res, i, i+1)
				i--
			}
		}
		if len(res) == 0 {
			break
		}
	}
	if len(res) > 0 {
		p.tb.Fatalf("%d sends not done", len(res))
	}
	for _, err := range errs {
		if err != nil {
			p.tb.Fatalf("a send failed: %v", err)
		}
	}
	if p.main.rx.roomWaiting != 0 {
		p.tb.Fatalf("all done, and %d counted waiting", p.main.rx.roomWaiting)
	}
	for c := range sent {
		if r := p.main.roster.byName[c.local.name]; r.roomWaits != 0 {
			p.tb.Fatalf("all done, and %d of %s counted waiting", r.roomWaits, c.local.name)
		}
	}
	got := map[string]int{}
	for _, m := range p.delivered[p.main] {
		got[fmt.Sprint(m.From, "/", m.Body["n"])]++
	}
	for c, n := range sent {
		for i := range n {
			if k := fmt.Sprint(c.local.name, "/", i); got[k] != 1 {
				p.tb.Fatalf("%s's message %d delivered %d times", c.local.name, i, got[k])
			}
		}
	}
}

// One remote that sends far more than main's application reads holds at
// most its share of the messages waiting for room (a quarter of the
// line); what it sends beyond is dropped unanswered and sent again, while
// another remote's messages still wait their turn (none of them dropped).
// Then everything is delivered once.
func TestReceiveWaitsShare(t *testing.T) {
	const queue = 64
	p := newFleet(t, 2, func(m, o *estate) { m.ReceiveQueue = queue })
	flood, honest := p.other, p.extra[0]
	const floods, honests = queue + 100, 10
	res := p.sendEach([]*Core{flood}, floods)
	p.holdDeliveries(4)
	res = append(res, p.sendEach([]*Core{honest}, honests)...)
	p.holdDeliveries(20)
	fr, hr := p.main.roster.byName[flood.local.name], p.main.roster.byName[honest.local.name]
	if fr.roomWaits != queue/4 || hr.roomWaits != honests {
		t.Fatalf("waiting: %d of the flood's (want its share, %d), %d of the other's (want all %d)", fr.roomWaits, queue/4, hr.roomWaits, honests)
	}
	if p.main.stats.drops[dropReceiveWaitsFull] == 0 {
		t.Fatal("nothing counted receive_waits_full")
	}
	p.drain(res, map[*Core]int{flood: floods, honest: honests})
}

// The line of those waiting is bounded in all too: past as many as the
// receive queue holds, a remote under its share is dropped unanswered
// (and sends again). Once the remotes are forgotten, the line's room goes
// with theirs, and so do the spare transaction tables (Core.shrink).
func TestReceiveWaitsTotal(t *testing.T) {
	const queue = 64
	p := newFleet(t, 9, func(m, o *estate) { m.ReceiveQueue = queue })
	res := p.sendEach([]*Core{p.other}, queue)
	p.holdDeliveries(4)
	if n := len(p.main.Deliveries()); n != queue {
		t.Fatalf("%d queued, want %d", n, queue)
	}
	res = append(res, p.sendEach(p.extra, queue/4)...)
	p.holdDeliveries(20)
	if p.main.rx.roomWaiting != queue {
		t.Fatalf("%d waiting, want the line's %d", p.main.rx.roomWaiting, queue)
	}
	if p.main.stats.drops[dropReceiveWaitsFull] == 0 {
		t.Fatal("nothing counted receive_waits_full")
	}
	sent := map[*Core]int{p.other: queue}
	for _, c := range p.extra {
		sent[c] = queue / 4
	}
	p.drain(res, sent)
	if cap(p.main.rx.roomWaits.s) < queue || p.main.spares.txns.Len() == 0 {
		t.Fatalf("the line took room for %d, %d spare transaction tables: the test measures nothing", cap(p.main.rx.roomWaits.s), p.main.spares.txns.Len())
	}
	for _, r := range p.main.roster.remotes {
		p.main.forget(r, ReasonSilent)
	}
	if c, n := cap(p.main.rx.roomWaits.s), p.main.spares.txns.Len(); c != 0 || n != 0 {
		t.Fatalf("the remotes forgotten, the line keeps room for %d, and %d spare transaction tables are kept", c, n)
	}
}

// A main's fan-out answered in bursts makes no messenger and no send window
// anew after its first round: the messengers of the messages that ended
// carry the next ones, small and segmented alike, and start each afresh:
// every message arrives once, with its own body. A spare is out of every
// transaction and bundle, and holds no body and no caller; a spare window
// holds nothing under way.
func TestMessengersReused(t *testing.T) {
	eachFastProfile(t, func(t *testing.T, tp testProfile) {
		const remotes = 12
		p := newFleet(t, remotes, tp.set)
		peers := append([]*Core{p.other}, p.extra...)
		underWay := func() map[*messenger]bool {
			out := map[*messenger]bool{}
			for _, r := range p.main.roster.remotes {
				for tx := range r.eachTxn {
					if m, ok := tx.(*messenger); ok {
						out[m] = true
					}
				}
			}
			return out
		}
		spares, spareWins := map[*messenger]bool{}, map[*sendWindow]bool{}
		for round := range 3 {
			var res []chan error
			for i, peer := range peers {
				body := map[string]any{"to": peer.local.name, "round": round}
				if (i+round)%2 == 0 {
					body["pad"] = strings.Repeat("x", 3000) // segmented
				}
				b, err := p.main.marshal(body)
				if err != nil {
					t.Fatal(err)
				}
				ch := make(chan error, 1)
				sendPooled(p.main, peer.local.name, b, MsgID{}, ch, p.now)
				res = append(res, ch)
			}
			got := underWay()
			if len(got) != remotes {
				t.Fatalf("round %d: %d messages under way, want %d", round, len(got), remotes)
			}
			for m := range got {
				if round > 0 && (!spares[m] || !spareWins[m.r.win]) {
					t.Fatalf("round %d: a new messenger or window, not a spare (%v, %v)", round, spares[m], spareWins[m.r.win])
				}
			}
			p.pump()
			allDone(t, res)
			for _, peer := range peers {
				ms := p.delivered[peer]
				if len(ms) != 1 {
					t.Fatalf("round %d: %s got %d messages, want 1", round, peer.local.name, len(ms))
				}
				if to, rd := ms[0].Body["to"], fmt.Sprint(ms[0].Body["round"]); to != peer.local.name || rd != fmt.Sprint(round) {
					t.Fatalf("round %d: %s got the message to %v of round %v", round, peer.local.name, to, rd)
				}
				p.delivered[peer] = ms[:0]
			}
			p.main.Deadline() // as its owner does after every event
			clear(spares)
			for m := range p.main.spares.messengers.All {
				if m.in != nil || m.queued || m.body != nil || m.result != nil {
					t.Fatalf("round %d: a spare still under way or holding its message", round)
				}
				spares[m] = true
			}
			clear(spareWins)
			for w := range p.main.spares.wins.All {
				if len(w.started) != 0 || w.first != nil || w.large != 0 || w.charge != 0 {
					t.Fatalf("round %d: a spare window holds messages", round)
				}
				spareWins[w] = true
			}
			if len(spares) < remotes || len(spareWins) < remotes {
				t.Fatalf("round %d: %d spare messengers and %d windows for the next %d messages", round, len(spares), len(spareWins), remotes)
			}
		}
	})
}
