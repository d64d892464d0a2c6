package core

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
	"github.com/raet-go/raet/packet"
)

// fuzzPair is a joined pair with fixed long-term keys (so that the seeds'
// signatures verify in every pair made for an input) that has exchanged a
// few messages both ways.
func fuzzPair(tb testing.TB, tp testProfile) *pair {
	tb.Helper()
	p := newRig(tb)
	for i, c := range []*estate{
		{Config: Config{Name: "main", Main: true, AlivePeriod: -1, Profile: tp.prof, AEAD: tp.aead}, Auto: keep.AutoAlways},
		{Config: Config{Name: "other", AlivePeriod: -1, Profile: tp.prof, AEAD: tp.aead}, Auto: keep.AutoAlways},
	} {
		st := newMemStore()
		var seed keys.SigningSeed
		var pri keys.PrivateKey
		seed[0], pri[0] = byte(i+1), byte(i+1)
		_, _ = st.write(&keepWrite{op: opSaveLocal, local: keep.LocalEstate{Name: c.Name, UID: uint32(100 * (i + 1)), PUID: uint32(100 * (i + 1)), Role: c.Name},
			localRole: keep.LocalRole{Role: c.Name, Seed: seed, Private: pri}})
		core := p.newCore(c, st)
		if i == 0 {
			p.main = core
		} else {
			p.other = core
		}
	}
	p.main.Start(p.mainAddr, p.now)
	p.other.Start(p.otherAddr, p.now)
	p.join()
	for i := range 2 {
		if err := p.send(p.other, map[string]any{"n": i}); err != nil {
			tb.Fatal(err)
		}
		if err := p.send(p.main, map[string]any{"m": i}); err != nil {
			tb.Fatal(err)
		}
	}
	// Several at once each way (main's carrying its dones), and a large
	// one: bundles (of several entries, and carrying answers) and answers
	// packets in the fast profile, lone messages and segments in the
	// reference one.
	res, back := p.crossSend(3, 2)
	res = append(res, back...)
	res = append(res, p.sendAll(p.other, 1, 3000)...)
	p.pump()
	p.advance(time.Millisecond)
	allDone(tb, res)
	return p
}

// fuzzSeeds are the datagrams of a real join, allow and messages (lone,
// segmented and bundled, and their answers), in every profile (AEAD coats
// too).
func fuzzSeeds(tb testing.TB) [][]byte {
	var out [][]byte
	for _, tp := range profiles {
		p := fuzzPair(tb, tp)
		for _, w := range p.wire {
			out = append(out, w.b)
		}
	}
	return out
}

// authentic reports whether b is a packet main can authenticate as other's.
func authentic(r *remote, b []byte) bool {
	var p packet.Packet
	if packet.Parse(b, &p) != nil || p.Head.DestinationID != r.nuid {
		return false
	}
	switch p.Head.FootKind {
	case codec.FootKindNaCl:
		k := [32]byte(r.verify)
		return p.Verify(packet.NewNaClFoot(nil, func(uint32) (*[32]byte, bool) { return &k, true })) == nil
	case codec.FootKindMAC:
		return r.prof != nil && r.prof.mac != nil && p.Verify(r.prof.mac) == nil
	case codec.FootKindNada:
		// Opened with a coat of the session's keys but a window of its own,
		// so that asking does not move the session's.
		a := r.aead()
		if a == nil || a.Kind() != p.Head.CoatKind {
			return false
		}
		fresh, err := packet.NewAEADCoat(a.Kind(), (*[32]byte)(&r.short.Private), (*[32]byte)(&r.peerShort))
		if err != nil {
			return false
		}
		_, err = p.OpenAEAD(nil, fresh)
		return err == nil
	}
	return false
}

// FuzzCoreReceive feeds arbitrary datagrams, at arbitrary times and from
// the peer's address or another, to a main estate with an established
// session (seeded with every packet a real join, allow and messages sent,
// in every profile). Nothing is ever delivered (the seeds are replays, and
// nothing else can be authenticated), and a datagram that main cannot
// authenticate never changes the peer's session: ids, keys, allowed,
// joined, replay window.
func FuzzCoreReceive(f *testing.F) {
	for i, b := range fuzzSeeds(f) {
		f.Add(b, uint16(i*37), uint8(i%3), uint8(i%len(profiles)))
	}
	f.Fuzz(func(t *testing.T, b []byte, waitMs uint16, from uint8, prof uint8) {
		p := fuzzPair(t, profiles[int(prof)%len(profiles)])
		p.advance(time.Duration(waitMs) * time.Millisecond)
		r := p.mainRemote()
		before := snapshot(r)
		delivered := len(p.delivered[p.main])
		src := p.otherAddr
		switch from % 3 {
		case 1:
			src = netip.MustParseAddrPort("127.0.0.9:7531")
		case 2:
			src = p.mainAddr // reflected
		}
		auth := authentic(r, b)
		p.inject(p.main, bytes.Clone(b), src)
		p.advance(time.Second)
		if n := len(p.delivered[p.main]) - delivered; n != 0 {
			t.Fatalf("delivered %d messages: %+v", n, p.delivered[p.main][delivered:])
		}
		if after := snapshot(r); !auth && after != before {
			t.Fatalf("an unauthenticated datagram changed the session:\n before %+v\n after  %+v", before, after)
		}
	})
}
