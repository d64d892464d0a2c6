package core

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// Ids and sessions roll over from 0xffffffff to 1, never 0.
func TestIDsRollOver(t *testing.T) {
	r := remote{tid: ^uint32(0), sid: ^uint32(0)}
	if r.nextTid() != 1 {
		t.Fatal("tid")
	}
	if r.nextSid(); r.sid != 1 {
		t.Fatal("sid")
	}
	var w replayWindow
	now, hold := time.Unix(0, 0), replayHold(-1)
	w.mark(10, now, hold, false)
	w.mark(10+3*replayIDs, now, hold, false) // far ahead: the window starts afresh
	if w.state(10) != replayTooOld || w.state(10+3*replayIDs) != replayUsed {
		t.Fatal("a far jump")
	}
	w.mark(11, now, hold, false) // behind the window: refused unseen, not marked
	if w.state(11) != replayTooOld {
		t.Fatal("marked behind the window")
	}
}

// Packets of kinds beyond the counters' arrays are counted as unknown.
func TestUnknownKindsCounted(t *testing.T) {
	var k kindCounts
	var h codec.Head
	h.TransactionKind, h.PacketKind = 200, 100
	k.add(&h, 1)
	m := map[string]uint64{}
	k.fill(m)
	want := codec.TransactionKindUnknown.String() + "/" + codec.PacketKindUnknown.String()
	if len(m) != 1 || m[want] != 1 {
		t.Fatalf("counted %v, want %s", m, want)
	}
}

// Kept remotes are restored as the reference keeps them: an empty or
// wildcard host is loopback; one with a bad address, or clashing with
// another (of two with one uid, whichever comes second), is skipped.
func TestLoadRemotes(t *testing.T) {
	st := newMemStore()
	joined := true
	pub, ver := [32]byte{1}, [32]byte{2}
	for i, host := range []string{"", "0.0.0.0", "::", "not an address", "127.0.0.5"} {
		name, uid := fmt.Sprint("r", i), uint32(10+i)
		if i == 4 {
			uid = 10 // r0's
		}
		st.write(&keepWrite{op: opSaveRemote, remote: keep.RemoteEstate{Name: name, UID: uid, FUID: 3, HA: keep.HostPort{Host: host, Port: 7000},
			Joined: &joined, Role: name}})
		st.write(&keepWrite{op: opSaveRole, role: keep.RemoteRole{Role: name, Acceptance: keep.Accepted, Verify: ver, Public: pub}})
	}
	c, err := New(&Config{Name: "me"}, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range c.Remotes() {
		got[r.Name] = r.Addr.Addr().String()
	}
	_, r0 := got["r0"]
	_, r4 := got["r4"]
	if len(got) != 3 || r0 == r4 || got["r1"] != "127.0.0.1" || got["r2"] != "::1" {
		t.Fatalf("restored %v", got)
	}
	if r, ok := c.RemoteNamed("r1"); !ok || !r.Joined || r.Allowed {
		t.Fatalf("restored %+v: want joined, not allowed", r)
	}
	// The local estate (uid counter 0 here) is written only at start: the
	// next uid is beyond the kept remotes'.
	if uid := c.nextUid(); uid <= 12 {
		t.Fatalf("next uid %d, not beyond the kept remotes' (10..12)", uid)
	}
}

// xorCoat is a coat plugin's stand-in (not a cipher): both ends must agree
// to use it, and then every message goes in it.
type xorCoat struct{ key byte }

func (x xorCoat) Kind() codec.CoatKind { return codec.CoatKindXChaCha }
func (x xorCoat) Overhead() int        { return 1 }
func (x xorCoat) Seal(dst, plain []byte) ([]byte, error) {
	dst = append(dst, 0x5a)
	for _, b := range plain {
		dst = append(dst, b^x.key)
	}
	return dst, nil
}
func (x xorCoat) Open(dst, coat []byte) ([]byte, error) {
	if len(coat) == 0 || coat[0] != 0x5a {
		return nil, errors.New("not a xor coat")
	}
	for _, b := range coat[1:] {
		dst = append(dst, b^x.key)
	}
	return dst, nil
}

type xorMaker struct{}

func (xorMaker) Kind() codec.CoatKind { return codec.CoatKindXChaCha }
func (xorMaker) Session(priv, pub *[32]byte) (packet.Coat, error) {
	return xorCoat{key: 0x33}, nil
}

// A coat plugin both ends offer is negotiated for the session; else an
// AEAD coat both offer; else, one end refusing AEAD, the NaCl coat.
func TestCoatNegotiated(t *testing.T) {
	aead, _ := packet.ChooseAEAD(packet.AEADKinds(), packet.AEADKinds())
	for _, tc := range []struct {
		both   bool     // both offer the plugin's coat
		refuse AEADMode // other's
		want   codec.CoatKind
	}{{true, AEADPrefer, codec.CoatKindXChaCha}, {false, AEADPrefer, aead}, {false, AEADRefuse, codec.CoatKindNaCl}} {
		both := tc.both
		p := newPair(t, keep.AutoAlways, func(m, o *estate) {
			m.Coat = xorMaker{}
			if both {
				o.Coat = xorMaker{}
			}
			o.AEAD = tc.refuse
		})
		p.join()
		if got := p.mainRemote().coatKind(); got != tc.want {
			t.Fatalf("%+v: coat %v", tc, got)
		}
		if got := p.otherRemote().coatKind(); got != tc.want {
			t.Fatalf("%+v: other's coat %v", tc, got)
		}
		if err := p.send(p.other, map[string]any{"coated": both}); err != nil {
			t.Fatal(err)
		}
		if got := p.delivered[p.main]; len(got) != 1 || got[0].Body["coated"] != both {
			t.Fatalf("delivered %+v", got)
		}
	}
}

// Advertisements that are not understood give the reference profile.
func TestBadCapsIgnored(t *testing.T) {
	for _, v := range []any{
		"caps", map[string]any{"v": int64(2)}, map[string]any{"v": int64(1), "hk": "x"},
		map[string]any{"v": int64(1), "hk": []any{int64(300)}, "fk": []any{}, "bk": []any{}, "ck": []any{}, "mps": int64(1400)},
		map[string]any{"v": int64(1), "hk": []any{}, "fk": []any{}, "bk": []any{}, "ck": []any{}, "mps": int64(100)},
		map[string]any{"v": int64(1), "hk": make([]any, 17), "fk": []any{}, "bk": []any{}, "ck": []any{}, "mps": int64(1400)},
	} {
		if k := parseCaps(v); k != nil {
			t.Errorf("%v: taken as %+v", v, k)
		}
	}
	var k *caps
	if k.canonical() != "" {
		t.Fatal("no caps, not empty")
	}
}

// An alive to a remote not joined joins it first; Shutdown fails the
// messages saved for the next allow too.
func TestAliveJoinsFirstAndShutdownSaved(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	r := p.otherRemote()
	r.joined = false
	p.other.startAliver(r, true)
	p.pump()
	p.advance(100 * time.Millisecond)
	if !r.joined || !r.allowed {
		t.Fatal("not joined and allowed")
	}
	p.cut = func(wired) bool { return true }
	res := make(chan error, 1)
	b, _ := p.other.marshal(map[string]any{"n": 1})
	p.other.Send("main", b, codec.BodyKindJSON, MsgID{}, res, p.now, p.now)
	if p.other.OutLen() == 0 {
		t.Fatal("nothing to send")
	}
	r.sid++
	p.other.replaceStaleInitiators(r)
	p.other.Shutdown()
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrClosed) {
		t.Fatalf("saved message at shutdown: %v (%v)", err, ok)
	}
}

