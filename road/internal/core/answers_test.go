package core

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// A message delivered whose done was lost comes again (its sender's
// timer): the main answers the repeat with the bytes of the done it sent
// first, kept, and signs nothing for it. With SignLater the kept done is
// the one the writer signed, and the answer leaves the core with no foot
// left to sign; without, it is byte for byte the first, wf and all (a done
// made anew for a repeat carries no wf, as the message's repeat has its own).
func TestRepeatAnsweredWithKeptDone(t *testing.T) {
	for _, later := range []bool{false, true} {
		t.Run(fmt.Sprintf("signlater=%v", later), func(t *testing.T) {
			p := newPair(t, keep.AutoAlways, func(m, o *estate) {
				refProfile.set(m, o)
				m.SignLater, o.SignLater = later, later
			})
			p.join()
			p.cut = func(w wired) bool { return w.from == p.main } // the done is lost
			wire := len(p.wire)
			res := p.start(p.other, map[string]any{"data": "once"}, MsgID{})
			p.pump()
			p.cut = nil
			var first []byte
			for _, w := range p.wire[wire:] {
				if w.from == p.main && isDone(w.b) {
					first = w.b
				}
			}
			if first == nil || len(p.delivered[p.main]) != 1 {
				t.Fatalf("no done sent, or %d delivered", len(p.delivered[p.main]))
			}
			// The sender's timer: its message's last packet again.
			p.now = p.other.Deadline()
			p.other.Tick(p.now)
			repeats := p.other.TakeOut(nil)
			if len(repeats) != 1 {
				t.Fatalf("%d datagrams at the sender's timer, want its last packet", len(repeats))
			}
			repeats[0].Sign()
			p.feed(p.main, repeats[0].B, p.otherAddr)
			repeats[0].Release()
			out := p.main.TakeOut(nil)
			if len(out) != 1 || !isDone(out[0].B) {
				t.Fatalf("main answered the repeat with %d datagrams, want a done", len(out))
			}
			if out[0].sign != nil {
				t.Fatal("the repeat's done is left to sign: signed anew")
			}
			if !bytes.Equal(out[0].B, first) {
				t.Fatalf("the repeat's done is not the first:\n%q\n%q", out[0].B, first)
			}
			p.feed(p.other, out[0].B, p.mainAddr)
			out[0].Release()
			if err, ok := outcome(res); !ok || err != nil {
				t.Fatalf("the sender took the kept done: %v (%v)", err, ok)
			}
			if len(p.delivered[p.main]) != 1 {
				t.Fatalf("%d delivered", len(p.delivered[p.main]))
			}
		})
	}
}

func isDone(b []byte) bool {
	tk, pk := kindOf(b)
	return tk == codec.TransactionKindMessage && pk == codec.PacketKindDone
}

// A kept answer goes only to its own transaction: another address, either
// uid, the session, the transaction id or the session's kinds make another
// key, which finds nothing. A datagram left to sign is kept once signed.
func TestAnswersKeyed(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	k := answerKey{to: netip.MustParseAddrPort("127.0.0.2:7531"), nuid: 2, fuid: 3, si: 4, ti: 5,
		ck: codec.CoatKindNaCl, fk: codec.FootKindNaCl}
	var a answers
	a.note(k, &Datagram{B: []byte("done")}, now, answersFor(2))
	if b, ok := a.recall(&k, nil); !ok || string(b) != "done" {
		t.Fatalf("its own key: %q %v", b, ok)
	}
	for name, f := range map[string]func(*answerKey){
		"address": func(o *answerKey) { o.to = netip.MustParseAddrPort("127.0.0.3:7531") },
		"port":    func(o *answerKey) { o.to = netip.MustParseAddrPort("127.0.0.2:7532") },
		"nuid":    func(o *answerKey) { o.nuid++ },
		"fuid":    func(o *answerKey) { o.fuid++ },
		"session": func(o *answerKey) { o.si++ },
		"txn":     func(o *answerKey) { o.ti++ },
		"coat":    func(o *answerKey) { o.ck = codec.CoatKindNada },
		"foot":    func(o *answerKey) { o.fk = codec.FootKindMAC },
	} {
		o := k
		f(&o)
		if b, ok := a.recall(&o, nil); ok {
			t.Errorf("another %s got the answer %q", name, b)
		}
	}

	later := k
	later.ti = 6
	d := Datagram{B: []byte("zeros"), sign: &packet.NaClFoot{}}
	a.note(later, &d, now, answersFor(2))
	if _, ok := a.recall(&later, nil); ok {
		t.Fatal("an answer not signed yet was sent again")
	}
	if d.ans == nil {
		t.Fatal("the datagram left to sign does not fill its slot")
	}
	d.ans.fill(d.ansSlot, d.ansGen, []byte("signed"))
	if b, ok := a.recall(&later, nil); !ok || string(b) != "signed" {
		t.Fatalf("once signed: %q %v", b, ok)
	}
	if b, ok := a.recall(&k, nil); !ok || string(b) != "done" {
		t.Fatalf("the first, after the second: %q %v", b, ok)
	}
}

