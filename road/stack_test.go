package road_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/internal/handshake"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// joined returns a main and an other stack, other joined and allowed.
func joined(t *testing.T, mainCfg, otherCfg road.Config) (*road.Stack, *road.Stack) {
	t.Helper()
	if mainCfg.Name == "" {
		mainCfg.Name = "main"
	}
	if otherCfg.Name == "" {
		otherCfg.Name = "other"
	}
	mainCfg.Main = true
	if mainCfg.KeepDir == "" {
		mainCfg.Auto = keep.AutoAlways // no operator in these tests
	}
	if otherCfg.KeepDir == "" {
		otherCfg.Auto = keep.AutoAlways
	}
	m := newStack(t, mainCfg)
	o := newStack(t, otherCfg)
	if _, err := o.Join(ctxT(t, 10*time.Second), m.Addr().String()); err != nil {
		t.Fatal(err)
	}
	return m, o
}

// drainEvents discards the events already reported.
func drainEvents(s *road.Stack) {
	for {
		select {
		case <-s.Events():
		default:
			return
		}
	}
}

func waitEvent(t *testing.T, s *road.Stack, kind road.EventKind, d time.Duration) road.Event {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case e := <-s.Events():
			if e.Kind == kind {
				return e
			}
		case <-deadline:
			t.Fatalf("%s: no %v event in %v", s.Name(), kind, d)
		}
	}
}

func TestMessageSizes(t *testing.T) {
	for _, hk := range []codec.HeadKind{codec.HeadKindRaet, codec.HeadKindJSON, codec.HeadKindBinary} {
		t.Run(hk.String(), func(t *testing.T) {
			m, o := joined(t, road.Config{HeadKind: hk}, road.Config{HeadKind: hk, BodyKind: codec.BodyKindMsgpack})
			ctx := ctxT(t, 3*time.Minute)
			for _, size := range []int{0, 1024, 100 * 1024, 10 << 20} {
				if size > 1<<20 && hk != codec.HeadKindRaet {
					continue // 10 MiB once is enough: the head kinds differ per packet only
				}
				body := map[string]any{}
				if size > 0 {
					body["data"] = strings.Repeat("z", size)
				}
				if err := o.Send(ctx, "main", body); err != nil {
					t.Fatalf("%d B: %v", size, err)
				}
				got := recvOne(t, m, 30*time.Second)
				if size == 0 && len(got.Body) != 0 || size > 0 && got.Body["data"] != body["data"] {
					t.Fatalf("%d B: got a body of %d bytes", size, len(got.Raw))
				}
			}
		})
	}
}

