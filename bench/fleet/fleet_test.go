//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/road"
)

// TestMain makes the test binary a fleet worker when the coordinator under
// test starts it as one.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) != "" {
		os.Exit(serveWorker(os.Stdin, os.Stdout))
	}
	os.Exit(m.Run())
}

// TestFleetSmoke runs the whole benchmark with a handful of clients over two
// processes in both profiles, and checks that every phase did what it
// reports: all clients joined and were allowed, every message went both
// ways and was delivered, each in two segments with none dropped for want
// of reassembly room, the measures are of the right sign, and (in the fast
// profile, to keep the test short) after the clients left the main forgot
// them; in the reference profile a fleet of 3 clients runs beside, in
// turn with the row's rounds.
func TestFleetSmoke(t *testing.T) {
	o := options{procs: 2, perProc: 3, dir: t.TempDir(), msgs: 12, size: 1500, window: 4, joinWindow: 3,
		settle: 50 * time.Millisecond, phase: time.Minute,
		idle: 1200 * time.Millisecond, // longer than the 1 s presence period
		// A silent remote is found dead within 1.5 s (its 1 s period and
		// two AliveTimeouts), reaped 0.2 s later and forgotten 0.2 s after
		// that: the warm-up's and the leave's.
		main: mainConfig{AliveTimeout: 250 * time.Millisecond, Interim: 200 * time.Millisecond, ForgetAfter: 200 * time.Millisecond}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, p := range []string{"fast", "reference"} {
		const n = 5
		o.leave, o.pprof = 0, ""
		pairN := 3
		if p == "fast" {
			o.leave, o.pprof, pairN = 7*time.Second, t.TempDir(), 0
		}
		r, err := measure(ctx, o, p, n, pairN, t.Output())
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		t.Logf("%+v", r)
		// Five clients, three a process at most: two processes.
		if r.Joined != n || r.JoinFailed != 0 || r.Allowed != n || r.Procs != 2 {
			t.Errorf("%s: joined %d, failed %d, allowed %d of %d over %d processes", p, r.Joined, r.JoinFailed, r.Allowed, n, r.Procs)
		}
		// 12 messages over 5 remotes: 3 each, both ways.
		if r.FanoutMsgs != 15 || r.FanoutDelivered != 15 || r.FaninMsgs != 15 || r.FaninDelivered != 15 {
			t.Errorf("%s: fan-out %d done, %d delivered; fan-in %d done, %d delivered; want 15 each",
				p, r.FanoutMsgs, r.FanoutDelivered, r.FaninMsgs, r.FaninDelivered)
		}
		if r.FaninSegments < 2 || r.FaninReasmDrops != 0 {
			t.Errorf("%s: fan-in %.1f segments per message, %d dropped for want of reassembly room; want 2 or more, none",
				p, r.FaninSegments, r.FaninReasmDrops)
		}
		if r.Left != (o.leave > 0) {
			t.Errorf("%s: left %v, with a leave phase of %v", p, r.Left, o.leave)
		}
		if r.Left && (r.MainHeapLeft == 0 || r.LeftHeapRatio <= 0 || r.Remembered != 0) {
			t.Errorf("%s: %.1f s after the clients left: %d remembered, %d of them reaped, heap %d (%.2f × start)",
				p, r.LeaveSeconds, r.Remembered, r.RememberedRep, r.MainHeapLeft, r.LeftHeapRatio)
		}
		// The runtime's threads: GOMAXPROCS's at least.
		if r.MainThreadsStart < 2 || (r.Left && r.MainThreadsLeft < 2) {
			t.Errorf("%s: the main's threads at the start %d, once they left %d; want 2 or more", p, r.MainThreadsStart, r.MainThreadsLeft)
		}
		if o.pprof != "" {
			for _, phase := range []string{"join", "idle", "fanout", "fanin", "start.heap", "state.heap", "left.heap"} {
				path := filepath.Join(o.pprof, fmt.Sprintf("main-%s-%d-%s.pprof", p, n, phase))
				if st, err := os.Stat(path); err != nil || st.Size() == 0 {
					t.Errorf("%s: the main's CPU profile of %s: %v", p, phase, err)
				}
			}
		}
		// Paired: the fleet beside measured, and the ratios taken from it.
		if paired := r.FanoutPairCPU > 0 && r.FaninPairCPU > 0 && r.FloorPairCPU > 0 && r.FanoutCPURatio > 0 && r.FaninCPURatio > 0 && r.FloorRatio > 0; paired != (pairN > 0) {
			t.Errorf("%s: beside it %d clients: fan-out %.1f µs a message there (×%.2f), fan-in %.1f (×%.2f), UDP floor %.2f µs a datagram (×%.2f)",
				p, pairN, r.FanoutPairCPU, r.FanoutCPURatio, r.FaninPairCPU, r.FaninCPURatio, r.FloorPairCPU, r.FloorRatio)
		}
		if r.ClientFDsStack < 1 {
			t.Errorf("%s: %.1f open files per client stack, want its socket at least", p, r.ClientFDsStack)
		}
		if r.failures() != 0 {
			t.Errorf("%s: %d failures", p, r.failures())
		}
		if r.JoinSeconds <= 0 || r.MainCPUPerJoin <= 0 || r.FanoutRate <= 0 || r.FaninRate <= 0 ||
			r.FanoutCPUPerMsg <= 0 || r.FaninCPUPerMsg <= 0 || r.FloorCPUPerDgram <= 0 || r.ClientHeapStack <= 0 || r.IdlePackets <= 0 {
			t.Errorf("%s: a measure is not positive: %+v", p, r)
		}
		// Each stack runs its owner, writer, decoder and at least one reader.
		if r.ClientGorStack < 4 {
			t.Errorf("%s: %.1f goroutines per client stack, want at least 4", p, r.ClientGorStack)
		}
	}
}

// TestChecks checks that each of issue 14's targets applies where the
// issue puts it and is met on its side of the bound only.
func TestChecks(t *testing.T) {
	good := row{N: 10000, JoinSeconds: 19, Allowed: 10000, IdleCPUPerRemS: 4, IdleRatio: 1.1,
		MainHeapPerRem: 2000, MainHeapMarginal: 1900, Left: true, LeftHeapRatio: 1.05,
		FanoutPairCPU: 30, FanoutCPURatio: 1.15, FaninPairCPU: 20, FaninCPURatio: 1.19, ClientHeapStack: 200 << 10}
	cs := checks(good)
	if len(cs) != 10 {
		t.Fatalf("%d checks at N=10000, want 10: %+v", len(cs), cs)
	}
	for _, c := range cs {
		if !c.met {
			t.Errorf("%s: %s not met against %s", c.name, c.value, c.target)
		}
	}
	bad := good
	bad.JoinSeconds, bad.IdleCPUPerRemS, bad.IdleRatio, bad.MainHeapPerRem, bad.MainHeapMarginal = 21, 6, 1.3, 3000, 2100
	bad.LeftHeapRatio, bad.FanoutCPURatio, bad.FaninCPURatio, bad.FaninReasmDrops, bad.ClientHeapStack = 1.2, 1.3, 1.25, 1, 300<<10
	for _, c := range checks(bad) {
		if c.met {
			t.Errorf("%s: %s met against %s", c.name, c.value, c.target)
		}
	}
	// All joined in time, but one remote was not allowed; all left, but
	// one is still listed.
	short := good
	short.Allowed, short.Remembered = 9999, 1
	for _, c := range checks(short) {
		if want := !strings.HasPrefix(c.name, "joins") && !strings.HasPrefix(c.name, "main heap after"); c.met != want {
			t.Errorf("%s: met %v with one remote not allowed and one remembered", c.name, c.met)
		}
	}
	// At N=100, the first of its profile, with no leave phase: only the
	// reassembly and client targets apply; at a first N=1000, the heap per
	// remote too, and not yet the idle CPU (the is at N=10000).
	if cs := checks(row{N: 100, FanoutCPURatio: 1, FaninCPURatio: 1, MainHeapPerRem: 4500, IdleCPUPerRemS: 110}); len(cs) != 2 {
		t.Errorf("%d checks at the first N=100, want 2: %+v", len(cs), cs)
	}
	cs = checks(row{N: 1000, MainHeapPerRem: 2100, IdleCPUPerRemS: 23})
	if len(cs) != 3 || cs[0].name != "main heap per remote" || cs[0].met {
		t.Errorf("checks at the first N=1000: %+v, want the heap per remote (not met) and the reassembly and client targets", cs)
	}
}

func TestParseFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-n", "x"}, {"-profiles", "slow"}, {"-procs", "0"}, {"-stacks-per-proc", "0"}, {"-leave-timeout", "-1s"}, {"-alive-timeout", "-1s"}, {"-forget-after", "-1s"}, {"-stranger-joins", "-1"}, {"-stranger-join-rate", "-1"}, {"extra"}} {
		if code := run(args, os.Stdout, &discard{}); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }

