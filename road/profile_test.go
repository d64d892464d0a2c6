package road_test

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/crypto/nacl/box"
)

// Two raet-go estates agree on the fast profile: binary heads, an AEAD coat
// with no foot (or, when one refuses AEAD, the NaCl coat and the MAC foot)
// and the larger packet size; their messages flow with it.
func TestFastProfileNegotiated(t *testing.T) {
	aead, _ := packet.ChooseAEAD(packet.AEADKinds(), packet.AEADKinds())
	for _, tc := range []struct {
		mode road.AEADMode
		foot codec.FootKind
		coat codec.CoatKind
	}{{road.AEADPrefer, codec.FootKindNada, aead}, {road.AEADRefuse, codec.FootKindMAC, codec.CoatKindNaCl}} {
		t.Run(map[road.AEADMode]string{road.AEADPrefer: "aead", road.AEADRefuse: "mac"}[tc.mode], func(t *testing.T) {
			testFastProfile(t, tc.mode, tc.foot, tc.coat)
		})
	}
}

func testFastProfile(t *testing.T, mode road.AEADMode, foot codec.FootKind, coat codec.CoatKind) {
	m, o := joined(t, road.Config{FastMaxPacketSize: 8000}, road.Config{FastMaxPacketSize: 4000, AEAD: mode})
	ctx := ctxT(t, 20*time.Second)
	for _, s := range []*road.Stack{m, o} {
		rs, err := s.Remotes(ctx)
		if err != nil || len(rs) != 1 {
			t.Fatal(rs, err)
		}
		r := rs[0]
		if r.HeadKind != codec.HeadKindBinary || r.FootKind != foot || r.CoatKind != coat || r.MaxPacketSize != 4000 {
			t.Fatalf("%s's session with %s: %v heads, %v feet, %v coats, %d bytes", s.Name(), r.Name, r.HeadKind, r.FootKind, r.CoatKind, r.MaxPacketSize)
		}
	}
	for _, size := range []int{10, 3000, 100_000} {
		if err := o.Send(ctx, "main", map[string]any{"d": strings.Repeat("f", size)}); err != nil {
			t.Fatal(err)
		}
		if got := recvOne(t, m, 5*time.Second); len(got.Body["d"].(string)) != size {
			t.Fatalf("%d B: got %d", size, len(got.Body["d"].(string)))
		}
		if err := m.Send(ctx, "other", map[string]any{"d": strings.Repeat("g", size)}); err != nil {
			t.Fatal(err)
		}
		recvOne(t, o, 5*time.Second)
	}
	c, _ := o.Counters(ctx)
	// 100 kB in 4000-byte packets, not 1024-byte ones.
	if n := c.PacketsOut["message/message"]; n > 40 {
		t.Fatalf("%d message packets: the large packet size is not used", n)
	}
}

// Between raet-go estates, small messages sent at once go out in bundles
// and their dones in answers packets; with NoBundling at either end, as
// lone messages and dones. Each arrives once either way.
func TestBundling(t *testing.T) {
	for _, off := range []bool{false, true} {
		m, o := joined(t, road.Config{NoBundling: off}, road.Config{})
		ctx := ctxT(t, 20*time.Second)
		const n = 64
		errs := make(chan error, n)
		for i := range n {
			go func() { errs <- o.Send(ctx, "main", map[string]any{"i": i}) }()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		for range n {
			k := fmt.Sprint(recvOne(t, m, 5*time.Second).Body["i"])
			if seen[k] {
				t.Fatalf("message %s delivered twice", k)
			}
			seen[k] = true
		}
		co, _ := o.Counters(ctx)
		cm, _ := m.Counters(ctx)
		bundles, lone := co.PacketsOut["message/bundle"], co.PacketsOut["message/message"]
		answers, dones := cm.PacketsOut["message/answers"], cm.PacketsOut["message/done"]
		if off && (bundles != 0 || answers != 0 || lone < n || dones < n) ||
			!off && (lone != 0 || dones != 0 || bundles == 0 || answers == 0) {
			t.Errorf("no bundling %v: %d messages sent in %d bundles and %d lone packets, answered in %d answers and %d dones",
				off, n, bundles, lone, answers, dones)
		}
		t.Logf("no bundling %v: %d messages in %d bundles, %d lone; %d answers, %d dones", off, n, bundles, lone, answers, dones)
	}
}

// A peer that advertises nothing, as the reference, gets the reference
// profile, whatever the other offers.
func TestReferencePeerGetsReferenceProfile(t *testing.T) {
	m, o := joined(t, road.Config{}, road.Config{Profile: road.ProfileReference})
	ctx := ctxT(t, 10*time.Second)
	for _, s := range []*road.Stack{m, o} {
		rs, _ := s.Remotes(ctx)
		if len(rs) != 1 || rs[0].HeadKind != codec.HeadKindRaet || rs[0].FootKind != codec.FootKindNaCl || rs[0].MaxPacketSize != 1024 {
			t.Fatalf("%s: %+v", s.Name(), rs)
		}
	}
	if err := o.Send(ctx, "main", map[string]any{"d": strings.Repeat("r", 5000)}); err != nil {
		t.Fatal(err)
	}
	recvOne(t, m, 5*time.Second)
}

// mitm relays UDP between a client and a server, passing every datagram
// through edit.
type mitm struct {
	conn   *net.UDPConn
	server netip.AddrPort
	mu     sync.Mutex
	client netip.AddrPort
}

func newMITM(t *testing.T, server netip.AddrPort, edit func([]byte) []byte) *mitm {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	x := &mitm{conn: c, server: server}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			b := edit(append([]byte(nil), buf[:n]...))
			x.mu.Lock()
			if from == server {
				_, _ = c.WriteToUDPAddrPort(b, x.client)
			} else {
				x.client = from
				_, _ = c.WriteToUDPAddrPort(b, server)
			}
			x.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return x
}

// A changed advertisement (the join bodies are not signed) fails the allow
// that authenticates it, so the estates never use a profile they did not
// both offer.
func TestTamperedAdvertisementFailsTheHandshake(t *testing.T) {
	m := newStack(t, road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, FastMaxPacketSize: 1400})
	o := newStack(t, road.Config{Name: "other", Auto: keep.AutoAlways, FastMaxPacketSize: 1400})
	var mu sync.Mutex
	tampered := 0
	x := newMITM(t, m.Addr(), func(b []byte) []byte {
		if i := bytes.Index(b, []byte(`"mps":1400`)); i >= 0 {
			copy(b[i:], `"mps":9400`) // same length: the head's lengths still hold
			mu.Lock()
			tampered++
			mu.Unlock()
		}
		return b
	})
	ctx := ctxT(t, 60*time.Second)
	_, err := o.Join(ctx, x.conn.LocalAddr().String())
	if !errors.Is(err, road.ErrRejected) {
		t.Errorf("join through a tampering relay: %v, want a rejection", err)
	}
	if err == nil {
		rs, _ := o.Remotes(ctx)
		t.Fatalf("joined and allowed through a tampered advertisement: %+v", rs)
	}
	mu.Lock()
	defer mu.Unlock()
	if tampered == 0 {
		t.Fatal("the relay never saw an advertisement")
	}
	c, _ := m.Counters(ctxT(t, 5*time.Second))
	if c.Drops["caps_mismatch"] == 0 {
		t.Fatalf("the mismatch was not detected: %v (join: %v)", c.Drops, err)
	}
}