// An allow whose advertisements do not match what the allowent saw: after
// a restart that lost them it is answered unjoined (the join exchanges
// them again); between two estates that both joined in this run it is a
// change in transit, rejected.
func TestAllowCapsMismatch(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		p := newPair(t, keep.AutoAlways, nil)
		p.join()
		mr := p.mainRemote()
		mr.peerCaps, mr.capsFresh = nil, fresh
		err, ok := p.reallow(time.Second)
		if p.main.stats.drops[dropCapsMismatch] == 0 {
			t.Fatalf("fresh %v: no caps_mismatch", fresh)
		}
		if fresh {
			if !p.hasEvent(p.main, EventRejected) || p.count(p.main, codec.TransactionKindAllow, codec.PacketKindReject) == 0 {
				t.Fatalf("changed in transit: not rejected (%v %v)", err, ok)
			}
			continue
		}
		if p.count(p.main, codec.TransactionKindAllow, codec.PacketKindUnjoined) == 0 || !mr.allowed {
			t.Fatalf("lost in a restart: not joined again and allowed (%v %v)", err, ok)
		}
	}
}

// In a memory store too, pended strangers stay within their cap: the
// oldest is dropped, with its pending role.
func TestStrangersBoundedInMemory(t *testing.T) {
	p := newPair(t, keep.AutoNever, nil)
	for i := range maxPendingStrangers + 3 {
		p.now = p.now.Add(time.Second)
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 60, byte(i / 200), byte(1 + i%200)}), 9000)
		p.inject(p.main, p.namedJoin(t, fmt.Sprint("m", i)), from)
	}
	if n := len(p.main.kept.pended); n != maxPendingStrangers {
		t.Fatalf("%d pended, want %d", n, maxPendingStrangers)
	}
	st := p.main.store.(*memStore)
	if _, ok := st.roles["m0"]; ok {
		t.Fatal("the oldest stranger's role is kept")
	}
	if _, ok := st.roles[fmt.Sprint("m", maxPendingStrangers+2)]; !ok {
		t.Fatal("the newest stranger's role is not kept")
	}
}