// TestSpread checks the fan-out and fan-in schedule: every peer gets its
// count, never more than perPeer at a time however large the window, and
// a failed send or an ended context counts as failed.
func TestSpread(t *testing.T) {
	for _, c := range []struct{ n, count, perPeer, window int }{
		{n: 3, count: 7, perPeer: 1, window: 256},
		{n: 3, count: 7, perPeer: 0, window: 2},
		{n: 5, count: 4, perPeer: 2, window: 64},
		{n: 2, count: 3, perPeer: 10, window: 64},
	} {
		var mu sync.Mutex
		in, most, sent := make([]int, c.n), 0, make([]int, c.n)
		done, failed := spread(context.Background(), c.n, c.count, c.perPeer, c.window, func(p int) error {
			mu.Lock()
			in[p]++
			most = max(most, in[p])
			sent[p]++
			first := sent[p] == 1
			mu.Unlock()
			time.Sleep(time.Millisecond) // long enough for the window's others to start
			mu.Lock()
			in[p]--
			mu.Unlock()
			if first && p == 0 {
				return errors.New("lost")
			}
			return nil
		})
		want := max(1, min(c.perPeer, c.count))
		if most > want {
			t.Errorf("%+v: %d in flight to one peer at most, want %d", c, most, want)
		}
		for p, k := range sent {
			if k != c.count {
				t.Errorf("%+v: peer %d got %d, want %d", c, p, k, c.count)
			}
		}
		if done != c.n*c.count-1 || failed != 1 {
			t.Errorf("%+v: %d done, %d failed; want %d, 1", c, done, failed, c.n*c.count-1)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if done, failed := spread(ctx, 4, 5, 1, 8, func(int) error { return nil }); done != 0 || failed != 20 {
		t.Errorf("ended context: %d done, %d failed; want 0, 20", done, failed)
	}
}

// TestFoldRounds checks how the rounds of a phase make one row: medians of
// rates and CPU per message (one slow round does not move them), sums of
// counts, and per-message figures weighted by each round's messages.
func TestFoldRounds(t *testing.T) {
	rs := []row{
		{FanoutMsgs: 100, FanoutDelivered: 100, FanoutRate: 1000, FanoutCPUPerMsg: 10, FaninMsgs: 100, FaninSegments: 2, FaninDropsBy: map[string]uint64{"x": 1}, FaninDrops: 1},
		{FanoutMsgs: 100, FanoutFailed: 2, FanoutDelivered: 98, FanoutRate: 200, FanoutCPUPerMsg: 50, FaninMsgs: 300, FaninSegments: 3, FaninClientResends: 1},
		{FanoutMsgs: 100, FanoutDelivered: 100, FanoutRate: 900, FanoutCPUPerMsg: 20, FaninMsgs: 0, FaninDropsBy: map[string]uint64{"x": 2, "y": 1}, FaninDrops: 3},
	}
	var r row
	foldFanout(&r, rs)
	foldFanin(&r, rs)
	if r.FanoutMsgs != 300 || r.FanoutFailed != 2 || r.FanoutDelivered != 298 || r.FanoutRate != 900 || r.FanoutCPUPerMsg != 20 {
		t.Errorf("fan-out folded into %d msgs, %d failed, %d delivered, %.0f/s, %.0f µs; want 300, 2, 298, 900, 20",
			r.FanoutMsgs, r.FanoutFailed, r.FanoutDelivered, r.FanoutRate, r.FanoutCPUPerMsg)
	}
	if r.FaninMsgs != 400 || r.FaninSegments != 2.75 || r.FaninClientResends != 0.75 || r.FaninDrops != 4 ||
		r.FaninDropsBy["x"] != 3 || r.FaninDropsBy["y"] != 1 {
		t.Errorf("fan-in folded into %d msgs, %.2f segments/msg, %.2f resends/msg, %d drops %v; want 400, 2.75, 0.75, 4 map[x:3 y:1]",
			r.FaninMsgs, r.FaninSegments, r.FaninClientResends, r.FaninDrops, r.FaninDropsBy)
	}
	if m := median(rs[:2], func(x *row) float64 { return x.FanoutCPUPerMsg }); m != 30 {
		t.Errorf("median of 10 and 50: %v, want 30", m)
	}
}

// TestPairedRounds checks how a row's rounds are paired with those of a
// fleet beside it: each of the row's rounds follows one of the pair's, and
// the ratio is the median of the rounds' ratios: the machine's speed,
// which drifts for both fleets alike, cancels round by round, and one
// round of the row slowed alone does not move it (the ratio of the
// medians would be 30/20 here, not 1.2); an unpaired row is its own
// baseline.
func TestPairedRounds(t *testing.T) {
	row100, row1e4 := &fleet{n: 100}, &fleet{n: 10000}
	// The machine slows round by round; the big fleet costs 1.2× the small
	// one's in the same round but for its second round, slowed alone.
	cpu := map[*fleet][]float64{row100: {10, 20, 40}, row1e4: {12, 30, 48}}
	var order []int
	k := phaseRounds{
		phase: func(f *fleet, r *row) error {
			order = append(order, f.n)
			i := 0
			for _, n := range order[:len(order)-1] {
				i += b2i(n == f.n)
			}
			r.FanoutMsgs, r.FanoutDelivered, r.FanoutCPUPerMsg = 10, 10, cpu[f][i]
			return nil
		},
		fold: foldFanout,
		cpu:  func(r *row) float64 { return r.FanoutCPUPerMsg },
	}
	var r row
	pairCPU, ratio, err := k.run(options{rounds: 3}, &r, row1e4, row100)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{100, 10000, 100, 10000, 100, 10000}; !slices.Equal(order, want) {
		t.Errorf("rounds ran on N=%v, want %v", order, want)
	}
	if math.Abs(ratio-1.2) > 1e-9 || pairCPU != 20 || r.FanoutCPUPerMsg != 30 || r.FanoutMsgs != 30 {
		t.Errorf("paired ratio %.3f, beside %.1f µs, row %.1f µs over %d msgs; want 1.2, 20, 30, 30", ratio, pairCPU, r.FanoutCPUPerMsg, r.FanoutMsgs)
	}

	// A round beside that lost a message fails the row: what it is
	// compared with must be whole.
	k.phase = func(f *fleet, r *row) error {
		r.FanoutMsgs, r.FanoutDelivered, r.FanoutCPUPerMsg = 10, 10-b2i(f == row100), 1
		return nil
	}
	if _, _, err := k.run(options{rounds: 1}, &row{}, row1e4, row100); err == nil || !strings.Contains(err.Error(), "N=100 fleet beside") {
		t.Errorf("a round beside with a message lost: %v, want an error naming the fleet beside", err)
	}

	order = nil
	if _, ratio, err := k.run(options{rounds: 2}, &row{}, row1e4, nil); err != nil || ratio != 1 {
		t.Errorf("unpaired: ratio %v, %v; want 1", ratio, err)
	}
}

// TestMainKeepsAllowedRemotesForRounds checks the main worker's list of
// its allowed remotes: kept for the rounds while there are as many as the
// coordinator counted, listed anew when there are not, never kept for the
// warm-up, and let go at a stats that counts the remotes (the leave's),
// so that the heap weighed then does not hold it (at N = 10000 it is
// ~1 MiB, 3.7× the start's heap).
func TestMainKeepsAllowedRemotesForRounds(t *testing.T) {
	w := &worker{quit: make(chan struct{})}
	defer w.close()
	if _, err := w.start(request{Op: "start", Main: true, Profile: "fast", Dir: filepath.Join(t.TempDir(), "main")}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	kept := []road.Remote{{Name: "kept", Allowed: true}}
	w.allowed = kept
	if rs, err := w.allowedRemotes(ctx, 1); err != nil || len(rs) != 1 || rs[0].Name != "kept" {
		t.Errorf("with as many kept as counted: %v, %v; want the kept one", rs, err)
	}
	if rs, err := w.allowedRemotes(ctx, 2); err != nil || len(rs) != 0 || w.allowed != nil {
		t.Errorf("with another count: %v, %v (kept %v); want a new listing, none allowed, none kept", rs, err, w.allowed)
	}
	w.allowed = kept
	if _, err := w.allowedRemotes(ctx, 0); err != nil || w.allowed != nil {
		t.Errorf("for the warm-up: %v, kept %v; want none kept", err, w.allowed)
	}
	w.allowed = kept
	if _, err := w.stats(ctx, false, false, false, false); err != nil || len(w.allowed) != 1 {
		t.Errorf("a round's stats: %v, kept %v; want the kept one", err, w.allowed)
	}
	if _, err := w.stats(ctx, true, false, false, true); err != nil || w.allowed != nil {
		t.Errorf("a stats that counts the remotes: %v, kept %v; want none kept", err, w.allowed)
	}
}
