package core

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// The attacks of issue 11, made by hand against a main estate with an
// established session (see docs/security.md). In each, nothing is
// delivered that should not be, and the legitimate peer keeps working.

// testProfile is a profile both estates of a pair take: the reference, the
// fast one with the NaCl coat and the MAC foot, or the fast one with an
// AEAD coat.
type testProfile struct {
	name string
	prof Profile
	aead AEADMode
}

var (
	refProfile  = testProfile{"reference", ProfileReference, AEADPrefer}
	macProfile  = testProfile{"fast", ProfileAuto, AEADRefuse}
	aeadProfile = testProfile{"aead", ProfileAuto, AEADPrefer}
	profiles    = []testProfile{refProfile, macProfile, aeadProfile}
)

// set gives both estates the profile.
func (tp testProfile) set(m, o *estate) {
	m.Profile, o.Profile, m.AEAD, o.AEAD = tp.prof, tp.prof, tp.aead, tp.aead
}

func joinedPair(t testing.TB, tp testProfile) *pair {
	t.Helper()
	p := newPair(t, keep.AutoAlways, tp.set)
	p.join()
	return p
}

// stillWorks checks that other and main still exchange a message each way,
// each delivered once, and that main delivered nothing else since it had
// delivered `before`.
func (p *pair) stillWorks(t *testing.T, before int) {
	t.Helper()
	tag := fmt.Sprint("after-", len(p.wire))
	if err := p.send(p.other, map[string]any{"tag": tag}); err != nil {
		t.Fatalf("other's message after the attack: %v", err)
	}
	got := p.delivered[p.main][before:]
	if len(got) != 1 || got[0].Body["tag"] != tag {
		t.Fatalf("main delivered %d messages since the attack, want only the legitimate one: %+v", len(got), got)
	}
	if err := p.send(p.main, map[string]any{"back": tag}); err != nil {
		t.Fatalf("main's message after the attack: %v", err)
	}
}

// Under auto never, a stranger answered pend sends the join ack itself: it
// joins nothing, is not kept as joined, and cannot allow, now or after a
// restart (issue 11, attack 1).
func TestAttackForcedJoinAck(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, keep.AutoNever, func(m, o *estate) { m.KeepDir = dir })
	o := p.other
	r := o.newRemote(p.mainAddr, 0, 0)
	o.addRemote(r)
	o.startJoiner(r, false, false)
	p.pump()
	if len(p.main.kept.pended) != 1 {
		t.Fatalf("main pended %d joins, want the stranger's", len(p.main.kept.pended))
	}
	var req codec.Head
	for _, w := range p.wire {
		var pk packet.Packet
		if w.from == o && packet.Parse(w.b, &pk) == nil && pk.Head.PacketKind == codec.PacketKindRequest {
			req = pk.Head
		}
	}
	// The forced ack: the request's head, pk ack, no body.
	ack := head(codec.TransactionKindJoin, codec.PacketKindAck, req.SourceID, 0, 0, req.TransactionID, false)
	p.inject(p.main, forge(t, codec.HeadKindRaet, nil, ack, nil), p.otherAddr)
	if n := p.main.stats.drops[dropJoinAckUnaccepted]; n != 1 {
		t.Errorf("forced ack: join_ack_unaccepted = %d, want 1", n)
	}
	if rm := p.main.roster.byName["other"]; rm != nil {
		t.Fatalf("the stranger became a remote: %+v", snapshot(rm))
	}
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.LoadRemote("other"); err == nil {
		t.Fatal("the keep holds an estate for the pended stranger")
	}
	role, err := k.LoadRemoteRole("other")
	if err != nil || role.Acceptance != keep.Pending {
		t.Fatalf("the stranger's role: %+v, %v; want pending for the operator", role, err)
	}
	// It allows anyway, guessing its uid at main: unknown, dropped.
	hello := o.allowHead(r, codec.PacketKindHello, 1, 99, false)
	for uid := uint32(1); uid < 8; uid++ {
		hello.DestinationID = uid
		p.inject(p.main, forge(t, codec.HeadKindRaet, o.signer, hello, make([]byte, 200)), p.otherAddr)
	}
	if n := len(p.main.roster.remotes); n != 0 {
		t.Fatalf("main has %d remotes", n)
	}

	// A keep from before the fix says joined for keys still pending: after a
	// restart that remote is not joined, and its allow is answered unjoined.
	joined := true
	if err := k.SaveRemote(keep.RemoteEstate{Name: "other", UID: 5, FUID: 3, HA: keep.HostPort{Host: "127.0.0.2", Port: 7531},
		SID: 1, Joined: &joined, Role: "other"}); err != nil {
		t.Fatal(err)
	}
	main2 := p.newCore(&estate{Config: Config{Name: "main", Main: true, AlivePeriod: -1}, Auto: keep.AutoNever, KeepDir: dir}, nil)
	main2.Start(p.mainAddr, p.now)
	rm := main2.roster.byName["other"]
	if rm == nil || rm.joined {
		t.Fatalf("restarted with a pending role: %+v", rm)
	}
	hello = o.allowHead(r, codec.PacketKindHello, 3, 100, false)
	hello.SourceID, hello.DestinationID = 3, 5
	out := len(main2.tx.out)
	p.feed(main2, forge(t, codec.HeadKindRaet, o.signer, hello, make([]byte, 200)), p.otherAddr)
	if rm.allowed || len(main2.tx.out) != out+1 {
		t.Fatalf("allow after restart: allowed %v, %d answers", rm.allowed, len(main2.tx.out)-out)
	}
	var ans packet.Packet
	if err := packet.Parse(main2.tx.out[len(main2.tx.out)-1].B, &ans); err != nil || ans.Head.PacketKind != codec.PacketKindUnjoined {
		t.Fatalf("answer %v, %v; want unjoined", ans.Head.PacketKind, err)
	}
}