func TestJoinPendedThenAccepted(t *testing.T) {
	dir := t.TempDir()
	m := newStack(t, road.Config{Name: "main", Main: true, KeepDir: dir, Auto: keep.AutoNever})
	o := newStack(t, road.Config{Name: "other", Auto: keep.AutoAlways})
	ctx := ctxT(t, 20*time.Second)
	done := make(chan error, 1)
	go func() {
		_, err := o.Join(ctx, m.Addr().String())
		done <- err
	}()
	waitEvent(t, m, road.EventPending, 5*time.Second)
	select {
	case err := <-done:
		t.Fatalf("join finished while pending: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	// The operator accepts, on disk, as `raet keys accept` does.
	k, err := keep.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Accept("other"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("join after acceptance: %v", err)
	}
	if err := o.Send(ctx, "main", map[string]any{"after": "pend"}); err != nil {
		t.Fatal(err)
	}
	if got := recvOne(t, m, 5*time.Second); got.Body["after"] != "pend" {
		t.Fatalf("got %+v", got)
	}
}

// A restarted estate keeps its joins (from the keep) but not its sessions:
// the first alive from the peer is answered unallowed and the peer allows
// again (§9.3).
func TestRestartFromKeep(t *testing.T) {
	dir := t.TempDir()
	cfg := road.Config{Name: "main", Main: true, KeepDir: dir, Listen: "127.0.0.1:0", AlivePeriod: 100 * time.Millisecond, Auto: keep.AutoAlways}
	m := newStack(t, cfg)
	o := newStack(t, road.Config{Name: "other", AlivePeriod: 100 * time.Millisecond, Auto: keep.AutoAlways})
	ctx := ctxT(t, 30*time.Second)
	if _, err := o.Join(ctx, m.Addr().String()); err != nil {
		t.Fatal(err)
	}
	// The joiner is done when it sends its last ack; main has the join
	// (and keeps it) only when that ack arrives.
	waitEvent(t, m, road.EventJoined, 20*time.Second)
	addr := m.Addr()
	m.Close()
	drainEvents(o)
	// What main restores, seen where other cannot reach it (other talks to
	// main's address at once, and a join or allow of its own in flight
	// would change what Remotes shows).
	quiet := cfg
	quiet.Listen, quiet.AlivePeriod = "127.0.0.1:0", -1
	mq := newStack(t, quiet)
	rs, err := mq.Remotes(ctx)
	if err != nil || len(rs) != 1 || !rs[0].Joined || rs[0].Allowed || rs[0].Name != "other" {
		t.Fatalf("restored remotes %+v, %v", rs, err)
	}
	mq.Close()
	cfg.Listen = addr.String()
	m2 := newStack(t, cfg)
	// other's presence alive meets an unallowed remote and allows again;
	// other, the allower, is the last to know.
	waitEvent(t, o, road.EventAllowed, 10*time.Second)
	if err := o.Send(ctx, "main", map[string]any{"after": "restart"}); err != nil {
		t.Fatal(err)
	}
	if got := recvOne(t, m2, 5*time.Second); got.Body["after"] != "restart" {
		t.Fatalf("got %+v", got)
	}
}

// A joiner whose joinent lost its keep gets renew: a mutable road joins
// afresh, an immutable one fails with ErrRenewImmutable (§9.3).
func TestRenew(t *testing.T) {
	for _, mutable := range []bool{true, false} {
		t.Run(map[bool]string{true: "mutable", false: "immutable"}[mutable], func(t *testing.T) {
			mcfg := road.Config{Name: "main", Main: true, Listen: "127.0.0.1:0", Mutable: mutable, AlivePeriod: -1, Auto: keep.AutoAlways}
			ocfg := road.Config{Name: "other", KeepDir: t.TempDir(), Mutable: mutable, AlivePeriod: -1, Auto: keep.AutoAlways}
			m := newStack(t, mcfg)
			o := newStack(t, ocfg)
			ctx := ctxT(t, 20*time.Second)
			if _, err := o.Join(ctx, m.Addr().String()); err != nil {
				t.Fatal(err)
			}
			// main comes back on the same port with no memory of other.
			mcfg.Listen = m.Addr().String()
			m.Close()
			newStack(t, mcfg)
			// other restarts from its keep: joined, not allowed; its join
			// carries main's old uid for it, which main does not know.
			o.Close()
			o2 := newStack(t, ocfg)
			_, err := o2.Join(ctx, mcfg.Listen)
			if mutable {
				if err != nil {
					t.Fatalf("join after renew: %v", err)
				}
				if err := o2.Send(ctx, "main", map[string]any{"renewed": true}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, road.ErrRenewImmutable) {
				t.Fatalf("join on an immutable road: %v", err)
			}
		})
	}
}

func TestSimultaneousJoinsAndAllows(t *testing.T) {
	a := newStack(t, road.Config{Name: "alpha", Main: true, Auto: keep.AutoAlways})
	b := newStack(t, road.Config{Name: "beta", Main: true, Auto: keep.AutoAlways})
	ctx := ctxT(t, 30*time.Second)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); _, errs[0] = a.Join(ctx, b.Addr().String()) }()
	go func() { defer wg.Done(); _, errs[1] = b.Join(ctx, a.Addr().String()) }()
	wg.Wait()
	// The race may refuse one side's join; joining again then succeeds.
	for i, s := range []*road.Stack{a, b} {
		other := []*road.Stack{b, a}[i]
		if errs[i] != nil {
			if _, err := s.Join(ctx, other.Addr().String()); err != nil {
				t.Fatalf("%s rejoin: %v (first: %v)", s.Name(), err, errs[i])
			}
		}
	}
	if err := a.Send(ctx, "beta", map[string]any{"x": 1}); err != nil {
		ra, _ := a.Remotes(ctx)
		rb, _ := b.Remotes(ctx)
		t.Fatalf("%v (first joins: %v)\nalpha: %+v\nbeta: %+v", err, errs, ra, rb)
	}
	recvOne(t, b, 5*time.Second)
	if err := b.Send(ctx, "alpha", map[string]any{"x": 2}); err != nil {
		t.Fatal(err)
	}
	recvOne(t, a, 5*time.Second)
	for _, s := range []*road.Stack{a, b} {
		rs, _ := s.Remotes(ctx)
		if len(rs) != 1 {
			t.Fatalf("%s has %d remotes: %+v", s.Name(), len(rs), rs)
		}
	}
}

func TestIPv6(t *testing.T) {
	ln, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	ln.Close()
	m, o := joined(t, road.Config{Listen: "[::1]:0"}, road.Config{Listen: "[::1]:0"})
	if !m.Addr().Addr().Is6() {
		t.Fatalf("main on %v", m.Addr())
	}
	ctx := ctxT(t, 10*time.Second)
	if err := o.Send(ctx, "main", map[string]any{"v": 6, "data": strings.Repeat("6", 5000)}); err != nil {
		t.Fatal(err)
	}
	if got := recvOne(t, m, 5*time.Second); got.From != "other" {
		t.Fatalf("got %+v", got)
	}
}

// The keylog line of each side has its short-term keys, and the two lines
// mirror each other.
func TestKeyLog(t *testing.T) {
	var ka, kb bytes.Buffer
	var mu sync.Mutex
	m, o := joined(t, road.Config{KeyLog: lockedWriter{&mu, &ka}}, road.Config{KeyLog: lockedWriter{&mu, &kb}})
	_ = m
	_ = o
	mu.Lock()
	defer mu.Unlock()
	ea, err := handshake.ParseKeyLog(bytes.NewReader(ka.Bytes()))
	if err != nil || len(ea) != 1 {
		t.Fatalf("main keylog %q: %v", ka.String(), err)
	}
	eb, err := handshake.ParseKeyLog(bytes.NewReader(kb.Bytes()))
	if err != nil || len(eb) != 1 {
		t.Fatalf("other keylog %q: %v", kb.String(), err)
	}
	if ea[0].OurShortPub != eb[0].TheirShortPub || eb[0].OurShortPub != ea[0].TheirShortPub {
		t.Fatal("the two lines do not mirror each other")
	}
	if !strings.HasPrefix(ka.String(), "RAET_SESSION "+hex.EncodeToString(ea[0].OurShortPub[:])) {
		t.Fatalf("line %q", ka.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestKeyLogFileIs0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys.log")
	joined(t, road.Config{KeyLogFile: path}, road.Config{})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("keylog mode %v", fi.Mode())
	}
}

func TestSendErrors(t *testing.T) {
	m, o := joined(t, road.Config{}, road.Config{MessageTimeout: 500 * time.Millisecond})
	ctx := ctxT(t, 10*time.Second)
	if err := o.Send(ctx, "nobody", map[string]any{}); !errors.Is(err, road.ErrUnknownRemote) {
		t.Fatalf("unknown remote: %v", err)
	}
	if err := o.Send(ctx, "main", []int{1, 2}); !errors.Is(err, road.ErrNotMapping) {
		t.Fatalf("not a mapping: %v", err)
	}
	m.Close()
	if err := o.Send(ctx, "main", map[string]any{"x": 1}); !errors.Is(err, road.ErrTimeout) {
		t.Fatalf("to a closed remote: %v", err)
	}
	o.Close()
	if err := o.Send(ctx, "main", map[string]any{"x": 1}); !errors.Is(err, road.ErrClosed) {
		t.Fatalf("on a closed stack: %v", err)
	}
	if err := o.Start(); !errors.Is(err, road.ErrClosed) {
		t.Fatalf("restart: %v", err)
	}
}

func TestContextCancel(t *testing.T) {
	s := newStack(t, road.Config{Name: "lonely"})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// Nobody listens there: the join waits until ctx ends.
	_, err := s.Join(ctx, "127.0.0.1:9")
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, road.ErrTimeout) {
		t.Fatalf("join to nobody: %v", err)
	}
}

// A full send queue blocks Send until ctx ends, or fails at once with
// FailFast.
func TestSendQueueBackPressure(t *testing.T) {
	for _, failFast := range []bool{false, true} {
		m, o := joined(t, road.Config{}, road.Config{SendQueue: 1, FailFast: failFast, MessageTimeout: time.Second})
		m.Close() // nobody answers: the first message holds the only slot
		first := make(chan error, 1)
		go func() { first <- o.Send(context.Background(), "main", map[string]any{"n": 1}) }()
		time.Sleep(100 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := o.Send(ctx, "main", map[string]any{"n": 2})
		cancel()
		want := error(context.DeadlineExceeded)
		if failFast {
			want = road.ErrQueueFull
		}
		if !errors.Is(err, want) {
			t.Fatalf("failFast=%v: second send: %v, want %v", failFast, err, want)
		}
		if err := <-first; !errors.Is(err, road.ErrTimeout) {
			t.Fatalf("first send: %v", err)
		}
	}
}
