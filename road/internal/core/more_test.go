package core

import (
	"errors"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
)

// A joiner whose keep already rejects the joinent's keys forgets the
// remote when they are the keys it had, and refuses the join.
func TestJoinerRejectsKeys(t *testing.T) {
	dir := t.TempDir()
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { o.Auto, o.KeepDir = keep.AutoOnce, dir })
	p.join()
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Reject("main"); err != nil {
		t.Fatal(err)
	}
	r := p.otherRemote()
	r.allowed = false
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrRejected) || len(p.other.roster.remotes) != 0 {
		t.Fatalf("join with rejected keys: %v (%v), %d remotes", err, ok, len(p.other.roster.remotes))
	}
	if !p.hasEvent(p.other, EventRejected) || !p.hasEvent(p.other, EventRemoved) {
		t.Fatalf("events %v", p.kinds(p.other, 0))
	}
}

// Resend requests with bodies that are not a list of segment numbers of
// the message are dropped (resend_body, resend_range); the message goes on.
func TestResendBodiesRefused(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Profile, o.Profile = ProfileReference, ProfileReference })
	p.join()
	p.cut = func(w wired) bool { return w.from == p.main }
	res := make(chan error, 1)
	b, _ := p.other.marshal(map[string]any{"data": string(make([]byte, 5000))})
	p.other.Send("main", b, codec.BodyKindJSON, MsgID{}, res, p.now, p.now)
	p.pump()
	or, mr := p.otherRemote(), p.mainRemote()
	m := or.inProcess(codec.TransactionKindMessage)[0].(*messenger)
	for body, want := range map[string]dropReason{
		`{"misseds": "all"}`:  dropResendBody,
		`{"misseds": [1.5]}`:  dropResendBody,
		`{"misseds": [-1]}`:   dropResendBody,
		`{"misseds": [9999]}`: dropResendRange,
		`[0]`:                 dropResendBody,
		`{"misseds`:           dropResendBody,
	} {
		coat, err := mr.coat.Seal(nil, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		h := head(codec.TransactionKindMessage, codec.PacketKindResend, mr.nuid, mr.fuid, m.si, m.ti, true)
		h.CoatKind, h.FootKind = codec.CoatKindNaCl, codec.FootKindNaCl
		before := p.other.stats.drops[want]
		p.inject(p.other, forge(t, codec.HeadKindRaet, p.main.signer, h, coat), p.mainAddr)
		if p.other.stats.drops[want] != before+1 {
			t.Errorf("resend %s: not dropped as %v (%v)", body, want, p.other.Counters().Drops)
		}
	}
	// And one in the plain: a downgrade.
	h := head(codec.TransactionKindMessage, codec.PacketKindResend, mr.nuid, mr.fuid, m.si, m.ti, true)
	h.FootKind = codec.FootKindNaCl
	p.inject(p.other, forge(t, codec.HeadKindRaet, p.main.signer, h, []byte(`{"misseds":[0]}`)), p.mainAddr)
	if p.other.stats.drops[dropResendBody] == 0 {
		t.Fatal("a plaintext resend was taken")
	}
	p.cut = nil
	p.advance(2 * time.Second)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("the message after bad resends: %v (%v)", err, ok)
	}
}

