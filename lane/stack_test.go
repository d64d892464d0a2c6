//go:build unix

package lane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/internal/testutil"
	"github.com/raet-go/raet/packet"
)

func TestSendReceive(t *testing.T) {
	testutil.CheckLeaks(t)
	alpha, beta := pair(t, nil)
	ctx := ctxT(t)
	body := packet.OrderedMap{{Key: "subject", Value: "lane hello"}, {Key: "n", Value: 1}}
	if err := alpha.Send(ctx, "beta", body); err != nil {
		t.Fatal(err)
	}
	m := receive(t, beta)
	want := map[string]any{"subject": "lane hello", "n": int64(1)}
	if m.From != "alpha" || m.Kind != codec.PackKindJSON || !reflect.DeepEqual(m.Body, want) {
		t.Fatalf("got %+v", m)
	}
	if string(m.Raw) != `{"subject":"lane hello","n":1}` {
		t.Fatalf("raw %q", m.Raw)
	}
	// beta learned alpha from the page's source address and can answer.
	if got := beta.Yards(); !reflect.DeepEqual(got, []string{"alpha"}) {
		t.Fatalf("beta yards %v", got)
	}
	if err := beta.Send(ctx, m.From, map[string]any{"re": "ok"}); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, alpha); m.From != "beta" || m.Body["re"] != "ok" {
		t.Fatalf("got %+v", m)
	}
	ca, cb := alpha.Counters(), beta.Counters()
	if ca.PagesOut != 1 || ca.MessagesOut != 1 || ca.MessagesIn != 1 || cb.PagesIn != 1 || cb.MessagesIn != 1 || cb.Dropped() != 0 {
		t.Fatalf("counters alpha %+v beta %+v", ca, cb)
	}
}

func TestPackKinds(t *testing.T) {
	testutil.CheckLeaks(t)
	for _, pk := range []codec.PackKind{codec.PackKindJSON, codec.PackKindPack, codec.PackKindCBOR} {
		t.Run(pk.String(), func(t *testing.T) {
			alpha, beta := pair(t, func(c *Config) { c.PackKind = pk })
			body := map[string]any{"s": "é\x00", "i": int64(-5), "f": 1.5, "l": []any{true, nil, "x"}, "m": map[string]any{"k": "v"}}
			if err := alpha.Send(ctxT(t), "beta", body); err != nil {
				t.Fatal(err)
			}
			m := receive(t, beta)
			if m.Kind != pk || !reflect.DeepEqual(m.Body, body) {
				t.Fatalf("got %v %#v, want %#v", m.Kind, m.Body, body)
			}
		})
	}
}

func TestEmptyBody(t *testing.T) {
	testutil.CheckLeaks(t)
	alpha, beta := pair(t, nil)
	if err := alpha.Send(ctxT(t), "beta", nil); err != nil {
		t.Fatal(err)
	}
	m := receive(t, beta)
	if len(m.Raw) != 0 || m.Body == nil || len(m.Body) != 0 {
		t.Fatalf("got %+v", m)
	}
}

// A page we write is byte-identical to the reference's for the same
// fields: names, session id, book id and an ordered body.
func TestWireReferencePage(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	beta := rawYard(t, dir, "beta")
	alpha := newStack(t, dir, "alpha", nil)
	alpha.yards.newSID = func() string { return "661752e96abf6110ed" }
	body := packet.OrderedMap{{Key: "subject", Value: "lane hello"}, {Key: "n", Value: 1}}
	if err := alpha.Send(ctxT(t), "beta", body); err != nil {
		t.Fatal(err)
	}
	if got := readPage(t, beta); string(got) != referencePage {
		t.Fatalf("page\n%q\nwant\n%q", got, referencePage)
	}
	// The next book to beta has book id 2, same session.
	if err := alpha.Send(ctxT(t), "beta", body); err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(referencePage, "bi 1\n", "bi 2\n", 1)
	if got := readPage(t, beta); string(got) != want {
		t.Fatalf("page\n%q\nwant\n%q", got, want)
	}
}

