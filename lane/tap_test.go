//go:build unix

package lane

import (
	"bytes"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/internal/testutil"
)

// tapLog records what a tap sees, copying the pages.
type tapLog struct {
	mu  sync.Mutex
	got []TapPacket
}

func (l *tapLog) tap(p TapPacket) {
	p.Data = bytes.Clone(p.Data)
	l.mu.Lock()
	l.got = append(l.got, p)
	l.mu.Unlock()
}

func (l *tapLog) packets() []TapPacket {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]TapPacket(nil), l.got...)
}

// The tap sees every page sent and received, in order, whole, with both
// ends' socket paths; a sender's pages are the receiver's, byte for byte;
// a page the receiver drops is tapped too.
func TestTap(t *testing.T) {
	testutil.CheckLeaks(t)
	var la, lb tapLog
	dir := testutil.ShortTempDir(t, "rl")
	before := time.Now()
	alpha := newStack(t, dir, "alpha", func(c *Config) { c.Tap = la.tap })
	beta := newStack(t, dir, "beta", func(c *Config) { c.Tap = lb.tap })
	ctx := ctxT(t)
	big := strings.Repeat("x", 150_000)
	for _, body := range []map[string]any{{"n": 1}, {"big": big}} {
		if err := alpha.Send(ctx, "beta", body); err != nil {
			t.Fatal(err)
		}
		m := receive(t, beta)
		if err := beta.Send(ctx, m.From, map[string]any{"re": len(m.Raw)}); err != nil {
			t.Fatal(err)
		}
		receive(t, alpha)
	}
	// A page beta drops (a bad head) from a hand-made yard.
	raw := rawYard(t, dir, "gamma")
	if _, err := raw.WriteToUnix([]byte("not a page"), &net.UnixAddr{Name: beta.Path(), Net: "unixgram"}); err != nil {
		t.Fatal(err)
	}
	waitCounters(t, beta, func(c Counters) bool { return c.Drops[DropBadHead] == 1 })

	ap, bp, gp := alpha.Path(), beta.Path(), SocketPath(dir, "lane", "gamma")
	ta, tb := la.packets(), lb.packets()
	// alpha: 1 page out, 1 in, 3 out, 1 in. beta: the mirror, then gamma's.
	wantDirs := []bool{true, false, true, true, true, false}
	if len(ta) != len(wantDirs) || len(tb) != len(wantDirs)+1 {
		t.Fatalf("alpha tapped %d pages, beta %d", len(ta), len(tb))
	}
	for i, out := range wantDirs {
		a, b := ta[i], tb[i]
		if a.Out != out || b.Out == out {
			t.Fatalf("page %d: alpha out %v, beta out %v", i, a.Out, b.Out)
		}
		if a.Local != ap || a.Remote != bp || b.Local != bp || b.Remote != ap {
			t.Fatalf("page %d: alpha %s/%s beta %s/%s", i, a.Local, a.Remote, b.Local, b.Remote)
		}
		if a.Source() != b.Source() || a.Destination() != b.Destination() || (a.Source() == ap) != out {
			t.Fatalf("page %d: source %s %s, destination %s %s", i, a.Source(), b.Source(), a.Destination(), b.Destination())
		}
		if !bytes.Equal(a.Data, b.Data) {
			t.Fatalf("page %d differs between the two taps", i)
		}
		if a.Time.Before(before) || b.Time.Before(before) {
			t.Fatalf("page %d: times %v %v", i, a.Time, b.Time)
		}
		var h codeclane.Head
		if _, err := codeclane.Decode(a.Data, &h); err != nil {
			t.Fatalf("page %d: %v", i, err)
		}
		if want := []uint16{1, 1, 3, 3, 3, 1}[i]; h.PageCount != want {
			t.Fatalf("page %d: %d pages in its book, want %d", i, h.PageCount, want)
		}
	}
	if g := tb[len(wantDirs)]; g.Out || g.Remote != gp || g.Source() != gp || string(g.Data) != "not a page" {
		t.Fatalf("dropped page tapped as %+v", g)
	}
}

// A tap adds no allocation to a send and a receive, and a nil one costs
// nothing either (the two runs allocate the same).
func TestTapAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	// The mean allocations of one send and its receive, as a fraction:
	// testing.AllocsPerRun truncates its mean, so a background allocation now
	// and then (the counts are process-wide) can move it by one. A tap that
	// allocated would add at least two, one for the page sent and one for
	// the page read.
	const runs = 400
	mean := func(tap func(TapPacket)) float64 {
		alpha, beta := pair(t, func(c *Config) { c.Tap = tap })
		ctx := ctxT(t)
		body := map[string]any{"n": 1}
		once := func() {
			if err := alpha.Send(ctx, "beta", body); err != nil {
				t.Fatal(err)
			}
			receive(t, beta)
		}
		once() // warm up
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			once()
		}
		runtime.ReadMemStats(&after)
		return float64(after.Mallocs-before.Mallocs) / runs
	}
	var seen atomic.Int64
	without := mean(nil)
	with := mean(func(p TapPacket) { seen.Add(int64(len(p.Data))) })
	if seen.Load() == 0 {
		t.Fatal("the tap saw nothing")
	}
	if with-without >= 1 {
		t.Fatalf("a send and a receive allocate %.2f times with a tap, %.2f without", with, without)
	}
	t.Logf("allocations per send and receive: %.2f without a tap, %.2f with", without, with)
}
