package road_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// logBuf is a log the tests read.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
func (l *logBuf) logger() *slog.Logger        { return slog.New(slog.NewTextHandler(l, nil)) }

// freeAddr is a loopback UDP address nobody listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().String()
}

// started makes and starts a stack (on loopback unless the config says)
// that the caller closes.
func started(t *testing.T, cfg road.Config) *road.Stack {
	t.Helper()
	if cfg.Listen == "" && cfg.PacketConn == nil {
		cfg.Listen = "127.0.0.1:0"
	}
	s, err := road.New(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatal(err)
	}
	return s
}

// wantReason checks a Join error's reason, and that its text says why.
func wantReason(t *testing.T, err error, want road.Reason, sentinel error, words ...string) {
	t.Helper()
	var je *road.JoinError
	if !errors.As(err, &je) || je.Reason != want || !errors.Is(err, sentinel) {
		t.Fatalf("Join: %v; want reason %v wrapping %v", err, want, sentinel)
	}
	if want != road.ReasonNoAnswer { // which says it in its own words
		words = append(words, want.Describe())
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("Join's error %q does not say %q", err, w)
		}
	}
}

// A client that joins from port A, then from port B (a restart on another
// port), then from A again: B is told why and what to do, the main logs it,
// and neither side forgets the other, so A works again.
func TestJoinFromAnotherAddressThenBack(t *testing.T) {
	var mainLog logBuf
	mainKeep, betaKeep := t.TempDir(), t.TempDir()
	alpha := newStack(t, road.Config{Name: "alpha", Main: true, KeepDir: mainKeep, Auto: keep.AutoOnce, Logger: mainLog.logger()})
	portA, portB := freeAddr(t), freeAddr(t)
	ctx := ctxT(t, 30*time.Second)

	join := func(listen string) error {
		beta := started(t, road.Config{Name: "beta", KeepDir: betaKeep, Listen: listen})
		defer beta.Close()
		r, err := beta.Join(ctx, alpha.Addr().String())
		if err != nil {
			return err
		}
		return beta.Send(ctx, r.Name, map[string]any{"from": listen})
	}
	if err := join(portA); err != nil {
		t.Fatal(err)
	}
	recvOne(t, alpha, 5*time.Second)

	err := join(portB)
	wantReason(t, err, road.ReasonAddressChanged, road.ErrRejected, "alpha", "join from "+portA)
	if log := mainLog.String(); !strings.Contains(log, "reason=address-changed") || !strings.Contains(log, "--mutable") ||
		!strings.Contains(log, "raet keys forget --keep "+mainKeep+" beta") {
		t.Fatalf("the main's log does not say why, or what to do:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(betaKeep, "remote", "estate.alpha.json")); err != nil {
		t.Fatalf("beta forgot alpha: %v", err)
	}

	if err := join(portA); err != nil {
		t.Fatalf("back at the first address: %v", err)
	}
	if m := recvOne(t, alpha, 5*time.Second); m.Body["from"] != portA {
		t.Fatalf("alpha got %+v", m)
	}
}

// Every rejection kind: the joiner's error names the reason, the main's
// log names it with what resolves it.
func TestJoinRejectionReasons(t *testing.T) {
	ctx := ctxT(t, 60*time.Second)

	t.Run("name taken", func(t *testing.T) {
		var log logBuf
		alpha := newStack(t, road.Config{Name: "alpha", Main: true, Auto: keep.AutoAlways, Logger: log.logger()})
		first := newStack(t, road.Config{Name: "beta"})
		if _, err := first.Join(ctx, alpha.Addr().String()); err != nil {
			t.Fatal(err)
		}
		impostor := newStack(t, road.Config{Name: "beta"}) // other keys
		_, err := impostor.Join(ctx, alpha.Addr().String())
		wantReason(t, err, road.ReasonNameTaken, road.ErrRejected)
		if !strings.Contains(log.String(), "reason=name-taken") {
			t.Fatalf("main's log:\n%s", log.String())
		}
		for e := waitEvent(t, alpha, road.EventRejected, 5*time.Second); e.Reason != road.ReasonNameTaken; {
			t.Fatalf("alpha's event: %+v", e)
		}
		if e := waitEvent(t, impostor, road.EventRejected, 5*time.Second); e.Reason != road.ReasonNameTaken {
			t.Fatalf("the impostor's event: %+v", e)
		}
	})

	t.Run("keys pending at the main", func(t *testing.T) {
		var log logBuf
		dir := t.TempDir()
		alpha := newStack(t, road.Config{Name: "alpha", Main: true, KeepDir: dir, Logger: log.logger()}) // AutoNever
		beta := newStack(t, road.Config{Name: "beta"})
		_, err := beta.Join(ctxT(t, 2*time.Second), alpha.Addr().String())
		wantReason(t, err, road.ReasonPendingTheirs, context.DeadlineExceeded, "raet keys accept --keep DIR beta")
		if l := log.String(); !strings.Contains(l, "reason=pending-ours") || !strings.Contains(l, "raet keys accept --keep "+dir+" beta") {
			t.Fatalf("main's log:\n%s", l)
		}
	})

	t.Run("keys rejected by the operator", func(t *testing.T) {
		var log logBuf
		dir := t.TempDir()
		alpha := newStack(t, road.Config{Name: "alpha", Main: true, KeepDir: dir, Logger: log.logger(),
			PendTimeout: 5 * time.Second})
		beta := newStack(t, road.Config{Name: "beta"})
		go func() { // the operator says no
			k, _ := keep.Open(dir, nil)
			for range 100 {
				if k.SetAcceptance("beta", keep.Rejected) == nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		_, err := beta.Join(ctx, alpha.Addr().String())
		wantReason(t, err, road.ReasonKeysRejected, road.ErrRejected)
		if !strings.Contains(log.String(), "reason=keys-rejected") {
			t.Fatalf("main's log:\n%s", log.String())
		}
	})

	t.Run("not a main", func(t *testing.T) {
		var log logBuf
		gamma := newStack(t, road.Config{Name: "gamma", Logger: log.logger()})
		beta := newStack(t, road.Config{Name: "beta"})
		_, err := beta.Join(ctx, gamma.Addr().String())
		wantReason(t, err, road.ReasonNotMain, road.ErrRejected)
		if !strings.Contains(log.String(), "reason=not-main") {
			t.Fatalf("gamma's log:\n%s", log.String())
		}
	})

	t.Run("no answer", func(t *testing.T) {
		silent := freeAddr(t)
		beta := newStack(t, road.Config{Name: "beta", JoinTimeout: 500 * time.Millisecond})
		_, err := beta.Join(ctx, silent)
		wantReason(t, err, road.ReasonNoAnswer, road.ErrTimeout, "no answer from "+silent, "tries")
		if strings.Contains(err.Error(), "estate_") {
			t.Fatalf("the error names a placeholder: %v", err)
		}
	})

	t.Run("the main's keys changed", func(t *testing.T) {
		// beta trusts alpha's keys on first use; a new alpha (new keys, at
		// the same address) does not know beta: it asks for a renew, which
		// beta's immutable road refuses; and once beta forgets the old
		// alpha, the new one's keys differ from the trusted ones.
		betaKeep := t.TempDir()
		addr := freeAddr(t)
		for i, want := range []road.Reason{road.ReasonNone, road.ReasonUnknownToRemote, road.ReasonMainKeysChanged} {
			if want == road.ReasonMainKeysChanged {
				if err := os.Remove(filepath.Join(betaKeep, "remote", "estate.alpha.json")); err != nil {
					t.Fatal(err)
				}
			}
			alpha := started(t, road.Config{Name: "alpha", Main: true, Auto: keep.AutoAlways, Listen: addr}) // new keys each time
			beta := started(t, road.Config{Name: "beta", KeepDir: betaKeep})                                 // Auto: never
			_, err := beta.Join(ctx, addr)
			beta.Close()
			alpha.Close()
			switch want {
			case road.ReasonNone:
				if err != nil {
					t.Fatalf("join %d, keys trusted on first use: %v", i, err)
				}
			case road.ReasonUnknownToRemote:
				wantReason(t, err, want, road.ErrRenewImmutable, "raet keys forget --keep "+betaKeep+" alpha")
			default:
				wantReason(t, err, want, road.ErrRejected, "raet keys forget --keep "+betaKeep+" alpha")
			}
		}
	})
}

// A join whose body kind the main cannot read is rejected with that
// reason, in a body the joiner can read.
func TestJoinUnknownBodyKindIsRejectedWithTheReason(t *testing.T) {
	var log logBuf
	alpha := newStack(t, road.Config{Name: "alpha", Main: true, Auto: keep.AutoAlways, Logger: log.logger()})
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var h codec.Head
	h.Reset()
	h.TransactionKind, h.PacketKind, h.SourceID, h.TransactionID = codec.TransactionKindJoin, codec.PacketKindRequest, 7, 1
	h.BodyKind = codec.BodyKind(200)
	req, err := (&packet.Packer{Codec: mustCodec(t, codec.HeadKindRaet), Foot: packet.NadaFoot{}}).Pack(nil, &h, []byte("?"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WriteToUDPAddrPort(req, alpha.Addr()); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 2048)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	var p packet.Packet
	if err := packet.Parse(buf[:n], &p); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if p.Head.PacketKind != codec.PacketKindReject || json.Unmarshal(p.Coat, &body) != nil || body["reason"] != "body-kind" {
		t.Fatalf("answer %v %q", p.Head.PacketKind, p.Coat)
	}
	if !strings.Contains(log.String(), "reason=body-kind") {
		t.Fatalf("main's log:\n%s", log.String())
	}
}