// Unsigned packets of every kind but join, with a newer, the same or an
// older si, from the peer's address or another, change nothing of the
// session and deliver nothing (issue 11, attack 2: one unsigned alive with a
// newer si locked the peer out).
func TestAttackUnsignedPackets(t *testing.T) {
	for _, pr := range profiles {
		t.Run(pr.name, func(t *testing.T) {
			p := joinedPair(t, pr)
			r := p.mainRemote()
			before := snapshot(r)
			delivered := len(p.delivered[p.main])
			stranger := netip.MustParseAddrPort("127.9.9.9:4000")
			n := 0
			for _, tk := range []codec.TransactionKind{codec.TransactionKindMessage, codec.TransactionKindAllow, codec.TransactionKindAlive, 2, 7} {
				for pk := codec.PacketKind(0); pk <= 16; pk++ {
					for _, si := range []uint32{r.rsid + 1, r.rsid, r.rsid - 1, r.rsid + 1<<30, 0} {
						for _, cf := range []bool{false, true} {
							h := head(tk, pk, r.fuid, r.nuid, si, r.window.top+1+uint32(n%5), cf)
							h.CoatKind = codec.CoatKindNaCl
							b := forge(t, codec.HeadKindRaet, nil, h, []byte(`{"x":1}`))
							p.inject(p.main, b, p.otherAddr)
							p.inject(p.main, b, stranger)
							n += 2
						}
					}
				}
			}
			if got := p.main.stats.drops[dropUnsigned]; got != uint64(n) {
				t.Errorf("%d unsigned packets, %d dropped as unsigned", n, got)
			}
			if after := snapshot(r); after != before {
				t.Fatalf("session changed:\n before %+v\n after  %+v", before, after)
			}
			p.stillWorks(t, delivered)
		})
	}
}

// Unsigned join packets of every kind and si, forged from public data
// (names, keys, uids), from the peer's address, touch neither its session
// nor what it is delivered.
func TestAttackUnsignedJoins(t *testing.T) {
	p := joinedPair(t, refProfile)
	r := p.mainRemote()
	before := snapshot(r)
	delivered := len(p.delivered[p.main])
	req := p.publicJoinRequest(t, r.fuid, 0, 77)
	p.inject(p.main, req, p.otherAddr)
	for pk := codec.PacketKind(0); pk <= 16; pk++ {
		for _, de := range []uint32{0, r.nuid} {
			for _, si := range []uint32{0, r.rsid - 1, r.rsid, r.rsid + 1} {
				for _, cf := range []bool{false, true} {
					h := head(codec.TransactionKindJoin, pk, r.fuid, de, si, 77, cf)
					p.inject(p.main, forge(t, codec.HeadKindRaet, nil, h, nil), p.otherAddr)
				}
			}
		}
	}
	p.inject(p.main, p.publicJoinRequest(t, r.fuid, r.nuid, 78), p.otherAddr)
	ack := head(codec.TransactionKindJoin, codec.PacketKindAck, r.fuid, r.nuid, 0, 78, false)
	p.inject(p.main, forge(t, codec.HeadKindRaet, nil, ack, nil), p.otherAddr)
	after := snapshot(r)
	if after != before {
		t.Fatalf("session changed:\n before %+v\n after  %+v", before, after)
	}
	p.stillWorks(t, delivered)
}

