//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// roleEnv, set in a child's environment, makes the program (or the test
// binary) a worker that reads requests on stdin instead of a coordinator.
const roleEnv = "RAET_FLEET_WORKER"

// request is one line the coordinator writes to a worker's stdin.
type request struct {
	Op      string `json:"op"`                // start, join, stats, fanout, fanin, udpfloor, leave, profile, heapprofile, quit
	Main    bool   `json:"main,omitempty"`    // start: be the main estate
	Profile string `json:"profile,omitempty"` // start: fast or reference
	Dir     string `json:"dir,omitempty"`     // start (main): the keep directory
	Path    string `json:"path,omitempty"`    // profile: the CPU profile's file, empty stops it; heapprofile: the file
	N       int    `json:"n,omitempty"`       // start (client): how many stacks
	Prefix  string `json:"prefix,omitempty"`  // start (client): their names' prefix
	// Base is the fleet-wide index of this process's first client; with
	// Spread each client listens on its own loopback address (see
	// clientAddr), else all on 127.0.0.1.
	Base   int  `json:"base,omitempty"`
	Spread bool `json:"spread,omitempty"`
	// MainCfg is the main's own settings (start, main).
	MainCfg mainConfig `json:"main_cfg,omitzero"`
	To      string     `json:"to,omitempty"`    // join: the main's address
	Count   int        `json:"count,omitempty"` // fanout, fanin, udpfloor: messages (datagrams) per remote or stack
	Size    int        `json:"size,omitempty"`  // fanout, fanin: body bytes; udpfloor: datagram bytes
	Rate    int        `json:"rate,omitempty"`  // udpfloor: datagrams a second
	// Targets (fanout and udpfloor, main) is how many remotes the main
	// has allowed, as the coordinator last counted them: the main lists
	// them again only when it holds another count (allowedRemotes).
	Targets int `json:"targets,omitempty"`
	Window  int `json:"window,omitempty"` // join, fanout, fanin: calls in flight
	// PerRemote (fanout, fanin) is how many of the Window may be in flight
	// to one remote (fanout) or from one stack (fanin); 0 means 1.
	PerRemote int  `json:"per_remote,omitempty"`
	GC        bool `json:"gc,omitempty"` // stats: collect garbage before reading the heap
	// Quiet (stats, with GC, of the main) first has its readers last read
	// one datagram each (quiet).
	Quiet bool `json:"quiet,omitempty"`
	// Counters (stats, clients) sums the stacks' counters into the reply.
	Counters bool `json:"counters,omitempty"`
	// Remotes (stats, of the main) counts its remotes, allowed, alive and
	// reaped: a listing of them all (Stack.Remotes, ~1 MiB at N = 10000),
	// which the phases' own stats do not ask for, so that the garbage of
	// the benchmark's own questions is not collected in their rounds.
	Remotes bool `json:"remotes,omitempty"`
	// AlivePeriod is the clients' road.Config.AlivePeriod (start, client;
	// 0: road's default).
	AlivePeriod time.Duration `json:"alive_period,omitempty"`
	// TimeoutMS bounds the operation.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// HeapSample, when not 0, makes the main's heap profiles sample
	// every HeapSample bytes allocated from its start (start, main).
	HeapSample int `json:"heap_sample,omitempty"`
}

// reply is the line a worker writes to stdout for each request.
type reply struct {
	Err     string  `json:"err,omitempty"`
	Addr    string  `json:"addr,omitempty"` // start (main)
	Seconds float64 `json:"seconds,omitempty"`
	Done    int     `json:"done,omitempty"`   // calls that succeeded
	Failed  int     `json:"failed,omitempty"` // calls that failed (after retries, for joins)
	Retries int     `json:"retries,omitempty"`
	// Cut counts the joins the operation's bound cut short (among Failed).
	Cut int `json:"cut,omitempty"`
	// First is the first error of the calls that failed.
	First string    `json:"first,omitempty"`
	Stats procStats `json:"stats"`
}

