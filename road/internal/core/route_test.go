package core

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
)

// Signed packets whose ids cannot be routed are dropped by reason, change
// nothing of the session and deliver nothing.
func TestRouteRefusals(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Profile, o.Profile = ProfileReference, ProfileReference })
	p.join()
	mr := p.mainRemote()
	se, de, si := mr.fuid, mr.nuid, mr.rsid
	alive := func(se, de, si, ti uint32, edit func(*codec.Head)) []byte {
		h := head(codec.TransactionKindAlive, codec.PacketKindRequest, se, de, si, ti, false)
		h.CoatKind, h.FootKind = codec.CoatKindNaCl, codec.FootKindNaCl
		if edit != nil {
			edit(&h)
		}
		return forge(t, codec.HeadKindRaet, p.other.signer, h, nil)
	}
	join := func(pk codec.PacketKind, se, de, si uint32, cf bool) []byte {
		h := head(codec.TransactionKindJoin, pk, se, de, si, 50, cf)
		return forge(t, codec.HeadKindRaet, nil, h, nil)
	}
	window := mr.window
	mr.window = replayWindow{}
	mr.window.mark(20_000, p.now, 1, false) // other's ids far ahead: its small ones are behind
	stranger := netip.MustParseAddrPort("127.0.0.9:7531")
	for _, tc := range []struct {
		name string
		b    []byte
		from netip.AddrPort
		want dropReason
	}{
		{"broadcast", alive(se, de, si, 30_000, func(h *codec.Head) { h.SetBroadcast(true) }), p.otherAddr, dropBroadcast},
		{"zero sid", alive(se, de, 0, 30_000, nil), p.otherAddr, dropZeroSID},
		{"zero source", alive(0, de, si, 30_000, nil), p.otherAddr, dropZeroUID},
		{"behind the window", alive(se, de, si, 100, nil), p.otherAddr, dropReplayTooOld},
		{"join with a session", join(codec.PacketKindRequest, 5, 0, 3, false), stranger, dropJoinNonzeroSID},
		{"join answer to no uid", join(codec.PacketKindResponse, 5, 0, 0, true), stranger, dropJoinZeroNUID},
		{"join answer to an unknown uid", join(codec.PacketKindResponse, 5, 999, 0, true), stranger, dropUnknownDestination},
		{"join from no uid", join(codec.PacketKindRequest, 0, 0, 0, false), stranger, dropJoinZeroFUID},
		{"join ack to nobody", join(codec.PacketKindAck, 5, 0, 0, false), stranger, dropJoinStale},
	} {
		before := snapshot(mr)
		n := p.main.stats.drops[tc.want]
		p.inject(p.main, tc.b, tc.from)
		if p.main.stats.drops[tc.want] != n+1 {
			t.Errorf("%s: not dropped as %v: %v", tc.name, tc.want, p.main.Counters().Drops)
		}
		if after := snapshot(mr); after != before {
			t.Errorf("%s changed the session", tc.name)
		}
	}
	if p.count(p.main, codec.TransactionKindAlive, codec.PacketKindNack) != 1 {
		t.Error("the replay behind the window was not nacked")
	}
	mr.window = window

	// Checked with a key replaced since: dropped as stale.
	var in Inbound
	key := [32]byte(mr.verify)
	NewFootChecker(new(atomic.Uint64)).Parse(&in, alive(se, de, si, 30_001, nil), p.otherAddr, keyTableOf(de, newPeerKeys(key, nil)))
	old := mr.verify
	mr.verify[0] ^= 1
	p.main.Receive(&in, p.now)
	mr.verify = old
	if p.main.stats.drops[dropVerifyStaleKey] != 1 {
		t.Errorf("a foot checked with old keys: %v", p.main.Counters().Drops)
	}
	if len(p.delivered[p.main]) != 0 {
		t.Fatal("delivered")
	}
	p.stillWorks(t, 0)
}

// A message saved for the next allow that does not come in time fails with
// ErrTimeout.
func TestSavedMessageTimesOut(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { o.MessageTimeout = 2 * time.Second })
	p.join()
	p.cut = func(wired) bool { return true }
	res := make(chan error, 1)
	b, _ := p.other.marshal(map[string]any{"n": 1})
	p.other.Send("main", b, codec.BodyKindJSON, MsgID{}, res, p.now, p.now)
	r := p.otherRemote()
	r.sid++
	p.other.replaceStaleInitiators(r)
	if len(r.saved) != 1 {
		t.Fatalf("%d saved", len(r.saved))
	}
	p.advance(3 * time.Second)
	if err, ok := outcome(res); !ok || err == nil || len(r.saved) != 0 {
		t.Fatalf("saved message: %v (%v), %d saved", err, ok, len(r.saved))
	}
}

// A keylog writer gets one line per allow, on each side.
func TestKeyLog(t *testing.T) {
	var mk, ok lineCount
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.KeyLog, o.KeyLog = &mk, &ok })
	p.join()
	if mk != 1 || ok != 1 {
		t.Fatalf("keylog lines: main %d, other %d", mk, ok)
	}
}

type lineCount int

func (l *lineCount) Write(b []byte) (int, error) {
	for _, c := range b {
		if c == '\n' {
			*l++
		}
	}
	return len(b), nil
}

// Buffers of every size class come back to their class.
func TestBufPoolClasses(t *testing.T) {
	var p bufPool
	for _, n := range []int{1, 2048, 2049, 10_000, 65535, 1 << 20} {
		b := p.get(n)
		if cap(*b) < min(n, 1<<(minBufShift+bufClasses-1)) || len(*b) != 0 {
			t.Fatalf("get(%d): cap %d", n, cap(*b))
		}
		*b = append(*b, 1)
		p.put(b)
	}
	small := make([]byte, 0, 3000) // between classes: serves the smaller
	p.put(&small)
	tiny := make([]byte, 0, 100) // below every class: dropped
	p.put(&tiny)
}
