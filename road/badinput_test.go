package road_test

import (
	"bytes"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// forger builds packets that other would send to main, from other's keep
// (its signing key) and its keylog (the session's short-term keys).
type forger struct {
	pk   packet.Packer
	coat packet.Coat
	head codec.Head
}

func newForger(t *testing.T, keepDir string, keylog []byte, main road.Remote) *forger {
	t.Helper()
	k, err := keep.Open(keepDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	role, err := k.LoadLocalRole()
	if err != nil {
		t.Fatal(err)
	}
	entries, err := handshake.ParseKeyLog(bytes.NewReader(keylog))
	if err != nil || len(entries) == 0 {
		t.Fatalf("keylog: %v", err)
	}
	e := entries[len(entries)-1]
	coat, err := packet.NewNaClCoat((*[32]byte)(&e.OurShortPriv), (*[32]byte)(&e.TheirShortPub), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &forger{coat: coat}
	f.pk = packet.Packer{Codec: mustCodec(t, codec.HeadKindRaet), Foot: packet.NewNaClFoot((*[32]byte)(&role.Seed), nil)}
	f.head.Reset()
	// other's uid for main is main.FUID... seen from other: se = other's
	// nuid of main, de = main's uid of other.
	f.head.SourceID, f.head.DestinationID, f.head.SessionID = main.UID, main.FUID, main.SID
	f.head.BodyKind, f.head.CoatKind = codec.BodyKindJSON, codec.CoatKindNaCl
	f.head.SetWait(true)
	return f
}

func mustCodec(t *testing.T, k codec.HeadKind) codec.Codec {
	c, err := codec.Lookup(k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// message packs a message packet with transaction id ti and the given coat
// bytes (sealed by the caller or garbage).
func (f *forger) message(t *testing.T, ti uint32, coat []byte) []byte {
	h := f.head
	h.TransactionID = ti
	b, err := f.pk.Pack(nil, &h, coat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every input that crashes the reference's service loop (§13), and garbage,
// truncated and oversized datagrams, is dropped and counted by a running
// stack, which goes on serving.
func TestCrashInputsAreDroppedAndCounted(t *testing.T) {
	var keylog bytes.Buffer
	var mu sync.Mutex
	otherKeep := t.TempDir()
	// The NaCl coat, whose boxes these inputs are forged in (AEAD coats
	// meet their bad inputs in the core's tests).
	m, o := joined(t, road.Config{AlivePeriod: -1, AEAD: road.AEADRefuse}, road.Config{KeepDir: otherKeep, Auto: keep.AutoAlways,
		KeyLog: lockedWriter{&mu, &keylog}, AlivePeriod: -1, AEAD: road.AEADRefuse})
	ctx := ctxT(t, 20*time.Second)
	rs, err := o.Remotes(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatal(rs, err)
	}
	mu.Lock()
	f := newForger(t, otherKeep, keylog.Bytes(), rs[0])
	mu.Unlock()

	sealed := func(plain string) []byte {
		// The stacks negotiated message ids: 0x00 is the envelope of none.
		b, err := f.coat.Seal(nil, append([]byte{0}, plain...))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	inputs := map[string][]byte{
		"native line without a space":   []byte("ri RAET\npl 0020\nhl 20\nfg 00\nbk1\n\n"),
		"native line with two spaces":   []byte("ri RAET\npl 0021\nhl 21\nfg 00\nbk 1 1\n\n"),
		"head key bl":                   []byte("ri RAET\npl 001f\nhl 1f\nfg 00\nbl 1\n\n"),
		"head key cl":                   []byte("ri RAET\npl 001f\nhl 1f\nfg 00\ncl 1\n\n"),
		"box that fails to open":        f.message(t, 101, bytes.Repeat([]byte{7}, 80)),
		"coat shorter than its nonce":   f.message(t, 102, []byte{1, 2, 3}),
		"json body that does not parse": f.message(t, 103, sealed(`{"a": nope`)),
		"body that is not a mapping":    f.message(t, 104, sealed(`[1,2,3]`)),
		"garbage":                       []byte("\x00\xff\x10garbage"),
		"truncated head":                []byte("ri RAET\npl 0040\nhl 22"),
		"oversized":                     append([]byte("ri RAET\npl ffff\nhl 22\nfg 00\nbk 2\n\n"), make([]byte, 60000)...),
		"http":                          []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		"bad signature":                 flip(f.message(t, 105, sealed(`{"ok":1}`)), 40),
	}
	// (The forged ids are other's, ahead of its own but within the replay
	// window, so its next message is still taken.)
	// Inconsistent segments of one message: different counts.
	seg := f.head
	seg.TransactionID, seg.SegmentNumber, seg.SegmentCount, seg.MessageLength = 106, 0, 3, 3000
	seg.SetSegment(true)
	seg.SetWait(false)
	s0, err := f.pk.Pack(nil, &seg, bytes.Repeat([]byte{1}, 800))
	if err != nil {
		t.Fatal(err)
	}
	seg.SegmentNumber, seg.SegmentCount = 1, 4
	s1, err := f.pk.Pack(nil, &seg, bytes.Repeat([]byte{1}, 800))
	if err != nil {
		t.Fatal(err)
	}
	inputs["segment 0 of 3"] = s0
	inputs["inconsistent segment"] = s1

	conn, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(m.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for name, b := range inputs {
		if _, err := conn.Write(b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	time.Sleep(300 * time.Millisecond)
	// Still serving.
	if err := o.Send(ctx, "main", map[string]any{"still": "here"}); err != nil {
		t.Fatal(err)
	}
	if got := recvOne(t, m, 5*time.Second); got.Body["still"] != "here" {
		t.Fatalf("got %+v", got)
	}
	c, err := m.Counters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, reason := range []string{"head_syntax", "head_unknown_key", "coat_open", "head_truncated", "not_raet", "verify_failed", "segment", "body"} {
		if c.Drops[reason] == 0 {
			t.Errorf("no drop counted as %q; drops: %v", reason, c.Drops)
		}
	}
	t.Logf("drops: %v", c.Drops)
}

func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[len(b)-i] ^= 1
	return b
}