// xcoat is a coat of another kind for the negotiation test: XChaCha20-Poly1305
// keyed with the session's shared key, nonce last.
type xcoat struct{ aead cipher.AEAD }

type xmaker struct{}

func (xmaker) Kind() codec.CoatKind { return codec.CoatKindXChaCha }

func (xmaker) Session(ourPriv, theirPub *[32]byte) (packet.Coat, error) {
	var shared [32]byte
	box.Precompute(&shared, theirPub, ourPriv)
	aead, err := chacha20poly1305.NewX(shared[:])
	if err != nil {
		return nil, err
	}
	return &xcoat{aead}, nil
}

func (x *xcoat) Kind() codec.CoatKind { return codec.CoatKindXChaCha }
func (x *xcoat) Overhead() int        { return x.aead.Overhead() + x.aead.NonceSize() }
func (x *xcoat) Seal(dst, plain []byte) ([]byte, error) {
	if len(plain) == 0 {
		return dst, nil
	}
	nonce := make([]byte, x.aead.NonceSize())
	rand.Read(nonce)
	return append(x.aead.Seal(dst, nonce, plain, nil), nonce...), nil
}
func (x *xcoat) Open(dst, coat []byte) ([]byte, error) {
	if len(coat) == 0 {
		return dst, nil
	}
	n := x.aead.NonceSize()
	if len(coat) < n+x.aead.Overhead() {
		return dst, errors.New("short coat")
	}
	return x.aead.Open(dst, coat[len(coat)-n:], coat[:len(coat)-n], nil)
}

// A coat both estates offer replaces NaCl for the session; with a peer
// that does not offer it the session keeps NaCl.
func TestCoatNegotiated(t *testing.T) {
	var got []codec.CoatKind
	var mu sync.Mutex
	tap := func(p road.TapPacket) {
		var pk packet.Packet
		if packet.Parse(p.Data, &pk) == nil && pk.Head.TransactionKind == codec.TransactionKindMessage && len(pk.Coat) > 0 {
			mu.Lock()
			got = append(got, pk.Head.CoatKind)
			mu.Unlock()
		}
	}
	m, o := joined(t, road.Config{Coat: xmaker{}, Tap: tap}, road.Config{Coat: xmaker{}})
	ctx := ctxT(t, 10*time.Second)
	if err := o.Send(ctx, "main", map[string]any{"coat": "x", "big": strings.Repeat("c", 5000)}); err != nil {
		t.Fatal(err)
	}
	if msg := recvOne(t, m, 5*time.Second); msg.Body["coat"] != "x" {
		t.Fatalf("got %+v", msg)
	}
	mu.Lock()
	if len(got) == 0 || got[0] != codec.CoatKindXChaCha {
		t.Fatalf("coats on the wire: %v", got)
	}
	mu.Unlock()

	m2, o2 := joined(t, road.Config{Name: "main2", Coat: xmaker{}}, road.Config{Name: "other2"})
	if err := o2.Send(ctx, "main2", map[string]any{"coat": "nacl"}); err != nil {
		t.Fatal(err)
	}
	recvOne(t, m2, 5*time.Second)
}