// The reference's page, sent from a socket bound as yard alpha, is
// received as the reference's message.
func TestReceiveReferencePage(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	alpha := rawYard(t, dir, "alpha")
	beta := newStack(t, dir, "beta", nil)
	if _, err := alpha.WriteToUnix([]byte(referencePage), &net.UnixAddr{Name: beta.Path(), Net: "unixgram"}); err != nil {
		t.Fatal(err)
	}
	m := receive(t, beta)
	want := map[string]any{"subject": "lane hello", "n": int64(1)}
	if m.From != "alpha" || !reflect.DeepEqual(m.Body, want) || string(m.Raw) != `{"subject":"lane hello","n":1}` {
		t.Fatalf("got %+v", m)
	}
}

// bigBody returns a mapping whose JSON is exactly size bytes.
func bigBody(size int) packet.OrderedMap {
	return packet.OrderedMap{{Key: "d", Value: strings.Repeat("x", size-len(`{"d":""}`))}}
}

// A 150 kB body goes in exactly 3 pages cut as the reference cuts it:
// full pages of 65533 bytes (65535 - 2), sections of 65535 - (head + 2).
func TestPagination(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	beta := rawYard(t, dir, "beta")
	alpha := newStack(t, dir, "alpha", nil)
	const size = 150_000
	if err := alpha.Send(ctxT(t), "beta", bigBody(size)); err != nil {
		t.Fatal(err)
	}
	var pages [][]byte
	var joined []byte
	for i := range 3 {
		p := readPage(t, beta)
		var h codeclane.Head
		hl, err := codeclane.Decode(p, &h)
		if err != nil {
			t.Fatal(err)
		}
		if h.PageNumber != uint16(i) || h.PageCount != 3 || h.BookID != 1 || h.Source != "alpha" || h.Destination != "beta" {
			t.Fatalf("page %d head %+v", i, h)
		}
		if i < 2 && len(p) != MaxPageSize-pageSlack {
			t.Fatalf("page %d is %d bytes, want %d", i, len(p), MaxPageSize-pageSlack)
		}
		if want := size - 2*(MaxPageSize-pageSlack-hl) + hl; i == 2 && len(p) != want {
			t.Fatalf("last page is %d bytes, want %d", len(p), want)
		}
		pages = append(pages, p)
		joined = append(joined, p[hl:]...)
	}
	want, _ := packet.JSONBody{}.Marshal(nil, bigBody(size))
	if !bytes.Equal(joined, want) {
		t.Fatal("sections do not join to the body")
	}
	if c := alpha.Counters(); c.PagesOut != 3 || c.MessagesOut != 1 {
		t.Fatalf("counters %+v", c)
	}
	// The same pages, from a socket bound as alpha, make one message.
	alpha2 := rawYard(t, testutil.ShortTempDir(t, "rl"), "alpha")
	gamma := newStack(t, filepath.Dir(alpha2.LocalAddr().String()), "gamma", nil)
	for _, p := range pages {
		if _, err := alpha2.WriteToUnix(p, &net.UnixAddr{Name: gamma.Path(), Net: "unixgram"}); err != nil {
			t.Fatal(err)
		}
	}
	m := receive(t, gamma)
	if !bytes.Equal(m.Raw, want) || m.Body["d"] != bigBody(size)[0].Value {
		t.Fatal("reassembled body differs")
	}
	if c := gamma.Counters(); c.Misaddressed != 3 || c.PagesIn != 3 || c.MessagesIn != 1 {
		t.Fatalf("counters %+v", c) // the pages were addressed to beta
	}
}

func TestLargeMessages(t *testing.T) {
	testutil.CheckLeaks(t)
	alpha, beta := pair(t, nil)
	for _, size := range []int{MaxPageSize - 100, MaxPageSize, 150_000, 1 << 20} {
		body := bigBody(size)
		if err := alpha.Send(ctxT(t), "beta", body); err != nil {
			t.Fatal(err)
		}
		if m := receive(t, beta); len(m.Raw) != size || m.Body["d"] != body[0].Value {
			t.Fatalf("size %d: got %d bytes", size, len(m.Raw))
		}
	}
}