// mainConfig is what the benchmark sets on the main estate (flags
// -alive-period, -alive-timeout, -alive-rate, -interim, -forget-after, -stranger-join-rate
// and -stranger-joins), each the road.Config field of its name; zero
// leaves road's default.
type mainConfig struct {
	AlivePeriod      time.Duration `json:"alive_period,omitempty"`
	AliveTimeout     time.Duration `json:"alive_timeout,omitempty"`
	AliveRate        int           `json:"alive_rate,omitempty"`
	Interim          time.Duration `json:"interim,omitempty"`
	ForgetAfter      time.Duration `json:"forget_after,omitempty"`
	StrangerJoinRate float64       `json:"stranger_join_rate,omitempty"`
	StrangerJoins    int           `json:"stranger_joins,omitempty"`
}

// procStats is what a worker measures of itself.
type procStats struct {
	CPUNs      int64  `json:"cpu_ns"` // user + system time of the process
	Heap       uint64 `json:"heap"`   // live heap bytes (after a GC when asked)
	RSS        uint64 `json:"rss"`
	Goroutines int    `json:"goroutines"`
	// Threads are the process's threads the Go runtime owns: it never
	// ends one, nor frees the heap a thread or a goroutine took (~5 KB
	// and ~0.5 KB), so that the most the process ran at once stays in its
	// heap.
	Threads int `json:"threads"`
	Stacks  int `json:"stacks"`
	FDs     int `json:"fds"` // open file descriptors
	// FDLimit is the soft limit on open files, after the worker raised it.
	FDLimit uint64 `json:"fd_limit"`
	// Received counts messages read from the stacks' Receive channels.
	Received uint64 `json:"received"`
	// The main's counters (summed over kinds), the message segments it
	// received, and its remotes: listed, alive, reaped and allowed.
	Remotes    int    `json:"remotes,omitempty"`
	Alive      int    `json:"alive,omitempty"`
	Reaped     int    `json:"reaped,omitempty"`
	Allowed    int    `json:"allowed,omitempty"`
	Segments   uint64 `json:"segments,omitempty"`
	PacketsIn  uint64 `json:"packets_in,omitempty"`
	PacketsOut uint64 `json:"packets_out,omitempty"`
	Drops      uint64 `json:"drops,omitempty"`
	// DropsBy is Drops by reason.
	DropsBy     map[string]uint64 `json:"drops_by,omitempty"`
	PacketsInBy map[string]uint64 `json:"packets_in_by,omitempty"` // PacketsIn by kind
	Retransmits uint64            `json:"retransmits,omitempty"`
}

// worker is one process of the fleet: the main estate, or a set of client
// stacks.
type worker struct {
	stacks   []*road.Stack
	main     bool
	to       string // the main's name, once the clients have joined it
	received atomic.Uint64
	quit     chan struct{} // ends the drain goroutines
	prof     *os.File      // the CPU profile being written
	drains   sync.WaitGroup
	// allowed is the main's allowed remotes as last listed (allowedRemotes).
	allowed []road.Remote
}

// allowedRemotes is the main's allowed remotes. With want > 0 (the
// fleet's count, which does not change between its rounds) it keeps them,
// until a stats that counts the remotes (stats), and answers with those it
// kept while it kept want of them; with 0 (the warm-up's) it lists them
// and keeps none. A listing at N = 10000 makes ~1 MiB of garbage, which
// the round after it would collect.
func (w *worker) allowedRemotes(ctx context.Context, want int) ([]road.Remote, error) {
	if want > 0 && len(w.allowed) == want {
		return w.allowed, nil
	}
	rs, err := w.stacks[0].Remotes(ctx)
	if err != nil {
		return nil, err
	}
	var allowed []road.Remote
	for _, r := range rs {
		if r.Allowed {
			allowed = append(allowed, r)
		}
	}
	w.allowed = nil
	if want > 0 {
		w.allowed = allowed
	}
	return allowed, nil
}

// serveWorker answers requests from in until quit or EOF.
func serveWorker(in io.Reader, out io.Writer) int {
	raiseFileLimit()
	w := &worker{quit: make(chan struct{})}
	defer w.close()
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, "fleet worker: bad request:", err)
			return 2
		}
		timeout := time.Duration(req.TimeoutMS) * time.Millisecond
		if timeout <= 0 {
			timeout = time.Minute
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		rep, err := w.handle(ctx, req)
		cancel()
		if err != nil {
			rep.Err = err.Error()
		}
		if err := enc.Encode(rep); err != nil {
			return 1
		}
		if req.Op == "quit" {
			return 0
		}
	}
	return 0
}

