//go:build flood

// The flood tests measure how a known peer fares while the stack is flooded,
// so they need the machine to themselves: `make flood` (part of `make test`)
// runs them alone, after the other tests, with -tags flood.

package road_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// Floods against running stacks on loopback (issue 11, attack 5). Bounds
// are generous (a busy 2-core machine, -race): the tests assert that the
// known peer gets through and loses nothing, and log how fast.

// flooder sends datagrams from many loopback source addresses (127.77.x.y:
// as spoofed sources look to the stack) at a given rate until stopped.
type flooder struct {
	conns []*net.UDPConn
	sent  atomic.Uint64
	stop  chan struct{}
	done  sync.WaitGroup
}

func newFlooder(t *testing.T, sources int) *flooder {
	t.Helper()
	f := &flooder{stop: make(chan struct{})}
	for i := range sources {
		a := netip.AddrFrom4([4]byte{127, 77, byte(i / 250), byte(1 + i%250)})
		c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(a, 0)))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetWriteBuffer(1 << 20)
		f.conns = append(f.conns, c)
	}
	t.Cleanup(func() {
		f.halt()
		for _, c := range f.conns {
			c.Close()
		}
	})
	return f
}

// run sends make(i) to `to` at perSecond (0: as fast as it can) for at most
// max datagrams, in a goroutine.
func (f *flooder) run(to netip.AddrPort, perSecond, max int, make func(i int) []byte) {
	f.done.Add(1)
	go func() {
		defer f.done.Done()
		ua := net.UDPAddrFromAddrPort(to)
		const tick = 10 * time.Millisecond
		per := perSecond * int(tick) / int(time.Second)
		next := time.Now()
		for i := 0; i < max; {
			select {
			case <-f.stop:
				return
			default:
			}
			n := per
			if perSecond == 0 {
				n = 64
			}
			for k := 0; k < n && i < max; k, i = k+1, i+1 {
				_, _ = f.conns[i%len(f.conns)].WriteToUDP(make(i), ua)
				f.sent.Add(1)
			}
			if perSecond > 0 {
				next = next.Add(tick)
				time.Sleep(time.Until(next))
			}
		}
	}()
}

func (f *flooder) halt() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.done.Wait()
}

