package road

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road/internal/core"
)

// An owner that wakes late (a loaded machine) finds a message's done in
// its inbound queue and the message's resend timer due at once: it takes
// the done first, and sends nothing again. Here the owner is held (a
// command that waits) while the done arrives and the timer passes, ten
// times; a select that took either would resend about five of the ten.
// In a synctest bubble on an in-memory network, where time moves only
// when every goroutine waits.
func TestOwnerTakesAnswersBeforeTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := netsim.NewNetwork(1)
		defer network.Close()
		mainAddr := netip.MustParseAddrPort("10.0.0.1:7530")
		m, o := joinedPair(t, network, mainAddr, ProfileReference, nil)
		defer m.Close()
		defer o.Close()
		ctx := t.Context()
		hold := func(s *Stack) chan struct{} {
			release := make(chan struct{})
			if err := s.do(ctx, func(*core.Core) { <-release }); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			return release
		}
		for i := range 10 {
			releaseMain := hold(m) // the main answers only once let go
			sent := make(chan error, 1)
			go func() { sent <- o.Send(ctx, "main", map[string]any{"i": i}) }()
			synctest.Wait() // the message is out, its resend timer set
			releaseOther := hold(o)
			close(releaseMain)
			synctest.Wait()         // the done waits in other's inbound queue
			time.Sleep(time.Second) // and the resend timer passes
			<-m.Receive()           // (the main delivered it)
			close(releaseOther)
			if err := <-sent; err != nil {
				t.Fatal(err)
			}
		}
		c, err := o.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Retransmits != 0 || c.MessagesOut != 10 {
			t.Fatalf("%d packets sent again for 10 messages answered before their timers ran (%d done)", c.Retransmits, c.MessagesOut)
		}
	})
}

// recordIO is a packetIO that records what it writes; a write whose first
// datagram is hold waits, once it is recorded, for a token in gate.
type recordIO struct {
	hold  string
	gate  chan struct{}
	mu    sync.Mutex
	wrote []string
}

func (r *recordIO) read([][]byte, []int, []netip.AddrPort) (int, error) {
	select {} // never called: the test runs no reader
}

func (r *recordIO) write(ds []datagram) (int, error) {
	r.mu.Lock()
	for _, d := range ds {
		r.wrote = append(r.wrote, string(d.B))
	}
	r.mu.Unlock()
	if len(ds) > 0 && string(ds[0].B) == r.hold {
		<-r.gate
	}
	return 0, nil
}

func (r *recordIO) written() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.wrote)
}

// The owner writes a small flush itself, and one run to one address (a
// segmented message), but only once the writer has written everything
// handed to it, so that the datagrams leave in the order the core made
// them; a longer flush goes to the writer. (A flush with an Ed25519 foot
// to sign goes to the writer too: the reference profile's tests would fail
// were one written unsigned.)
func TestOwnerWritesSmallFlushesInOrder(t *testing.T) {
	to := netip.MustParseAddrPort("127.0.0.1:7530")
	batch := func(names ...string) []core.Datagram {
		ds := make([]core.Datagram, len(names))
		for i, n := range names {
			ds[i] = core.Datagram{B: []byte(n), To: to}
		}
		return ds
	}
	run := make([]string, maxDirect+1) // to one address, within maxDirectRun
	for i := range run {
		run[i] = fmt.Sprintf("run%d", i)
	}
	rec := &recordIO{hold: "w1", gate: make(chan struct{})}
	s := &Stack{cfg: &Config{}, io: rec, outbound: make(chan *[]core.Datagram, 1), abort: make(chan struct{}),
		writerDone: make(chan struct{})}
	s.wg.Add(1)
	go s.writeLoop()
	defer func() {
		close(rec.gate) // a writer still held goes on
		close(s.outbound)
		s.wg.Wait()
	}()

	spread := batch(run...)
	for i := range spread {
		spread[i].To = netip.AddrPortFrom(to.Addr(), uint16(7531+i))
	}
	if s.direct(spread) {
		t.Fatalf("the owner wrote %d datagrams to %d addresses itself (most %d)", len(spread), len(spread), maxDirect)
	}
	big := batch(run...)
	for i := range big {
		big[i].B = make([]byte, maxDirectRun/maxDirect)
	}
	if s.direct(big) {
		t.Fatalf("the owner wrote a run of %d bytes itself (most %d)", len(big)*len(big[0].B), maxDirectRun)
	}
	first := batch("w1", "w2")
	s.handed.Add(1)
	s.outbound <- &first // the writer takes it, and waits at the gate
	for i := 0; len(rec.written()) == 0; i++ {
		if i > 10_000 {
			t.Fatal("the writer never took its batch")
		}
		time.Sleep(time.Millisecond)
	}
	if s.direct(batch("o1")) {
		t.Fatal("the owner wrote while a batch handed to the writer was not written")
	}
	rec.gate <- struct{}{}
	for i := 0; s.handed.Load() != 0; i++ {
		if i > 10_000 {
			t.Fatal("the writer never wrote its batch")
		}
		time.Sleep(time.Millisecond)
	}
	if !s.direct(batch("o2", "o3")) {
		t.Fatal("the owner handed a small flush to an idle writer")
	}
	if !s.direct(batch(run...)) {
		t.Fatalf("the owner handed a run of %d datagrams to one address to an idle writer", len(run))
	}
	if got, want := rec.written(), append([]string{"w1", "w2", "o2", "o3"}, run...); !slices.Equal(got, want) {
		t.Fatalf("written %q, want %q", got, want)
	}
}

