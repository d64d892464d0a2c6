package main

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// TestSmoke runs every peer briefly in both modes at two sizes and checks
// each got its messages acked (windowed) or counted and checked (one-way)
// without errors, with a CPU cost, and that the tables name every peer.
func TestSmoke(t *testing.T) {
	ps := peers(8192)
	for _, mode := range []string{modeWindowed, modeOneWay} {
		res := run(ps, mode, []int{64, 16 << 10}, 4, 1, 50*time.Millisecond, nil)
		var want []string
		for _, p := range ps {
			if (mode == modeWindowed && (p.dial != nil || p.ceiling != nil)) || (mode == modeOneWay && p.oneWay != nil) {
				want = append(want, p.name)
			}
		}
		if len(res) != 2*len(want) {
			t.Fatalf("%s: %d results, want %d", mode, len(res), 2*len(want))
		}
		for _, r := range res {
			if r.Count == 0 || r.Errors != 0 || r.MsgsPerS <= 0 || r.CPUusPerMsg <= 0 || r.Mode != mode {
				t.Errorf("%s %s %d: %+v", mode, r.Peer, r.Size, r)
			}
			if mode == modeWindowed && !strings.Contains(r.Peer, "ceiling") && (r.RTTP50us <= 0 || r.IdleP50us <= 0) {
				t.Errorf("%s %s %d: no RTT: %+v", mode, r.Peer, r.Size, r)
			}
			if hasRatio := mode == modeWindowed && (r.Peer == ceilingOf || r.Peer == batchCeilingPeer); hasRatio != (r.OfCeiling > 0) {
				t.Errorf("%s %s %d: ratio to the crypto ceiling %v", mode, r.Peer, r.Size, r.OfCeiling)
			}
			// The bound with the I/O floor is below the ceiling: the
			// reference row is a larger share of it.
			if hasIO := mode == modeWindowed && r.Peer == ceilingOf; hasIO != (r.OfCeilingIO > r.OfCeiling) {
				t.Errorf("%s %s %d: ratio to the ceiling with the I/O floor %v (to the ceiling %v)", mode, r.Peer, r.Size, r.OfCeilingIO, r.OfCeiling)
			}
			if mode == modeWindowed && r.Peer == udpPeer && r.PktsPerMsg != 2 {
				t.Errorf("%s %s %d: %.2f datagrams a message, want the message and its ack", mode, r.Peer, r.Size, r.PktsPerMsg)
			}
		}
		var b bytes.Buffer
		printTable(&b, res, mode, 4, 1, 50*time.Millisecond)
		for _, name := range want {
			if !strings.Contains(b.String(), name) {
				t.Errorf("%s table lacks %q:\n%s", mode, name, b.String())
			}
		}
		t.Log("\n" + b.String())
	}
}

// The ceiling rows sign and verify the datagrams a message really makes
// with the reference profile (1024-byte packets): at 64 B the message and
// its done, at 1 KiB two segments and the done; the road's verifier and
// the batch verifier accept every signature, and the windowed run of the
// stack sent as many datagrams per message as the ceiling signs.
func TestCeiling(t *testing.T) {
	for _, tc := range []struct {
		size, segs int
	}{{64, 1}, {1024, 2}} {
		pkts, err := messagePackets(tc.size)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkts) != tc.segs+1 {
			t.Fatalf("%d B: %d datagrams, want %d segments and the done", tc.size, len(pkts), tc.segs)
		}
		for i, b := range pkts {
			var pk packet.Packet
			if err := packet.Parse(b, &pk); err != nil || len(b) > 1024 || pk.Head.FootKind != codec.FootKindNaCl {
				t.Fatalf("%d B: datagram %d: %d bytes, foot %v, %v", tc.size, i, len(b), pk.Head.FootKind, err)
			}
			want := codec.PacketKindMessage
			if i == tc.segs {
				want = codec.PacketKindDone
			}
			if pk.Head.PacketKind != want || int(pk.Head.SegmentCount) != map[bool]int{true: tc.segs, false: 1}[i < tc.segs] {
				t.Fatalf("%d B: datagram %d is %v (%d segments)", tc.size, i, pk.Head.PacketKind, pk.Head.SegmentCount)
			}
		}
		for _, batch := range []bool{false, true} {
			r := measureCeiling("c", tc.size, 30*time.Millisecond, batch)
			if r.Count == 0 || r.Errors != 0 || r.CPUusPerMsg <= 0 || r.PktsPerMsg != float64(len(pkts)) {
				t.Fatalf("%d B, batch %v: %+v", tc.size, batch, r)
			}
		}
		run := measure(selectPeers(ceilingOf, 0)[0], tc.size, 4, 50*time.Millisecond, 10*time.Second)
		if run.Errors != 0 || run.PktsPerMsg < float64(len(pkts)) || run.PktsPerMsg > float64(len(pkts))+0.5 {
			t.Fatalf("%d B: the run of %q sent %.2f datagrams per message, the ceiling signs %d: %+v", tc.size, run.Peer, run.PktsPerMsg, len(pkts), run)
		}
	}
}

