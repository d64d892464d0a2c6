package core

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// joinBodies are join bodies the reference refuses (§8.2), each with what
// is wrong.
func joinBodies(p *pair, response bool) map[string]string {
	ver, pub := p.other.local.signing.Verify.Hex(), p.other.local.box.Public.Hex()
	uid := ""
	if response {
		uid = `"uid":7,`
	}
	ok := func(name, mode, kind, u, verhex, pubhex, role string) string {
		return fmt.Sprintf(`{"name":%s,"mode":%s,"kind":%s,%s"verhex":%s,"pubhex":%s,"role":%s}`, name, mode, kind, u, verhex, pubhex, role)
	}
	q := func(s string) string { return `"` + s + `"` }
	out := map[string]string{
		"not json":       `{"name":`,
		"no name":        ok(`""`, "0", "0", uid, q(ver), q(pub), q("x")),
		"mode 256":       ok(q("x"), "256", "0", uid, q(ver), q(pub), q("x")),
		"kind -1":        ok(q("x"), "0", "-1", uid, q(ver), q(pub), q("x")),
		"kind a string":  ok(q("x"), "0", q("1"), uid, q(ver), q(pub), q("x")),
		"bad verhex":     ok(q("x"), "0", "0", uid, q("abc"), q(pub), q("x")),
		"bad pubhex":     ok(q("x"), "0", "0", uid, q(ver), q(strings.Repeat("zz", 32)), q("x")),
		"no role":        ok(q("x"), "0", "0", uid, q(ver), q(pub), `""`),
		"unusable name":  ok(q("../x"), "0", "0", uid, q(ver), q(pub), q("x")),
		"mode a float":   ok(q("x"), "0.5", "0", uid, q(ver), q(pub), q("x")),
		"a list, no map": `[1,2]`,
	}
	if response {
		out["uid 0"] = ok(q("x"), "0", "0", `"uid":0,`, q(ver), q(pub), q("x"))
		out["uid too big"] = ok(q("x"), "0", "0", `"uid":4294967296,`, q(ver), q(pub), q("x"))
	}
	return out
}

// Join requests and responses with bodies the reference refuses are
// dropped as join_body: a request starts nothing, a response ends the join
// with an error.
func TestJoinBodiesRefused(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	for name, body := range joinBodies(p, false) {
		before := p.main.stats.drops[dropJoinBody]
		h := head(codec.TransactionKindJoin, codec.PacketKindRequest, 9, 0, 0, 1, false)
		from := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 1, byte(len(name))}), 9000)
		p.inject(p.main, forge(t, codec.HeadKindRaet, nil, h, []byte(body)), from)
		if p.main.stats.drops[dropJoinBody] != before+1 || len(p.main.roster.remotes) != 0 || len(p.main.roster.joinees) != 0 {
			t.Errorf("request with %s: join_body %d, %d remotes, %d joinees", name, p.main.stats.drops[dropJoinBody]-before,
				len(p.main.roster.remotes), len(p.main.roster.joinees))
		}
	}
	for name, body := range joinBodies(p, true) {
		res := make(chan error, 1)
		p.cut = func(wired) bool { return true }
		p.other.Join(p.mainAddr, res, p.now)
		p.pump()
		r := p.otherRemote()
		if r == nil {
			r = p.other.remoteAt(p.mainAddr)
		}
		j := r.inProcess(codec.TransactionKindJoin)
		if len(j) != 1 {
			t.Fatalf("%s: %d joiners", name, len(j))
		}
		jr := j[0].(*joiner)
		h := head(codec.TransactionKindJoin, codec.PacketKindResponse, 0, jr.se, 0, jr.ti, true)
		p.cut = nil
		p.inject(p.other, forge(t, codec.HeadKindRaet, nil, h, []byte(body)), p.mainAddr)
		if err, ok := outcome(res); !ok || err == nil {
			t.Errorf("response with %s: %v (%v)", name, err, ok)
		}
	}
}

// A joiner takes answers only from where it sent its request, and a
// refused or nacked join fails with ErrRefused.
func TestJoinerAnswers(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	p.cut = func(wired) bool { return true }
	r := p.otherRemote()
	r.allowed = false
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	jr := r.inProcess(codec.TransactionKindJoin)[0].(*joiner)
	h := head(codec.TransactionKindJoin, codec.PacketKindRefuse, jr.de, jr.se, 0, jr.ti, true)
	p.cut = nil
	p.inject(p.other, forge(t, codec.HeadKindRaet, nil, h, nil), netip.MustParseAddrPort("127.0.0.9:7530"))
	if p.other.stats.drops[dropJoinWrongSource] != 1 {
		t.Fatalf("an answer from elsewhere: drops %v", p.other.Counters().Drops)
	}
	p.inject(p.other, forge(t, codec.HeadKindRaet, nil, h, nil), p.mainAddr)
	if err, ok := outcome(res); !ok || !errors.Is(err, ErrRefused) {
		t.Fatalf("refused: %v (%v)", err, ok)
	}
}

// A rejoin's ack lost (and the hello after it): the joinent asks again
// with its response and the joiner acks again from what it kept; the join
// and the allow complete. (A vacuous joinent learns from the hello alone:
// the joiner does not know it by its new uid yet.)
func TestJoinAckLost(t *testing.T) {
	p := newPair(t, keep.AutoAlways, nil)
	p.join()
	p.mainRemote().allowed = false
	lost := map[codec.TransactionKind]bool{}
	p.cut = func(w wired) bool {
		var pp packet.Packet
		if w.from != p.other || packet.Parse(w.b, &pp) != nil {
			return false
		}
		h := pp.Head
		if (h.TransactionKind == codec.TransactionKindJoin && h.PacketKind == codec.PacketKindAck ||
			h.TransactionKind == codec.TransactionKindAllow && h.PacketKind == codec.PacketKindHello) && !lost[h.TransactionKind] {
			lost[h.TransactionKind] = true
			return true
		}
		return false
	}
	or := p.otherRemote()
	or.allowed = false
	res := make(chan error, 1)
	p.other.Join(p.mainAddr, res, p.now)
	p.pump()
	p.advance(3 * time.Second)
	if err, ok := outcome(res); !ok || err != nil {
		t.Fatalf("join: %v (%v)", err, ok)
	}
	if n := p.count(p.other, codec.TransactionKindJoin, codec.PacketKindAck); n < 3 {
		t.Fatalf("%d join acks, want the lost one and one again", n)
	}
	if !p.mainRemote().joined || !p.mainRemote().allowed {
		t.Fatal("main did not take the join")
	}
}