// strangerJoin is a vacuous join request of a new estate, with keys that
// look real.
func strangerJoin(t *testing.T, i int) []byte {
	var k [64]byte
	_, _ = rand.Read(k[:])
	body := fmt.Sprintf(`{"name":"flood_%d","mode":0,"kind":0,"verhex":"%s","pubhex":"%s","role":"flood_%d"}`,
		i, hex.EncodeToString(k[:32]), hex.EncodeToString(k[32:]), i)
	var h codec.Head
	h.Reset()
	h.TransactionKind, h.PacketKind = codec.TransactionKindJoin, codec.PacketKindRequest
	h.SourceID, h.TransactionID, h.BodyKind = uint32(2+i%1000), 1, codec.BodyKindJSON
	nat, err := codec.Lookup(codec.HeadKindRaet)
	if err != nil {
		t.Fatal(err)
	}
	pk := packet.Packer{Codec: nat, Foot: packet.NadaFoot{}}
	b, err := pk.Pack(nil, &h, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A known peer rejoins, allows and sends 20 messages while 5,000 join
// requests a second of new estates arrive from 250 loopback sources at a
// main that keeps keys for an operator (auto never): it joins, nothing is
// lost, and the keep gains at most maxPendingStrangers pending roles.
func TestAttackJoinFlood(t *testing.T) {
	mainKeep, otherKeep := t.TempDir(), t.TempDir()
	// First run: they join; main's keep accepts other's keys.
	m := newStack(t, road.Config{Name: "main", Main: true, KeepDir: mainKeep, Auto: keep.AutoAlways})
	o := newStack(t, road.Config{Name: "other", KeepDir: otherKeep, Auto: keep.AutoAlways})
	if _, err := o.Join(ctxT(t, 10*time.Second), m.Addr().String()); err != nil {
		t.Fatal(err)
	}
	mainAddr, otherAddr := m.Addr(), o.Addr()
	m.Close()
	o.Close()

	// Main starts no alive of its own (AlivePeriod -1): the peer's join is
	// the only one (both ends rejoining at once is another matter).
	m = newStack(t, road.Config{Name: "main", Main: true, KeepDir: mainKeep, Auto: keep.AutoNever, Listen: mainAddr.String(),
		AlivePeriod: -1})
	f := newFlooder(t, 250)
	const rate, most = 5000, 60_000 // at most 12 s of it
	joins := make([][]byte, 2000)
	for i := range joins {
		joins[i] = strangerJoin(t, i)
	}
	f.run(mainAddr, rate, most, func(i int) []byte { return joins[i%len(joins)] })
	time.Sleep(time.Second) // the flood is on

	o = newStack(t, road.Config{Name: "other", KeepDir: otherKeep, Auto: keep.AutoAlways, Listen: otherAddr.String()})
	ctx := ctxT(t, 20*time.Second)
	start := time.Now()
	if _, err := o.Join(ctx, mainAddr.String()); err != nil {
		t.Fatalf("the known peer's join during the flood: %v", err)
	}
	joinTook := time.Since(start)
	const n = 20
	for i := range n {
		if err := o.Send(ctx, "main", map[string]any{"i": i}); err != nil {
			t.Fatalf("message %d during the flood: %v", i, err)
		}
	}
	seen := map[any]bool{}
	for range n {
		got := recvOne(t, m, 10*time.Second)
		if seen[got.Body["i"]] {
			t.Fatalf("delivered twice: %v", got.Body)
		}
		seen[got.Body["i"]] = true
	}
	sendsTook := time.Since(start) - joinTook
	flooded := f.sent.Load()
	f.halt()
	// The keep's final state: a stranger's pending role is written before
	// the oldest's removal is queued (at its pend), so the writer, running
	// meanwhile, may show one more for the moment between them.
	c, k, roles := floodEnd(t, ctx, m, mainKeep)
	estates, err := k.RemoteNames()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flood: %d join requests sent; the known peer joined in %v, 20 messages in %v; main: %d join requests served under budget, %d refused by it; keep: %d roles, %d estates; drops %v",
		flooded, joinTook, sendsTook, c.PacketsIn["join/request"]-c.Drops["join_budget"], c.Drops["join_budget"], len(roles), len(estates), c.Drops)
	if c.Drops["join_budget"] == 0 {
		t.Error("no join request was refused by the budget")
	}
	if len(roles) > 64+1 || len(estates) != 1 {
		t.Errorf("the keep holds %d roles and %d estates; want at most 64 pending strangers and other", len(roles), len(estates))
	}
	// Generous for a loaded machine; on an idle one it is milliseconds.
	if joinTook > 5*time.Second {
		t.Errorf("the known peer took %v to join", joinTook)
	}
}

// A flood of one valid signed datagram, replayed as it is and with its head
// changed under the same signature, costs one verification per reader, not
// one per datagram, while the peer sends 50 messages: all arrive once.
func TestAttackReusedSignatureFlood(t *testing.T) {
	var mu sync.Mutex
	var captured []byte
	mainCfg := road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Profile: road.ProfileReference}
	mainCfg.Tap = func(p road.TapPacket) {
		mu.Lock()
		defer mu.Unlock()
		if !p.Out && captured == nil && bytes.Contains(p.Data, []byte("\ntk 4\n")) { // an alive, signed
			captured = bytes.Clone(p.Data)
		}
	}
	m, o := joined(t, mainCfg, road.Config{Name: "other", Auto: keep.AutoAlways, Profile: road.ProfileReference})
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := captured != nil
		mu.Unlock()
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no signed alive captured")
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	valid := captured
	mu.Unlock()
	// The same signature on other bytes.
	forged := bytes.Clone(valid)
	if i := bytes.Index(forged, []byte("\nsi ")); i >= 0 {
		forged[i+4] ^= 1 // another session id: still parses, same signature
	}
	f := newFlooder(t, 8)
	const most = 200_000
	f.run(m.Addr(), 0, most, func(i int) []byte {
		if i%2 == 0 {
			return valid
		}
		return forged
	})
	ctx := ctxT(t, 30*time.Second)
	start := time.Now()
	const n = 50
	for i := range n {
		if err := o.Send(ctx, "main", map[string]any{"i": i}); err != nil {
			t.Fatalf("message %d during the flood: %v", i, err)
		}
	}
	seen := map[any]bool{}
	for range n {
		got := recvOne(t, m, 10*time.Second)
		if seen[got.Body["i"]] {
			t.Fatalf("delivered twice: %v", got.Body)
		}
		seen[got.Body["i"]] = true
	}
	took := time.Since(start)
	flooded := f.sent.Load()
	f.halt()
	c, err := m.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("flood: %d datagrams sent, %d read; the peer's 50 messages took %v; %d verifications in all; drops %v", flooded,
		c.PacketsIn["alive/request"], took, c.Verifications, c.Drops)
	// The peer's own packets (join, allow, alives, 50 messages and their
	// replies) need a few hundred; the flood adds at most a few per reader.
	if c.Verifications > 1000 {
		t.Errorf("%d verifications for %d flooded datagrams", c.Verifications, flooded)
	}
}