func (w *worker) handle(ctx context.Context, req request) (reply, error) {
	switch req.Op {
	case "start":
		return w.start(req)
	case "join":
		return w.join(ctx, req)
	case "stats":
		st, err := w.stats(ctx, req.GC, req.Quiet, req.Counters, req.Remotes)
		return reply{Stats: st}, err
	case "fanout", "fanin":
		return w.send(ctx, req)
	case "udpfloor":
		return w.udpFloor(ctx, req)
	case "leave":
		return w.leave()
	case "profile":
		return reply{}, w.profile(req.Path)
	case "heapprofile":
		return reply{}, writeHeapProfile(req.Path)
	case "quit":
		return reply{}, nil
	}
	return reply{}, fmt.Errorf("unknown op %q", req.Op)
}

func parseProfile(s string) (road.Profile, error) {
	switch s {
	case "fast":
		return road.ProfileAuto, nil
	case "reference":
		return road.ProfileReference, nil
	}
	return 0, fmt.Errorf("unknown profile %q (fast or reference)", s)
}

// start makes and starts the stacks: one main estate keeping its keep in
// req.Dir, or req.N clients keeping theirs in memory.
func (w *worker) start(req request) (reply, error) {
	if len(w.stacks) > 0 {
		return reply{}, errors.New("already started")
	}
	prof, err := parseProfile(req.Profile)
	if err != nil {
		return reply{}, err
	}
	cfg := road.Config{Listen: "127.0.0.1:0", Auto: keep.AutoAlways, Profile: prof}
	if req.Main {
		w.main = true
		if req.HeapSample > 0 {
			runtime.MemProfileRate = req.HeapSample
			// What the profile writer makes at its first use (the
			// checksum tables of its gzip stream, 8 KB) is made now, not
			// after the start is weighed, so that the heap the leave
			// phase compares with the start does not count it.
			if err := pprof.Lookup("heap").WriteTo(io.Discard, 0); err != nil {
				return reply{}, err
			}
		}
		cfg.Name, cfg.Main, cfg.KeepDir = "main", true, req.Dir
		mc := req.MainCfg
		cfg.AlivePeriod, cfg.AliveTimeout, cfg.AliveRate, cfg.Interim, cfg.ForgetAfter = mc.AlivePeriod, mc.AliveTimeout, mc.AliveRate, mc.Interim, mc.ForgetAfter
		cfg.StrangerJoinRate, cfg.StrangerJoins = mc.StrangerJoinRate, mc.StrangerJoins
		s, err := road.New(&cfg)
		if err != nil {
			return reply{}, err
		}
		if err := w.add(s); err != nil {
			return reply{}, err
		}
		return reply{Addr: s.Addr().String()}, nil
	}
	if err := fileRoom(req.N); err != nil {
		return reply{}, err
	}
	cfg.AlivePeriod = req.AlivePeriod
	for i := range req.N {
		c := cfg
		c.Name = fmt.Sprintf("%s_%d", req.Prefix, i)
		if req.Spread {
			c.Listen = clientAddr(req.Base + i)
		}
		s, err := road.New(&c)
		if err != nil {
			return reply{}, err
		}
		if err := w.add(s); err != nil {
			return reply{}, fmt.Errorf("stack %d: %w", i, err)
		}
	}
	return reply{}, nil
}

// clientAddr is the address of the fleet's client g: one of 127.1.0.1 to
// 127.250.249.250, all of them loopback on Linux (127.0.0.0/8 is local), so
// that the main sees each client from its own address as it would on a
// real network, where its budgets for strangers are kept per address.
func clientAddr(g int) string {
	return fmt.Sprintf("127.%d.%d.%d:0", 1+g/62500, g/250%250, 1+g%250)
}

// add starts s and a goroutine that counts what it receives until s or
// the worker closes.
func (w *worker) add(s *road.Stack) error {
	if err := s.Start(); err != nil {
		s.Close()
		return err
	}
	w.stacks = append(w.stacks, s)
	w.drains.Add(1)
	go func() {
		defer w.drains.Done()
		for {
			select {
			case <-s.Receive():
				w.received.Add(1)
			case <-s.Done(): // left (the warm-up's clients, see warmUp)
				return
			case <-w.quit:
				return
			}
		}
	}()
	return nil
}