// feedConn is a PacketConn whose reads take their datagrams from feed and
// record which goroutine read; writes go nowhere.
type feedConn struct {
	feed    chan []byte
	closed  chan struct{}
	once    sync.Once
	mu      sync.Mutex
	readers []string // the goroutine of each ReadFrom, in order
}

func (f *feedConn) ReadFrom(b []byte) (int, net.Addr, error) {
	var st [64]byte
	id, _, _ := strings.Cut(strings.TrimPrefix(string(st[:runtime.Stack(st[:], false)]), "goroutine "), " ")
	f.mu.Lock()
	f.readers = append(f.readers, id)
	f.mu.Unlock()
	select {
	case d := <-f.feed:
		return copy(b, d), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 7530}, nil
	case <-f.closed:
		return 0, nil, net.ErrClosed
	}
}

func (f *feedConn) reads() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.readers)
}

func (f *feedConn) WriteTo(b []byte, _ net.Addr) (int, error) { return len(b), nil }
func (f *feedConn) Close() error                              { f.once.Do(func() { close(f.closed) }); return nil }
func (f *feedConn) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7530}
}
func (f *feedConn) SetDeadline(time.Time) error      { return nil }
func (f *feedConn) SetReadDeadline(time.Time) error  { return nil }
func (f *feedConn) SetWriteDeadline(time.Time) error { return nil }