// publicJoinRequest is other's join request made from what anyone can know
// of it: its name, role and public keys (any join response or request shows
// them) and its uid.
func (p *pair) publicJoinRequest(t *testing.T, se, de, ti uint32) []byte {
	o := p.other
	body, err := p.main.marshal(packet.OrderedMap{
		{Key: "name", Value: o.local.name}, {Key: "mode", Value: 0}, {Key: "kind", Value: 0},
		{Key: "verhex", Value: o.local.signing.Verify.Hex()}, {Key: "pubhex", Value: o.local.box.Public.Hex()}, {Key: "role", Value: o.local.role},
	})
	if err != nil {
		t.Fatal(err)
	}
	h := head(codec.TransactionKindJoin, codec.PacketKindRequest, se, de, 0, ti, false)
	return forge(t, codec.HeadKindRaet, nil, h, body)
}

// Messages captured in a session are refused when replayed, however long
// after: the replay window lives as long as the session (issue 11, attack
// 3: the reference's done list forgets them after MsgStaleTimeout; the
// core has no such time, and road.Config.StaleTimeout is ignored).
func TestAttackReplayAfterStaleTime(t *testing.T) {
	for _, pr := range profiles {
		t.Run(pr.name, func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) {
				pr.set(m, o)
				m.MessageTimeout, o.MessageTimeout = -1, -1
			})
			p.join()
			start := len(p.wire)
			for i := range 5 {
				if err := p.send(p.other, map[string]any{"n": i}); err != nil {
					t.Fatal(err)
				}
			}
			delivered := len(p.delivered[p.main])
			captured := p.captured(start, p.other, codec.TransactionKindMessage, codec.PacketKindMessage)
			// The fast profile bundles them (one message a bundle here).
			captured = append(captured, p.captured(start, p.other, codec.TransactionKindMessage, codec.PacketKindBundle)...)
			if len(captured) != 5 {
				t.Fatalf("captured %d messages", len(captured))
			}
			p.advance(11 * time.Minute)
			before := snapshot(p.mainRemote())
			for range 3 {
				for _, b := range captured {
					p.inject(p.main, b, p.otherAddr)
				}
			}
			if got := len(p.delivered[p.main]) - delivered; got != 0 {
				t.Fatalf("%d replayed messages delivered again", got)
			}
			reason := dropReplayed
			if pr == aeadProfile {
				reason = dropAEADReplayed // refused before the transaction layer
			}
			if p.main.stats.drops[reason] < 15 {
				t.Errorf("replays counted: %v", p.main.Counters().Drops)
			}
			if after := snapshot(p.mainRemote()); after != before {
				t.Fatalf("session changed:\n before %+v\n after  %+v", before, after)
			}
			p.stillWorks(t, delivered)
		})
	}
}

// captured returns the datagrams `from` sent of kinds tk/pk since wire
// index start.
func (p *pair) captured(start int, from *Core, tk codec.TransactionKind, pk codec.PacketKind) [][]byte {
	var out [][]byte
	for _, w := range p.wire[start:] {
		var pp packet.Packet
		if w.from == from && packet.Parse(w.b, &pp) == nil && pp.Head.TransactionKind == tk && pp.Head.PacketKind == pk {
			out = append(out, w.b)
		}
	}
	return out
}

// A capture of everything other sent, from its join to its messages,
// replayed (three rounds), and the same join made from public data, reset
// no session, deliver nothing twice, and open no coat: the session's keys
// are new (issue 11, attack 3: +5 deliveries per round).
func TestAttackReplayJoinAckMessages(t *testing.T) {
	for _, pr := range profiles {
		t.Run(pr.name, func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, pr.set)
			p.join()
			for i := range 5 {
				if err := p.send(p.other, map[string]any{"n": i}); err != nil {
					t.Fatal(err)
				}
			}
			var capture [][]byte
			for _, w := range p.wire {
				if w.from == p.other {
					capture = append(capture, w.b)
				}
			}
			// A new session (other allows again): the capture is of the last.
			o := p.otherRemote()
			o.allowed = false
			p.other.startAllower(o, false)
			p.pump()
			if !o.allowed || !p.mainRemote().allowed {
				t.Fatal("second allow failed")
			}
			r := p.mainRemote()
			before := snapshot(r)
			delivered := len(p.delivered[p.main])
			for range 3 {
				for _, b := range capture {
					p.inject(p.main, b, p.otherAddr)
				}
			}
			// Forged from public data: a vacuous join and its ack, then the
			// captured messages again.
			p.inject(p.main, p.publicJoinRequest(t, r.fuid, 0, 500), p.otherAddr)
			ack := head(codec.TransactionKindJoin, codec.PacketKindAck, r.fuid, 0, 0, 500, false)
			p.inject(p.main, forge(t, codec.HeadKindRaet, nil, ack, nil), p.otherAddr)
			for _, b := range capture {
				p.inject(p.main, b, p.otherAddr)
			}
			if got := len(p.delivered[p.main]) - delivered; got != 0 {
				t.Fatalf("%d replayed messages delivered", got)
			}
			after := snapshot(r)
			if after != before {
				t.Fatalf("session changed:\n before %+v\n after  %+v", before, after)
			}
			p.stillWorks(t, delivered)
		})
	}
}