// close closes every stack and stops the drain goroutines.
func (w *worker) close() {
	w.closeStacks()
	close(w.quit)
	w.drains.Wait()
}

// closeStacks closes the stacks, all at once.
func (w *worker) closeStacks() {
	var wg sync.WaitGroup
	for _, s := range w.stacks {
		wg.Go(func() { s.Close() })
	}
	wg.Wait()
	w.stacks = nil
}

// leave closes the client stacks: they leave the road as a minion that
// stops does, saying nothing (RAET has no leave packet), and the main
// finds them dead, reaps and forgets them.
func (w *worker) leave() (reply, error) {
	if w.main {
		return reply{}, errors.New("the main does not leave")
	}
	start := time.Now()
	n := len(w.stacks)
	w.closeStacks()
	return reply{Seconds: time.Since(start).Seconds(), Done: n}, nil
}

// parallel runs do(i) for i in [0, n) on window goroutines and counts the
// successes and failures; once ctx ends it starts no more, and those not
// started count as failed (and as skipped), so that a worker replies soon
// after its bound however much was left.
func parallel(ctx context.Context, n, window int, do func(i int) error) (done, failed, skipped int) {
	var next, ok, bad atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(window, n)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if do(i) == nil {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	done, failed = int(ok.Load()), int(bad.Load())
	return done, n - done, n - done - failed
}

// spread sends count messages to each of n peers with send(peer), window
// at a time in all and at most perPeer (0: 1) at a time to one peer, so
// that how many are in flight to a remote does not grow as n falls: each
// peer's messages go in order on perPeer lanes, one after the other on
// each. Those not sent when ctx ends count as failed.
func spread(ctx context.Context, n, count, perPeer, window int, send func(peer int) error) (done, failed int) {
	lanes := max(1, min(perPeer, count)) // of each peer
	var ok atomic.Int64
	parallel(ctx, n*lanes, window, func(l int) error {
		peer, lane := l%n, l/n
		for range count/lanes + b2i(lane < count%lanes) {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if send(peer) == nil {
				ok.Add(1)
			}
		}
		return nil
	})
	done = int(ok.Load())
	return done, n*count - done
}

// joinTries is how often a client tries to join before it counts as failed.
const joinTries = 3

// join joins every client stack to the main at req.To (join and allow).
func (w *worker) join(ctx context.Context, req request) (reply, error) {
	if w.main {
		return reply{}, errors.New("the main does not join")
	}
	var mu sync.Mutex
	var retries, cut atomic.Int64
	var firstErr error
	start := time.Now()
	done, failed, skipped := parallel(ctx, len(w.stacks), req.Window, func(i int) error {
		var err error
		for try := range joinTries {
			if try > 0 {
				retries.Add(1)
			}
			var rem road.Remote
			jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			rem, err = w.stacks[i].Join(jctx, req.To)
			cancel()
			if err == nil {
				mu.Lock()
				w.to = rem.Name
				mu.Unlock()
				return nil
			}
			if ctx.Err() != nil {
				cut.Add(1)
				break
			}
		}
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		return err
	})
	rep := reply{Seconds: time.Since(start).Seconds(), Done: done, Failed: failed, Retries: int(retries.Load()), Cut: skipped + int(cut.Load())}
	if firstErr != nil {
		rep.First = firstErr.Error()
	}
	return rep, nil
}

// send is fanout on the main (req.Count messages to each allowed remote)
// and fanin on a client (req.Count messages from each stack to the main).
// The reply's CPU is the process's for the whole operation.
func (w *worker) send(ctx context.Context, req request) (reply, error) {
	if len(w.stacks) == 0 {
		return reply{}, errors.New("not started")
	}
	body := map[string]any{"data": strings.Repeat("x", req.Size)}
	var targets []string
	if w.main != (req.Op == "fanout") {
		return reply{}, fmt.Errorf("%s is not this worker's op", req.Op)
	}
	if w.main {
		rs, err := w.allowedRemotes(ctx, req.Targets)
		if err != nil {
			return reply{}, err
		}
		for _, r := range rs {
			targets = append(targets, r.Name)
		}
	} else if w.to == "" {
		return reply{}, errors.New("not joined")
	}
	cpu0 := cpuNs()
	start := time.Now()
	var (
		mu       sync.Mutex
		firstErr error // of any type: not an atomic.Value
	)
	var done, failed int
	fail := func(err error) error {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
		return err
	}
	if w.main {
		done, failed = spread(ctx, len(targets), req.Count, req.PerRemote, req.Window, func(i int) error {
			return fail(w.stacks[0].Send(ctx, targets[i], body))
		})
	} else {
		done, failed = spread(ctx, len(w.stacks), req.Count, req.PerRemote, req.Window, func(i int) error {
			return fail(w.stacks[i].Send(ctx, w.to, body))
		})
	}
	rep := reply{Seconds: time.Since(start).Seconds(), Done: done, Failed: failed}
	rep.Stats.CPUNs = cpuNs() - cpu0
	if firstErr != nil {
		rep.First = firstErr.Error()
	}
	return rep, nil
}

// profile starts writing the process's CPU profile to path, or with an
// empty path stops it.
func (w *worker) profile(path string) error {
	if path == "" {
		if w.prof == nil {
			return errors.New("no CPU profile to stop")
		}
		pprof.StopCPUProfile()
		err := w.prof.Close()
		w.prof = nil
		return err
	}
	if w.prof != nil {
		return errors.New("already writing a CPU profile")
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	w.prof = f
	return nil
}

// writeHeapProfile writes the live heap's profile to path, after the
// collections that stats makes too (the second empties the sync.Pools).
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(f, 0)
	return errors.Join(err, f.Close())
}

// stats measures the process. The CPU time is read first, so that the
// collection asked for is not in it. The main's counters are always read,
// and with remotes the counts of its remotes; with counters a client
// process sums its stacks' (retransmits and packets).
func (w *worker) stats(ctx context.Context, gc, quieted, counters, remotes bool) (procStats, error) {
	st := procStats{CPUNs: cpuNs(), Stacks: len(w.stacks), Received: w.received.Load(), FDs: openFiles(), FDLimit: fileLimit()}
	if !w.main && counters {
		for _, s := range w.stacks {
			c, err := s.Counters(ctx)
			if err != nil {
				return st, err
			}
			st.PacketsIn += sum(c.PacketsIn)
			st.PacketsOut += sum(c.PacketsOut)
			st.Retransmits += c.Retransmits
		}
	}
	if w.main && len(w.stacks) == 1 {
		s := w.stacks[0]
		c, err := s.Counters(ctx)
		if err != nil {
			return st, err
		}
		st.PacketsIn, st.PacketsOut, st.Drops = sum(c.PacketsIn), sum(c.PacketsOut), sum(c.Drops)
		st.Retransmits, st.DropsBy, st.PacketsInBy, st.Segments = c.Retransmits, c.Drops, c.PacketsIn, c.PacketsIn["message/message"]
	}
	if w.main && len(w.stacks) == 1 && remotes {
		// A count is asked for where the fleet may change (the joins, the
		// leave): the remotes kept for the rounds go, and their memory
		// with them before the heap is weighed.
		w.allowed = nil
		rs, err := w.stacks[0].Remotes(ctx)
		if err != nil {
			return st, err
		}
		st.Remotes = len(rs)
		for _, r := range rs {
			st.Allowed += b2i(r.Allowed)
			st.Alive += b2i(r.Alive)
			st.Reaped += b2i(r.Reaped)
		}
	}
	if gc {
		if quieted && w.main && len(w.stacks) == 1 {
			if err := quiet(w.stacks[0]); err != nil {
				return st, err
			}
		}
		runtime.GC()
		runtime.GC()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	st.Heap, st.RSS, st.Goroutines, st.Threads = ms.HeapAlloc, rss(), runtime.NumGoroutine(), threads()
	return st, nil
}

// quiet has each reader of s last read a single datagram before the
// heap of an idle main is weighed (the leave phase's start and end), as
// road's TestForgottenHeap does: a reader waits
// holding the buffers of its next read, twice as many as its last read
// took (up to 32, 64 KiB), which tells how the last traffic came, not what
// the main keeps (50 KB of a reference main's 78 KB kept after 10000
// remotes left, in one run; 8 KB in a fast one). s is sent a few
// datagrams (garbage it drops) one by one.
func quiet(s *road.Stack) error {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		return err
	}
	defer c.Close()
	for range 16 {
		if _, err := c.Write([]byte{0}); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

// cpuNs is the process's user and system CPU time.
func cpuNs() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// threadCPUNs is the CPU time of the calling goroutine's thread (lock it
// to one first), to the nanosecond: getrusage's is counted in ticks.
func threadCPUNs() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// udpFloor (main) sends req.Count datagrams of req.Size bytes to each
// allowed remote's address, one to each in turn, req.Rate a second in all,
// from a plain UDP socket of its own on a thread of its own, and replies
// with that thread's CPU: what the kernel takes to send the fleet's
// datagrams on loopback with no protocol at all, where it also runs the
// receiving socket's side (its queue, and the wake-up of its reader) on
// the sender's CPU. The clients' stacks drop the datagrams (not_raet).
func (w *worker) udpFloor(ctx context.Context, req request) (reply, error) {
	if !w.main || len(w.stacks) == 0 {
		return reply{}, errors.New("udpfloor is the started main's")
	}
	if req.Count < 1 || req.Size < 1 || req.Rate < 1 {
		return reply{}, fmt.Errorf("udpfloor: count %d, size %d, rate %d: want all positive", req.Count, req.Size, req.Rate)
	}
	rs, err := w.allowedRemotes(ctx, req.Targets)
	if err != nil {
		return reply{}, err
	}
	to := make([]netip.AddrPort, len(rs))
	for i, r := range rs {
		to[i] = r.Addr
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return reply{}, err
	}
	defer conn.Close()
	var rep reply
	var first error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, req.Size)
		start, cpu0 := time.Now(), threadCPUNs()
		sent := 0
		for range req.Count {
			for _, a := range to {
				if ctx.Err() != nil {
					rep.Failed += len(to)*req.Count - sent
					first = ctx.Err()
					return
				}
				// Paced: sleeping, the thread takes no CPU.
				if ahead := time.Duration(sent)*time.Second/time.Duration(req.Rate) - time.Since(start); ahead > time.Millisecond {
					time.Sleep(ahead)
				}
				sent++
				if _, err := conn.WriteToUDPAddrPort(buf, a); err != nil {
					rep.Failed++
					if first == nil {
						first = err
					}
					continue
				}
				rep.Done++
			}
		}
		rep.Stats.CPUNs = threadCPUNs() - cpu0
		rep.Seconds = time.Since(start).Seconds()
	}()
	<-done
	if first != nil {
		rep.First = first.Error()
	}
	return rep, nil
}

// rss is the process's resident set in bytes (/proc/self/statm).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res uint64
	if _, err := fmt.Sscan(string(b), &size, &res); err != nil {
		return 0
	}
	return res * uint64(os.Getpagesize())
}