// TestIOBound checks the bound with the I/O floor against the figures of
// the integrator's quiet run: a ceiling of 12052 msgs/s at 164.2 µs of
// crypto for 3 datagrams, and raw UDP at 14.4 µs for its 2 (7.2 µs each),
// give 164.2+3·7.2 = 185.8 µs a message, 12052·164.2/185.8 = 10651 msgs/s;
// and no bound without the udp row's figures.
func TestIOBound(t *testing.T) {
	c := result{Peer: ceilingPeer, MsgsPerS: 12052, CPUusPerMsg: 164.2, PktsPerMsg: 3}
	u := result{Peer: udpPeer, CPUusPerMsg: 14.4, PktsPerMsg: 2}
	if got := ioBound(c, u); math.Abs(got-10651) > 1 {
		t.Errorf("ioBound = %.1f, want 10651", got)
	}
	if got := ioBound(c, result{Peer: udpPeer, CPUusPerMsg: 14.4}); got != 0 {
		t.Errorf("ioBound without the udp row's datagrams = %v, want 0", got)
	}
	round := []result{u, {Peer: ceilingOf, MsgsPerS: 8361}, c}
	ofCeiling(round)
	if r := round[1]; math.Abs(r.OfCeiling-0.694) > 0.001 || math.Abs(r.OfCeilingIO-0.785) > 0.001 {
		t.Errorf("reference row: ×ceiling %.3f, ×ceiling+I/O %.3f; want 0.694, 0.785", r.OfCeiling, r.OfCeilingIO)
	}
}

// chanOneWay is a oneWay over a channel that can damage what it carries.
type chanOneWay struct {
	ch     chan frame
	damage func(id uint64, p []byte) (uint64, []byte, bool) // false: drop it
}

type frame struct {
	id uint64
	p  []byte
}

func (c *chanOneWay) send(id uint64, p []byte) error {
	if id, p, ok := c.damage(id, p); ok {
		c.ch <- frame{id, p}
	}
	return nil
}

func (c *chanOneWay) recv() (uint64, []byte, error) {
	select {
	case f := <-c.ch:
		return f.id, f.p, nil
	case <-time.After(200 * time.Millisecond):
		return 0, nil, errors.New("nothing more")
	}
}

func (c *chanOneWay) close() {}

// TestOneWayChecksEveryMessage shows the receiver's check catches a lost,
// a repeated and a changed message, and passes an undamaged stream.
func TestOneWayChecksEveryMessage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(id uint64, p []byte) (uint64, []byte, bool)
		errors bool
	}{
		{"intact", func(id uint64, p []byte) (uint64, []byte, bool) { return id, p, true }, false},
		{"lost", func(id uint64, p []byte) (uint64, []byte, bool) { return id, p, id != 3 }, true},
		{"repeated", func(id uint64, p []byte) (uint64, []byte, bool) { return min(id, 2), p, true }, true},
		{"changed", func(id uint64, p []byte) (uint64, []byte, bool) {
			if id == 5 {
				p = bytes.ToUpper(p)
			}
			return id, p, true
		}, true},
	} {
		p := peer{name: tc.name, oneWay: func() (oneWay, error) {
			return &chanOneWay{ch: make(chan frame, 16), damage: tc.damage}, nil
		}}
		r := measureOneWay(p, 64, 4, 20*time.Millisecond, time.Second)
		if got := r.Errors > 0; got != tc.errors || r.Count == 0 {
			t.Errorf("%s: errors %v, want %v: %+v", tc.name, got, tc.errors, r)
		}
	}
}

// TestTally checks the receiver's rule per kind of peer.
func TestTally(t *testing.T) {
	for _, tc := range []struct {
		name           string
		ordered, lossy bool
		ids            []uint64
		counted, lost  int
		bad            int
		settled        uint64
	}{
		{"ordered", true, false, []uint64{0, 1, 2}, 3, 0, 0, 3},
		{"ordered gap", true, false, []uint64{0, 2}, 1, 0, 1, 1},
		{"ordered repeat", true, false, []uint64{0, 1, 1}, 2, 0, 1, 2},
		{"lossy gap", true, true, []uint64{0, 3, 4}, 3, 2, 0, 5},
		{"lossy late", true, true, []uint64{0, 3, 2}, 2, 2, 1, 4},
		{"unordered", false, false, []uint64{2, 0, 1, 4}, 4, 0, 0, 4},
		{"unordered repeat", false, false, []uint64{2, 0, 2, 0}, 2, 0, 2, 2},
	} {
		tl := tally{ordered: tc.ordered, lossy: tc.lossy}
		for _, id := range tc.ids {
			tl.add(id, true, 1)
		}
		if tl.counted != tc.counted || tl.lost != tc.lost || tl.bad != tc.bad || tl.settled() != tc.settled {
			t.Errorf("%s: counted %d lost %d bad %d settled %d, want %d %d %d %d", tc.name,
				tl.counted, tl.lost, tl.bad, tl.settled(), tc.counted, tc.lost, tc.bad, tc.settled)
		}
	}
	tl := tally{ordered: true}
	tl.add(0, false, 3)
	if tl.bad != 1 || tl.counted != 0 || tl.settled() != 1 {
		t.Errorf("a changed payload: %+v", tl)
	}
}

// TestFanoutSmoke runs every fan-out peer briefly to 1 and 3 subscribers:
// every message reaches every subscriber, once and intact.
func TestFanoutSmoke(t *testing.T) {
	ps := fanPeers()
	res := runFanout(ps, []int{64}, []int{1, 3}, 4, 1, 50*time.Millisecond, nil)
	if len(res) != 2*len(ps) {
		t.Fatalf("%d results, want %d", len(res), 2*len(ps))
	}
	for _, r := range res {
		if r.Count == 0 || r.Count%r.Subs != 0 || r.Errors != 0 || r.MsgsPerS <= 0 || r.CPUusPerMsg <= 0 || r.RTTP50us <= 0 {
			t.Errorf("%s to %d: %+v", r.Peer, r.Subs, r)
		}
	}
	var b bytes.Buffer
	printFanout(&b, res, 4, 1, 50*time.Millisecond)
	for _, p := range ps {
		if !strings.Contains(b.String(), p.name) {
			t.Errorf("table lacks %q:\n%s", p.name, b.String())
		}
	}
	t.Log("\n" + b.String())
}