// Between estates that negotiated message ids, a message whose id was
// delivered before (a sender restarted on its queue sends it again in a new
// transaction) is answered done and not delivered again.
func TestMessageIDRepeated(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	id := MsgID{Stream: 7, Seq: 1, Floor: 1}
	for range 2 {
		res := make(chan error, 1)
		b, _ := p.other.marshal(map[string]any{"once": true})
		p.other.Send("main", b, codec.BodyKindJSON, id, res, p.now, p.now)
		p.pump()
		if err, ok := outcome(res); !ok || err != nil {
			t.Fatalf("send: %v (%v)", err, ok)
		}
	}
	if n := len(p.delivered[p.main]); n != 1 || p.main.stats.drops[dropMessageIDRepeated] != 1 {
		t.Fatalf("delivered %d, repeats counted %d", n, p.main.stats.drops[dropMessageIDRepeated])
	}
}

// Segments beyond a remote's reassembly quota are dropped (counted, logged
// once a minute), and the message is sent again until it fits.
func TestReassemblyQuota(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Reassembly.MaxPerRemote, o.BurstSize = 1, 4 })
	p.join()
	var res []chan error
	for i := range 3 {
		ch := make(chan error, 1)
		b, _ := p.other.marshal(map[string]any{"data": strings.Repeat("q", 20_000+i)})
		p.other.Send("main", b, codec.BodyKindJSON, MsgID{}, ch, p.now, p.now)
		res = append(res, ch)
	}
	p.pump()
	p.advance(20 * time.Second)
	if p.main.stats.drops[dropReassemblyRemoteFull] == 0 {
		t.Fatalf("no reassembly_remote_full: %v", p.main.Counters().Drops)
	}
	for i, ch := range res {
		if err, ok := outcome(ch); !ok || err != nil {
			t.Fatalf("message %d: %v (%v)", i, err, ok)
		}
	}
	if len(p.delivered[p.main]) != 3 {
		t.Fatalf("delivered %d", len(p.delivered[p.main]))
	}
}

// keyTableOf is a key table of one entry.
func keyTableOf(uid uint32, k *peerKeys) *KeyTable {
	t := new(KeyTable)
	t.shards[uid%keyShards].Store(&keyShard{map[uint32]*peerKeys{uid: k}})
	return t
}

// The strangers' source buckets are forgotten once full again (a main that
// thousands joined keeps a few), never while a source is still limited.
func TestStrangerSourcesSwept(t *testing.T) {
	var l limits
	now := time.Unix(1_700_000_000, 0)
	hot := netip.MustParseAddr("10.9.9.9")
	for range sourceBurst {
		l.stranger(now, hot, DefaultStrangerJoinRate)
	}
	for i := range 200 { // sweeps within 0.2 s
		now = now.Add(time.Millisecond)
		l.stranger(now, netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}), DefaultStrangerJoinRate)
	}
	if l.stranger(now, hot, DefaultStrangerJoinRate) {
		t.Fatal("a source over its budget forgotten by a sweep")
	}
	for i := range 1000 { // 1000 sources in 20 s, each joining once
		now = now.Add(20 * time.Millisecond)
		l.stranger(now, netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), DefaultStrangerJoinRate)
	}
	if n := len(l.sources); n > 2*minSweep {
		t.Fatalf("%d sources kept, want at most %d", n, 2*minSweep)
	}
}

// The queue of deliveries keeps its order through any mix of pushes and
// drops, clears what it drops, and taking one of a long queue moves
// nothing (the rest moves down once the head passed half).
func TestFifo(t *testing.T) {
	var q fifo[*int]
	var model []*int
	for i := range 5000 {
		if i%3 != 2 || len(model) == 0 {
			v := new(int)
			*v = i
			q.push(v)
			model = append(model, v)
		} else {
			n := 1 + i%min(len(model), 7)
			q.drop(n)
			model = model[n:]
		}
		if q.len() != len(model) || !slices.Equal(q.items(), model) {
			t.Fatalf("step %d: queue of %d, want %d", i, q.len(), len(model))
		}
		for j, p := range q.s[:q.head] {
			if p != nil {
				t.Fatalf("step %d: dropped slot %d still points", i, j)
			}
		}
	}
	var long fifo[int]
	for i := range 1000 {
		long.push(i)
	}
	long.drop(1)
	if long.head != 1 || long.items()[0] != 1 {
		t.Fatalf("taking one of 1000 moved the rest (head %d)", long.head)
	}
}