// raiseFileLimit lifts the soft limit on open files to the hard one: each
// stack holds a socket.
func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// filesPerStack is what a client stack holds open (its socket), and
// filesSpare what the process needs besides (runtime, pipes, files).
const filesPerStack, filesSpare = 1, 64

// fileRoom makes room for n more stacks under the limit on open files,
// raising the hard limit where the process may (root), or says how far
// it falls short.
func fileRoom(n int) error {
	need := uint64(openFiles() + n*filesPerStack + filesSpare)
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return fmt.Errorf("open-file limit: %w", err)
	}
	if l.Cur >= need {
		return nil
	}
	want := syscall.Rlimit{Cur: need, Max: max(l.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		return fmt.Errorf("%d stacks need %d open files, the limit is %d (hard %d) and raising it failed: %w; "+
			"raise ulimit -n or spread the stacks over more processes (-stacks-per-proc)", n, need, l.Cur, l.Max, err)
	}
	return nil
}

// fileLimit is the soft limit on open files.
func fileLimit() uint64 {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil {
		return 0
	}
	return l.Cur
}

// openFiles counts the process's open file descriptors.
func openFiles() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(es)
}

// threads is the live threads the Go runtime owns.
func threads() int {
	m := []metrics.Sample{{Name: "/sched/threads/total:threads"}}
	metrics.Read(m)
	if m[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int(m[0].Value.Uint64())
}