// A plaintext coat (ck=0), signed by the peer itself, in a session that
// agreed on the NaCl coat is refused and counted (issue 11: a downgrade).
func TestAttackPlaintextCoat(t *testing.T) {
	p := joinedPair(t, refProfile)
	o := p.otherRemote()
	delivered := len(p.delivered[p.main])
	h := head(codec.TransactionKindMessage, codec.PacketKindMessage, o.nuid, o.fuid, o.sid, o.nextTid(), false)
	h.SetWait(true)
	p.inject(p.main, forge(t, codec.HeadKindRaet, p.other.signer, h, []byte(`{"plain":"text"}`)), p.otherAddr)
	if got := len(p.delivered[p.main]) - delivered; got != 0 {
		t.Fatalf("plaintext message delivered")
	}
	if p.main.stats.drops[dropCoatDowngrade] != 1 {
		t.Fatalf("downgrade not counted: %v", p.main.stats.c.Drops)
	}
	p.stillWorks(t, delivered)
}

// The replay window remembers ids for the whole session in bounded memory:
// holes kept for ever make it grow to its largest, and it covers that.
func TestReplayWindow(t *testing.T) {
	var w replayWindow
	now, hold := time.Unix(0, 0), replayHold(-1)
	if w.state(1) != replayFresh {
		t.Fatal("empty window")
	}
	for ti := uint32(1); ti <= 3*replayIDs; ti += 2 { // every other id, as messages between alives
		w.mark(ti, now, hold, false)
	}
	top := uint32(3*replayIDs - 1)
	for _, c := range []struct {
		ti   uint32
		want replayState
	}{
		{top, replayUsed}, {top - 2, replayUsed}, {top - 1, replayFresh}, {top + 1, replayFresh},
		{top - replayIDs + 2, replayUsed}, {top - replayIDs, replayTooOld}, {1, replayTooOld}, {top + 1<<30, replayFresh},
	} {
		if got := w.state(c.ti); got != c.want {
			t.Errorf("state(%d) = %d, want %d", c.ti, got, c.want)
		}
	}
	if len(w.bits) != replayMaxWords {
		t.Fatalf("the window has %d words, want %d", len(w.bits), replayMaxWords)
	}
	// Ids roll over from 0xffffffff to 1.
	w.reset()
	w.mark(0xfffffffe, now, hold, false)
	w.mark(2, now, hold, false)
	if w.state(0xfffffffe) != replayUsed || w.state(2) != replayUsed || w.state(1) != replayFresh || w.state(0xffffffff) != replayFresh {
		t.Fatal("rollover")
	}
}

// Strangers cost bounded memory and disk: under auto never at most
// maxPendingStrangers wait for an operator (the oldest is dropped with its
// pending role file), none is a remote or kept as an estate; under auto
// always a stranger that never completes its join is forgotten when its
// joinent times out.
func TestAttackStrangersBounded(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, keep.AutoNever, func(m, o *estate) { m.KeepDir = dir })
	for i := range maxPendingStrangers + 40 {
		p.now = p.now.Add(time.Second) // within the budgets
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 50, byte(i / 200), byte(1 + i%200)}), 9000)
		p.inject(p.main, p.namedJoin(t, fmt.Sprint("stranger", i)), from)
	}
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	roles, _ := k.RoleNames()
	estates, _ := k.RemoteNames()
	if len(p.main.kept.pended) != maxPendingStrangers || len(roles) != maxPendingStrangers || len(estates) != 0 || len(p.main.roster.remotes) != 0 {
		t.Fatalf("%d pended, %d roles and %d estates kept, %d remotes; want %d, %d, 0, 0",
			len(p.main.kept.pended), len(roles), len(estates), len(p.main.roster.remotes), maxPendingStrangers, maxPendingStrangers)
	}
	if _, err := k.LoadRemoteRole("stranger0"); err == nil {
		t.Error("the oldest pended stranger's role is still kept")
	}

	p = newPair(t, keep.AutoAlways, nil)
	p.inject(p.main, p.namedJoin(t, "drifter"), netip.MustParseAddrPort("127.50.0.1:9000"))
	if p.main.roster.byName["drifter"] == nil {
		t.Fatal("an accepted stranger is answered as a remote")
	}
	p.advance(10 * time.Second)
	if len(p.main.roster.remotes) != 0 || len(p.main.roster.joinees) != 0 {
		t.Fatalf("the stranger that never acked is still there: %d remotes, %d joinees", len(p.main.roster.remotes), len(p.main.roster.joinees))
	}
}