// The answers' memory is bounded: answersFor the remotes the stack holds,
// at most maxAnswers, however many answers come at once; it grows only
// for answers younger than answerSpan (a slow trickle keeps minAnswers),
// and gives back what is beyond its bound once remotes go (trim).
func TestAnswersBounded(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	key := func(i int) answerKey {
		return answerKey{to: netip.MustParseAddrPort("127.0.0.2:7531"), nuid: 2, fuid: uint32(3 + i%7), si: 4, ti: uint32(i)}
	}
	for _, tc := range []struct{ remotes, notes, want int }{
		{1, 1000, answersPerRemote}, {100, 10_000, 4096}, {10_000, 20_000, maxAnswers}} {
		var a answers
		for i := range tc.notes {
			a.note(key(i), &Datagram{B: []byte("done")}, now, answersFor(tc.remotes))
		}
		if got := len(a.slots); got != tc.want {
			t.Errorf("%d remotes, %d answers at once: %d slots, want %d", tc.remotes, tc.notes, got, tc.want)
		}
		if _, ok := a.recall(ptr(key(tc.notes-1)), nil); !ok {
			t.Errorf("%d remotes: the newest answer is gone", tc.remotes)
		}
		a.trim(answersFor(0))
		if got := len(a.slots); got != minAnswers {
			t.Errorf("%d remotes gone: %d slots, want %d", tc.remotes, got, minAnswers)
		}
	}
	var a answers
	for i := range 1000 {
		a.note(key(i), &Datagram{B: []byte("done")}, now.Add(time.Duration(i)*answerSpan), answersFor(10_000))
	}
	if got := len(a.slots); got != minAnswers {
		t.Errorf("one answer a span: %d slots, want %d", got, minAnswers)
	}
	a.note(key(5000), &Datagram{B: make([]byte, maxAnswerSize+1)}, now, answersFor(1))
	if _, ok := a.recall(ptr(key(5000)), nil); ok {
		t.Error("an answer too long to keep was kept")
	}
}

// The memory goes once no answer was noted for answerSpan: the core's
// Deadline wakes it then, and an idle main holds none of it (TestRemoteHeap
// measured 1.4 KiB a reference remote more without it).
func TestAnswersExpire(t *testing.T) {
	p := newPair(t, keep.AutoAlways, func(m, o *estate) { m.Profile, o.Profile = ProfileReference, ProfileReference })
	p.join()
	if err := p.send(p.other, map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	a := &p.main.tx.answers
	if a.slots == nil {
		t.Fatal("the main kept no done")
	}
	exp := a.expiry()
	if got := time.Unix(0, a.last).Add(answerSpan); !exp.Equal(got) || p.main.Deadline().After(exp) {
		t.Fatalf("expiry %v (want %v), deadline %v", exp, got, p.main.Deadline())
	}
	p.main.Tick(exp.Add(-time.Nanosecond))
	if a.slots == nil {
		t.Fatal("the memory went before answerSpan")
	}
	p.main.Tick(exp)
	if a.slots != nil || !a.expiry().IsZero() {
		t.Fatalf("%d slots kept %v after the last answer", len(a.slots), answerSpan)
	}
	if _, ok := a.recall(&answerKey{}, nil); ok {
		t.Fatal("recall found an answer in no memory")
	}
}

func ptr[T any](v T) *T { return &v }