// Datagrams that come one at a time, with no signature to check, are read
// by one reader, which keeps its turns: passing them on would wake the
// next reader for each datagram only to find the socket empty. (Two
// readers here; the datagrams are junk, dropped by the owner.)
func TestReaderReadsAloneWhileLight(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	f := &feedConn{feed: make(chan []byte), closed: make(chan struct{})}
	s, err := New(&Config{Name: "alone", PacketConn: f, AlivePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 20
	for range n {
		f.feed <- []byte("junk, not a RAET packet")
	}
	for i := 0; len(f.reads()) <= n; i++ { // the read after the last datagram
		if i > 10_000 {
			t.Fatal("no reader read again")
		}
		time.Sleep(time.Millisecond)
	}
	got := f.reads()[:n+1]
	for _, id := range got {
		if id != got[0] {
			t.Fatalf("light datagrams one at a time read by goroutines %v, want one", got)
		}
	}
}

// countHandler is a slog.Handler that counts the records of each message.
type countHandler struct {
	mu sync.Mutex
	n  map[string]int
}

func (h *countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n[r.Message]++
	return nil
}
func (h *countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countHandler) WithGroup(string) slog.Handler      { return h }

// The owner, the writer and the readers may each meet a socket that failed
// for good: the first failure stops the stack, with its error, and is
// logged once.
func TestSocketFailureCountsOnce(t *testing.T) {
	logs := &countHandler{n: map[string]int{}}
	f := &feedConn{feed: make(chan []byte), closed: make(chan struct{})}
	s, err := New(&Config{Name: "failing", PacketConn: f, AlivePeriod: -1, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	first, second := errors.New("first failure"), errors.New("second failure")
	s.fail(first)
	s.fail(second)
	<-s.Done()
	s.Close()
	if err := s.Err(); !errors.Is(err, ErrSocket) || !errors.Is(err, first) {
		t.Fatalf("Err() = %v, want the first failure", err)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if n := logs.n["raet: the socket failed; the stack stops"]; n != 1 {
		t.Fatalf("the failure logged %d times", n)
	}
}

// writeWatch is a PacketConn whose writes call watch with the datagram
// first.
// joinedPair starts a main at mainAddr and an estate "other" at
// 10.0.0.2:7530 on network, in profile prof, accepting every key, with no
// presence, each on its socket wrapped by wrap when it is not nil, and
// joins other to the main. The caller closes both.
func joinedPair(t *testing.T, network *netsim.Network, mainAddr netip.AddrPort, prof Profile, wrap func(net.PacketConn) net.PacketConn) (m, o *Stack) {
	t.Helper()
	stack := func(cfg Config, at netip.AddrPort) *Stack {
		conn, err := network.Listen(at, netsim.Impairment{})
		if err != nil {
			t.Fatal(err)
		}
		cfg.PacketConn = conn
		if wrap != nil {
			cfg.PacketConn = wrap(conn)
		}
		cfg.Auto, cfg.AlivePeriod, cfg.Profile = keep.AutoAlways, -1, prof
		s, err := New(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	m = stack(Config{Name: "main", Main: true}, mainAddr)
	o = stack(Config{Name: "other"}, netip.MustParseAddrPort("10.0.0.2:7530"))
	if _, err := o.Join(t.Context(), mainAddr.String()); err != nil {
		o.Close()
		m.Close()
		t.Fatal(err)
	}
	return m, o
}

type writeWatch struct {
	net.PacketConn
	watch func(b []byte)
}

func (w writeWatch) WriteTo(b []byte, to net.Addr) (int, error) {
	w.watch(b)
	return w.PacketConn.WriteTo(b, to)
}

// A turn of the owner that starts several segmented messages sends each
// as soon as it is sealed, before it starts the next, rather than all of
// them at the turn's end (the convoy handEarly explains). Four Sends wait
// for the owner, which is held: two segmented ones to the main, each
// followed by one to a remote nobody knows, whose outcome the owner hands
// over at once as it comes to it. A segment written before the first
// unknown's outcome was handed over was sent before the owner went on.
func TestOwnerSendsEachSegmentedMessageAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		network := netsim.NewNetwork(1)
		defer network.Close()
		mainAddr := netip.MustParseAddrPort("10.0.0.1:7530")
		unknown := make(chan *Call, 2)
		var mu sync.Mutex
		var seen []int // for each segment the other wrote: the unknowns' outcomes handed over by then
		watching := false
		m, o := joinedPair(t, network, mainAddr, ProfileAuto, func(conn net.PacketConn) net.PacketConn {
			return writeWatch{conn, func(b []byte) {
				mu.Lock()
				defer mu.Unlock()
				if watching && len(b) > 1000 { // a segment: nothing else this long goes now
					seen = append(seen, len(unknown))
				}
			}}
		})
		defer m.Close()
		defer o.Close()
		ctx := t.Context()
		synctest.Wait()
		release := make(chan struct{})
		if err := o.do(ctx, func(*core.Core) { <-release }); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		watching = true
		mu.Unlock()
		big := strings.Repeat("x", 16<<10)
		sent := make(chan *Call, 2)
		for _, to := range []string{"main", "nobody", "main", "nobody"} {
			done := sent
			if to == "nobody" {
				done = unknown
			}
			if _, err := o.Go(ctx, to, big, done); err != nil {
				t.Fatal(err)
			}
		}
		close(release) // the owner takes the four in one turn
		for range 2 {
			if c := <-sent; c.Err != nil {
				t.Fatal(c.Err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) < 2 || seen[0] != 0 || seen[len(seen)-1] != 1 {
			t.Fatalf("the segments were written after %v outcomes of the unknowns each: want the first message's before either (0), the second's after the first (1)", seen)
		}
	})
}