// 10 000 messages arrive in order, none lost, although the receiver's
// queue (net.unix.max_dgram_qlen, 10 by default) is far smaller.
func TestManyInOrder(t *testing.T) {
	testutil.CheckLeaks(t)
	alpha, beta := pair(t, nil)
	const n = 10_000
	errc := make(chan error, 1)
	go func() {
		for i := range n {
			if err := alpha.Send(ctxT(t), "beta", map[string]any{"n": i}); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i := range n {
		m := receive(t, beta)
		if got := m.Body["n"]; got != int64(i) {
			t.Fatalf("message %d has n=%v", i, got)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if c := beta.Counters(); c.MessagesIn != n || c.Dropped() != 0 {
		t.Fatalf("counters %+v", c)
	}
}

// Concurrent senders to one yard: every message arrives, each sender's in
// its order.
func TestConcurrentSenders(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	sink := newStack(t, dir, "sink", nil)
	const senders, each = 4, 500
	var wg sync.WaitGroup
	errs := make(chan error, senders*2)
	for s := range senders {
		st := newStack(t, dir, fmt.Sprintf("s%d", s), nil)
		for range 2 { // two goroutines per stack
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if err := st.Send(ctxT(t), "sink", map[string]any{"i": i}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	got := map[string]int{}
	for range senders * 2 * each {
		m := receive(t, sink)
		got[m.From]++
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for s := range senders {
		if n := got[fmt.Sprintf("s%d", s)]; n != 2*each {
			t.Fatalf("from s%d: %d messages", s, n)
		}
	}
}

func TestStaleSocketRemoved(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	path := SocketPath(dir, "lane", "beta")
	// A socket file nobody listens on, as a crashed process leaves it.
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("the stale file should exist: %v", err)
	}
	beta := newStack(t, dir, "beta", nil)
	if got := beta.Counters().StaleRemoved; got != 1 {
		t.Fatalf("StaleRemoved %d", got)
	}
	alpha := newStack(t, dir, "alpha", nil)
	if err := alpha.Send(ctxT(t), "beta", map[string]any{"a": 1}); err != nil {
		t.Fatal(err)
	}
	receive(t, beta)
}

func TestLiveSocketNotStolen(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	live := rawYard(t, dir, "beta")
	path := SocketPath(dir, "lane", "beta")
	before, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(&Config{Dir: dir, Name: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Start()
	var be *BindError
	if !errors.Is(err, ErrYardInUse) || !errors.As(err, &be) || be.Path != path {
		t.Fatalf("Start: %v, want ErrYardInUse", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	after, err := os.Lstat(path)
	if err != nil || !os.SameFile(before, after) {
		t.Fatalf("the live socket file was touched: %v", err)
	}
	// And it still works.
	alpha := newStack(t, dir, "alpha", nil)
	if err := alpha.Send(ctxT(t), "beta", map[string]any{"still": "here"}); err != nil {
		t.Fatal(err)
	}
	if p := readPage(t, live); !bytes.HasSuffix(p, []byte(`{"still":"here"}`)) {
		t.Fatalf("got %q", p)
	}
}

func TestNotSocketNotRemoved(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	path := SocketPath(dir, "lane", "beta")
	if err := os.WriteFile(path, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := New(&Config{Dir: dir, Name: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("Start: %v, want ErrNotSocket", err)
	}
	st.Close()
	if b, err := os.ReadFile(path); err != nil || string(b) != "data" {
		t.Fatalf("the file was touched: %q %v", b, err)
	}
}

// The directory is created 0700 and the socket is 0600 whatever the umask.
// Not parallel: the umask is process-wide.
func TestPermissions(t *testing.T) {
	testutil.CheckLeaks(t)
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(testutil.ShortTempDir(t, "rl"), "a", "b")
	st := newStack(t, dir, "beta", nil)
	for _, d := range []string{dir, filepath.Dir(dir)} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	fi, err := os.Lstat(st.Path())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket has mode %v, want 0600", fi.Mode())
	}
	// An existing directory is left as it is.
	existing := testutil.ShortTempDir(t, "rl")
	if err := os.Chmod(existing, 0o750); err != nil {
		t.Fatal(err)
	}
	st2 := newStack(t, existing, "gamma", nil)
	if fi, _ := os.Stat(existing); fi.Mode().Perm() != 0o750 {
		t.Errorf("existing dir mode changed to %v", fi.Mode().Perm())
	}
	if fi, _ := os.Lstat(st2.Path()); fi.Mode().Perm() != 0o600 {
		t.Errorf("socket has mode %v, want 0600", fi.Mode().Perm())
	}
}

func TestLifecycle(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	st, err := New(&Config{Dir: dir, Name: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(st.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("New must not bind")
	}
	if err := st.Send(context.Background(), "x", nil); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Send before Start: %v", err)
	}
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	if err := st.Start(); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(st.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Close must remove the socket: %v", err)
	}
	if _, ok := <-st.Receive(); ok {
		t.Fatal("Receive must be closed")
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := st.Start(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v", err)
	}
	if err := st.Send(context.Background(), "x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	// Close of a stack never started.
	st2, _ := New(&Config{Dir: dir, Name: "gamma"})
	if err := st2.Close(); err != nil {
		t.Fatal(err)
	}
}

// Close does not remove a socket file that is no longer ours.
func TestCloseKeepsForeignSocket(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	st, _ := New(&Config{Dir: dir, Name: "beta"})
	if err := st.Start(); err != nil {
		t.Fatal(err)
	}
	os.Remove(st.Path())
	other := rawYard(t, dir, "beta")
	_ = other
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(st.Path()); err != nil {
		t.Fatalf("the new owner's socket was removed: %v", err)
	}
}

func TestYardGone(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	alpha := newStack(t, dir, "alpha", nil)
	ctx := ctxT(t)
	// No socket file: ENOENT.
	err := alpha.Send(ctx, "nobody", map[string]any{"a": 1})
	var se *SendError
	if !errors.Is(err, ErrYardGone) || !errors.Is(err, syscall.ENOENT) || !errors.As(err, &se) || se.Yard != "nobody" {
		t.Fatalf("Send: %v", err)
	}
	// A socket file nobody listens on: ECONNREFUSED.
	c, _ := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: SocketPath(dir, "lane", "ghost"), Net: "unixgram"})
	c.Close()
	if err := alpha.Send(ctx, "ghost", map[string]any{"a": 1}); !errors.Is(err, ErrYardGone) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Send: %v", err)
	}
	if y := alpha.Yards(); len(y) != 0 {
		t.Fatalf("yards %v", y)
	}
	// A yard that goes away and comes back gets a new session.
	beta := newStack(t, dir, "beta", nil)
	if err := alpha.Send(ctx, "beta", nil); err != nil {
		t.Fatal(err)
	}
	receive(t, beta)
	sid1 := alpha.yards.m["beta"].sid
	beta.Close()
	if err := alpha.Send(ctx, "beta", nil); !errors.Is(err, ErrYardGone) {
		t.Fatalf("Send to closed beta: %v", err)
	}
	beta2 := newStack(t, dir, "beta", nil)
	if err := alpha.Send(ctx, "beta", nil); err != nil {
		t.Fatal(err)
	}
	receive(t, beta2)
	if sid2 := alpha.yards.m["beta"].sid; sid2 == sid1 {
		t.Fatal("same session id after the yard came back")
	}
	if c := alpha.Counters(); c.YardsRemoved != 3 || c.SendErrors != 3 {
		t.Fatalf("counters %+v", c)
	}
}

func TestSendErrors(t *testing.T) {
	testutil.CheckLeaks(t)
	alpha, _ := pair(t, func(c *Config) { c.MaxMessageSize = 1000 })
	ctx := ctxT(t)
	for _, tc := range []struct {
		to   string
		body any
		want error
	}{
		{"beta", []int{1}, packet.ErrNotMapping},
		{"beta", "text", packet.ErrNotMapping},
		{"beta", bigBody(1001), ErrTooLarge},
		{"a.b", nil, ErrBadName},
		{"a b", nil, ErrBadName},
		{"", nil, ErrBadName},
		{"../x", nil, ErrBadName},
		{"alpha", nil, ErrBadName}, // itself
	} {
		if err := alpha.Send(ctx, tc.to, tc.body); !errors.Is(err, tc.want) {
			t.Errorf("Send(%q, %T): %v, want %v", tc.to, tc.body, err, tc.want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := alpha.Send(cctx, "beta", nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Send with a cancelled context: %v", err)
	}
}

// A destination that does not read: Send waits in the retry queue and
// fails with ErrBusy when its context ends; nothing is lost silently. When
// the destination reads again, sends go through.
func TestBackpressure(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	sink := rawYard(t, dir, "sink")
	alpha := newStack(t, dir, "alpha", func(c *Config) { c.SendTimeout = 300 * time.Millisecond })
	sent := 0
	var err error
	for range 10_000 {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err = alpha.Send(ctx, "sink", map[string]any{"n": sent})
		cancel()
		if err != nil {
			break
		}
		sent++
	}
	if !errors.Is(err, ErrBusy) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Send to a full yard: %v", err)
	}
	if c := alpha.Counters(); c.Retries == 0 || c.SendErrors != 1 || c.MessagesOut != uint64(sent) {
		t.Fatalf("counters %+v", c)
	}
	// Without a context deadline, Config.SendTimeout bounds the wait.
	start := time.Now()
	if err := alpha.Send(context.Background(), "sink", map[string]any{"n": -1}); !errors.Is(err, ErrBusy) {
		t.Fatalf("Send: %v", err)
	}
	if el := time.Since(start); el < 250*time.Millisecond || el > 5*time.Second {
		t.Fatalf("waited %v, want about SendTimeout", el)
	}
	// The sink reads what was queued, in order; then sending works again.
	for i := range sent {
		p := readPage(t, sink)
		if want := fmt.Sprintf(`{"n":%d}`, i); !bytes.HasSuffix(p, []byte(want)) {
			t.Fatalf("page %d: %q", i, p)
		}
	}
	if err := alpha.Send(ctxT(t), "sink", map[string]any{"n": sent}); err != nil {
		t.Fatal(err)
	}
}

// The retry queue is bounded: with RetryQueue 1, a second Send that finds
// its destination busy while another waits fails at once.
func TestRetryQueueBound(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	rawYard(t, dir, "s1")
	rawYard(t, dir, "s2")
	alpha := newStack(t, dir, "alpha", func(c *Config) { c.RetryQueue = 1; c.SendTimeout = 5 * time.Second })
	fill := func(to string) {
		for range 1000 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			err := alpha.Send(ctx, to, nil)
			cancel()
			if errors.Is(err, ErrBusy) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		t.Fatalf("%s never got full", to)
	}
	fill("s1")
	fill("s2")
	ctx, cancel := context.WithCancel(context.Background())
	waiting := make(chan error)
	go func() { waiting <- alpha.Send(ctx, "s1", nil) }()
	waitCounters(t, alpha, func(c Counters) bool { return alpha.retrying.Load() == 1 })
	start := time.Now()
	err := alpha.Send(context.Background(), "s2", nil)
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "retry queue full") || time.Since(start) > time.Second {
		t.Fatalf("Send with a full retry queue: %v after %v", err, time.Since(start))
	}
	cancel()
	if err := <-waiting; !errors.Is(err, ErrBusy) || !errors.Is(err, context.Canceled) {
		t.Fatalf("waiting Send: %v", err)
	}
}

// Close ends a Send that waits for a busy destination.
func TestCloseWhileSending(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	rawYard(t, dir, "sink")
	alpha, err := New(&Config{Dir: dir, Name: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	if err := alpha.Start(); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		for range 1000 { // the sink is full after a few (it never reads)
			if err := alpha.Send(context.Background(), "sink", nil); err != nil {
				errc <- err
				return
			}
		}
		errc <- errors.New("the sink never got full")
	}()
	waitCounters(t, alpha, func(c Counters) bool { return c.Retries > 0 })
	if err := alpha.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Send: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Send did not end on Close")
	}
}

func TestConfig(t *testing.T) {
	st, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := st.Config()
	if !strings.HasPrefix(st.Name(), "lane_") || len(st.Name()) != 5+SessionIDLen || st.Lane() != "lane" {
		t.Errorf("name %q lane %q", st.Name(), st.Lane())
	}
	home, _ := os.UserHomeDir()
	if c.Dir != DefaultDir && c.Dir != filepath.Join(home, ".raet/uxd") {
		t.Errorf("dir %q", c.Dir)
	}
	if c.ReceiveQueue != DefaultReceiveQueue || c.MaxBooks != DefaultMaxBooks || c.BookTimeout != DefaultBookTimeout ||
		c.MaxMessageSize != DefaultMaxMessageSize || c.SendTimeout != DefaultSendTimeout || c.Logger == nil {
		t.Errorf("defaults %+v", c)
	}
	if st.Path() != filepath.Join(c.Dir, "lane."+st.Name()+".uxd") {
		t.Errorf("path %q", st.Path())
	}
	st.Close()
	for _, tc := range []struct {
		cfg  Config
		want error
	}{
		{Config{Name: "a.b"}, ErrBadName},
		{Config{Name: "a/b"}, ErrBadName},
		{Config{Lane: "a b"}, ErrBadName},
		{Config{MaxBooks: -1}, ErrInvalidConfig},
		{Config{BookTimeout: -1}, ErrInvalidConfig},
		{Config{PackKind: 9}, ErrInvalidConfig},
		{Config{Dir: "/tmp/" + strings.Repeat("d", 120)}, ErrPathTooLong},
	} {
		if _, err := New(&tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("New(%+v): %v, want %v", tc.cfg, err, tc.want)
		}
	}
}

func TestSessionID(t *testing.T) {
	before := fmt.Sprintf("%x", time.Now().UnixMicro())
	id := newSessionID()
	if len(id) != SessionIDLen || strings.Trim(id, "0123456789abcdef") != "" {
		t.Fatalf("session id %q", id)
	}
	if id[:8] != before[:8] {
		t.Fatalf("session id %q does not start with the time %q", id, before)
	}
	if newSessionID() == id {
		t.Fatal("two equal session ids")
	}
}

func TestBookIDWraps(t *testing.T) {
	y := &yard{bid: 0xfffffffe}
	if got := y.nextBid(); got != 0xffffffff {
		t.Fatalf("got %x", got)
	}
	y.bid = 0xffffffff
	if got := y.nextBid(); got != 1 {
		t.Fatalf("got %x", got)
	}
	y.bid = 0
	if got := y.nextBid(); got != 1 {
		t.Fatalf("got %x", got)
	}
}

func TestNamesFromPath(t *testing.T) {
	for _, tc := range []struct{ path, lane, yard string }{
		{"/d/lane.alpha.uxd", "lane", "alpha"},
		{"/d/my.lane.alpha.uxd", "my.lane", "alpha"},
		{"/d/alpha.uxd", "", ""},
		{"/d/lane.alpha.sock", "", ""},
		{"/d/lane..uxd", "", ""},
		{"@/d/lane.alpha.uxd", "", ""},
		{"", "", ""},
	} {
		l, y, ok := namesFromPath(tc.path)
		if l != tc.lane || y != tc.yard || ok != (tc.yard != "") {
			t.Errorf("namesFromPath(%q) = %q %q %v", tc.path, l, y, ok)
		}
	}
}