// Segments that do not fit the message they name make the receiver nack
// it; a sender that gives up (nack) ends the receiver's message.
func TestSegmentsRefused(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Profile, o.Profile = ProfileReference, ProfileReference })
	p.join()
	or := p.otherRemote()
	seg := func(ti uint32, sn, count uint16, length uint32) []byte {
		h := head(codec.TransactionKindMessage, codec.PacketKindMessage, or.nuid, or.fuid, or.sid, ti, false)
		h.CoatKind, h.FootKind = codec.CoatKindNaCl, codec.FootKindNaCl
		h.SegmentNumber, h.SegmentCount, h.MessageLength = sn, count, length
		h.SetSegment(true)
		return forge(t, codec.HeadKindRaet, p.other.signer, h, make([]byte, 500))
	}
	mr := p.mainRemote()
	p.inject(p.main, seg(900, 0, 3, 3000), p.otherAddr)
	if len(mr.inProcess(codec.TransactionKindMessage)) != 1 {
		t.Fatal("the first segment started nothing")
	}
	nacks := p.count(p.main, codec.TransactionKindMessage, codec.PacketKindNack)
	p.inject(p.main, seg(900, 1, 4, 3000), p.otherAddr) // another count
	if p.main.stats.drops[dropSegment] != 1 || p.count(p.main, codec.TransactionKindMessage, codec.PacketKindNack) != nacks+1 {
		t.Fatalf("an inconsistent segment: drops %v", p.main.Counters().Drops)
	}
	if len(mr.inProcess(codec.TransactionKindMessage)) != 0 {
		t.Fatal("the message goes on")
	}
	p.inject(p.main, seg(901, 0, 3, 3000), p.otherAddr)
	h := head(codec.TransactionKindMessage, codec.PacketKindNack, or.nuid, or.fuid, or.sid, 901, false)
	h.CoatKind, h.FootKind = codec.CoatKindNaCl, codec.FootKindNaCl
	p.inject(p.main, forge(t, codec.HeadKindRaet, p.other.signer, h, nil), p.otherAddr)
	if len(mr.inProcess(codec.TransactionKindMessage)) != 0 {
		t.Fatal("the sender's nack did not end it")
	}
	if len(p.delivered[p.main]) != 0 {
		t.Fatal("delivered a forged message")
	}
}

// A stale nack from us answers a correspondent's packet for a transaction
// we do not have; the answers to no transaction are not answered again.
func TestStaleCorrespondents(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	or := p.otherRemote()
	h := p.other.aliveHead(or, codec.PacketKindAck, p.mainRemote().sid, 777, true)
	h.FootKind = codec.FootKindNaCl
	p.inject(p.main, p.sealed(p.other, h, nil), p.otherAddr)
	if p.main.stats.drops[dropStaleCorrespondent] != 1 {
		t.Fatalf("drops %v", p.main.Counters().Drops)
	}
	h.PacketKind = codec.PacketKindNack
	p.inject(p.main, p.sealed(p.other, h, nil), p.otherAddr)
	if p.main.stats.drops[dropStaleReply] != 1 {
		t.Fatalf("drops %v", p.main.Counters().Drops)
	}
	// A message packet marked sent again, for a message not under way.
	m := head(codec.TransactionKindMessage, codec.PacketKindMessage, or.nuid, or.fuid, or.sid, 778, false)
	m.CoatKind, m.FootKind = or.coatKind(), codec.FootKindNaCl
	m.SetAgain(true)
	p.inject(p.main, p.sealed(p.other, m, make([]byte, 40)), p.otherAddr)
	if p.main.stats.drops[dropStaleMessage] != 1 {
		t.Fatalf("drops %v", p.main.Counters().Drops)
	}
	p.stillWorks(t, len(p.delivered[p.main]))
}

// Config errors: a head kind or body kind that cannot be, a packet size
// out of range; a keep of another estate's name.
func TestNewRefuses(t *testing.T) {
	for name, cfg := range map[string]Config{
		"head kind":   {HeadKind: 9},
		"body kind":   {BodyKind: codec.BodyKindRaw},
		"packet size": {MaxPacketSize: 100},
		"fast size":   {FastMaxPacketSize: 70000},
		"aead mode":   {AEAD: 9},
	} {
		if _, err := New(&cfg, MemStore(), time.Now()); err == nil {
			t.Errorf("%s: taken", name)
		}
	}
	dir := t.TempDir()
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(&Config{Name: "first"}, DiskStore(k), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.Start(pairMain, time.Now())
	if _, err := New(&Config{Name: "second"}, DiskStore(k), time.Now()); err == nil {
		t.Fatal("a keep of another estate was taken")
	}
	if c, err := New(&Config{}, DiskStore(k), time.Now()); err != nil || c.Name() != "first" {
		t.Fatalf("no name: %v, %q", err, c.Name())
	}
	if c, err := New(&Config{}, MemStore(), time.Now()); err != nil || len(c.Name()) != len("estate_")+32 {
		t.Fatalf("a made name: %v", err)
	}
}

// Event kinds have names.
func TestEventKindNames(t *testing.T) {
	for k, want := range map[EventKind]string{EventJoined: "joined", EventRemoved: "removed", 0: "event(?)", 99: "event(?)"} {
		if k.String() != want {
			t.Errorf("%d: %q", k, k.String())
		}
	}
}