// namedJoin is a vacuous join request of a new estate called name.
func (p *pair) namedJoin(t testing.TB, name string) []byte {
	body := fmt.Sprintf(`{"name":%q,"mode":0,"kind":0,"verhex":"%s","pubhex":"%s","role":%q}`,
		name, p.other.local.signing.Verify.Hex(), p.other.local.box.Public.Hex(), name)
	h := head(codec.TransactionKindJoin, codec.PacketKindRequest, 9, 0, 0, 1, false)
	return forge(t, codec.HeadKindRaet, nil, h, []byte(body))
}

// On a mutable road a remote that moved rejoins from its new address: the
// move waits in the joinent and is taken when the join completes, and the
// session goes on from there.
func TestMutableRejoinFromNewAddress(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Mutable = true })
	p.join()
	moved := netip.MustParseAddrPort("127.0.0.3:7532")
	p.otherAddr = moved
	o := p.otherRemote()
	o.allowed = false
	p.other.startJoiner(o, true, false)
	p.pump()
	r := p.mainRemote()
	if r.ha != moved || !r.allowed || !o.allowed {
		t.Fatalf("after the move: main has %v (allowed %v), other allowed %v", r.ha, r.allowed, o.allowed)
	}
	p.stillWorks(t, len(p.delivered[p.main]))
}

// A flood of packets naming uids main does not hold, signed (a forgotten
// remote's are) or join requests, costs at most the reply budget's reads
// of the keep's uid index (replyBurst at once, replyRate a second), since
// the budget is taken before the keep is read; the forgotten remote still
// comes back once the flood stops, from the keep on disk.
func TestAttackRecallFlood(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) {
		forgetting(m, o)
		m.KeepDir = t.TempDir()
	})
	p.join()
	uid := p.forgetOther(t)
	cs := &countingStore{Store: p.main.store}
	p.main.store = cs
	stranger := netip.MustParseAddrPort("127.9.9.9:4000")
	rng := rand.New(rand.NewPCG(11, 12))
	const steps, perStep, step = 10, 500, 100 * time.Millisecond
	for i := range steps * perStep {
		if i > 0 && i%perStep == 0 {
			p.now = p.now.Add(step)
		}
		de := rng.Uint32()
		if de == uid || p.main.roster.remotes[de] != nil {
			continue
		}
		var b []byte
		if i%2 == 0 {
			h := head(codec.TransactionKindAlive, codec.PacketKindRequest, 1+rng.Uint32N(1000), de, 1, uint32(i), false)
			h.CoatKind, h.FootKind = codec.CoatKindNaCl, codec.FootKindNaCl
			b = forge(t, codec.HeadKindRaet, p.other.signer, h, nil)
		} else {
			b = p.publicJoinRequest(t, 1+rng.Uint32N(1000), de, uint32(i))
		}
		p.feed(p.main, b, stranger)
		p.main.TakeOut(nil) // the renews, to an attacker's address
	}
	limit := replyBurst + int(replyRate*(steps-1)*step.Seconds())
	t.Logf("%d packets naming unknown uids: %d reads of the uid index (at most %d), %d over the budget",
		steps*perStep, cs.loads, limit, p.main.stats.drops[dropReplyBudget])
	if cs.loads > limit || cs.loads == 0 {
		t.Fatalf("%d reads of the keep's uid index for %d packets, want 1 to %d", cs.loads, steps*perStep, limit)
	}
	if len(p.main.roster.remotes) != 0 {
		t.Fatalf("the flood made main hold %d remotes", len(p.main.roster.remotes))
	}
	p.cut = nil
	p.advance(5 * time.Second)
	if r := p.mainRemote(); r == nil || r.nuid != uid || !r.allowed || !p.otherRemote().allowed {
		t.Fatal("other did not come back after the flood")
	}
	if err := p.send(p.other, map[string]any{"back": 1}); err != nil {
		t.Fatal(err)
	}
}
