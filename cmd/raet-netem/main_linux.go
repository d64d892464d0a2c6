package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raet-go/raet/netsim"
)

const usage = `raet-netem: run programs over an emulated network link.

It makes two network namespaces, a and b, each with a TUN device and one
address, and carries every IP packet between them (UDP, TCP, ICMP) through
a userspace bridge that impairs it as a netsim scenario file says: delay,
jitter, loss (random and in bursts), rate with a drop-tail queue,
duplication, reordering. The bridge's threads run with SCHED_FIFO; it checks
itself at start and refuses to report a run whose scheduling was too late
to trust. Needs root (namespaces, TUN, real-time priority).

Usage:
  raet-netem -scenario FILE [flags] -- COMMAND-A [ARGS] -- COMMAND-B [ARGS]
      Run COMMAND-B in namespace b, then COMMAND-A in namespace a; when A
      exits, stop B (SIGTERM), report, clean up, and exit with A's status.
      Both see RAET_NETEM_A and RAET_NETEM_B, the two addresses, and
      RAET_NETEM_NS_A and RAET_NETEM_NS_B, the two namespaces.
  raet-netem -scenario FILE -hold
      Set up, print a "ready" line, and carry traffic until SIGINT or
      SIGTERM; run programs meanwhile with: ip netns exec NAME COMMAND.
  raet-netem -scenario FILE -check [-packets N] [-cc cubic,bbr]
      Measure the emulator against the scenario: delay, jitter and loss with
      N UDP probes each way, rate with UDP and with TCP (each congestion
      control), TCP's round trip. Exit 0 when every figure is within 5%.
  raet-netem -cleanup
      Delete namespaces that killed raet-netem runs left behind.

Scenario file (YAML; "link" is both ways, a_to_b and b_to_a override it):
  seed: 1
  link: {delay: 25ms, jitter: 1ms, loss: 1%, rate: 10Mbit, queue: 100}

Examples:
  raet-netem -scenario wan.yaml -check
  raet-netem -scenario wan.yaml -- ping -c 20 10.233.0.2 -- sleep 60
  raet-netem -scenario wan.yaml -- iperf3 -c 10.233.0.2 -t 20 -- iperf3 -s -1

Output: JSON lines, one object per event ("setup", "check", "ready",
"report", "error"), on stdout, or on stderr in the run mode (where stdout
is the commands'), or to -report FILE.

Exit status: 0 success (run mode: COMMAND-A's status), 1 a -check figure
out of tolerance, 2 bad usage or scenario, 3 the emulator's own scheduling
too late to trust (nothing reported), 4 setup failed (not root, no TUN),
130 interrupted.

Flags:
`

const (
	exitOK        = 0
	exitMissed    = 1
	exitUsage     = 2
	exitUntrusted = 3
	exitSetup     = 4
	exitSignal    = 130
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// config is what the flags say.
type config struct {
	scenario   string
	addrA      netip.Addr
	addrB      netip.Addr
	mtu        int
	hold       bool
	check      bool
	cleanup    bool
	noCheck    bool
	packets    int
	ccs        []string
	tcpDur     time.Duration
	rateDur    time.Duration
	report     string
	startDelay time.Duration
	cmdA, cmdB []string
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("raet-netem", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	c := &config{}
	a := fs.String("a", "10.233.0.1", "address of side a")
	b := fs.String("b", "10.233.0.2", "address of side b")
	ccs := fs.String("cc", "cubic,bbr", "-check: TCP congestion controls to measure the rate with")
	fs.StringVar(&c.scenario, "scenario", "", "scenario file (YAML), required but for -cleanup")
	fs.IntVar(&c.mtu, "mtu", 1500, "MTU of the TUN devices")
	fs.BoolVar(&c.hold, "hold", false, "set up and carry traffic until a signal")
	fs.BoolVar(&c.check, "check", false, "measure the emulator against the scenario and exit")
	fs.BoolVar(&c.cleanup, "cleanup", false, "delete namespaces left by killed runs and exit")
	fs.BoolVar(&c.noCheck, "no-self-check", false, "skip the short self-check at start (then nothing vouches for the run)")
	fs.IntVar(&c.packets, "packets", 10000, "-check: UDP probes each way")
	fs.DurationVar(&c.tcpDur, "tcp-dur", 15*time.Second, "-check: duration of each TCP bulk transfer")
	fs.DurationVar(&c.rateDur, "rate-dur", 5*time.Second, "-check: duration of the UDP rate flood")
	fs.StringVar(&c.report, "report", "", "write the JSON lines to this file")
	fs.DurationVar(&c.startDelay, "start-delay", 300*time.Millisecond, "run mode: wait this long after starting COMMAND-B")
	// The commands follow "--": split them off before the flag package sees them.
	var rest []string
	for i, arg := range args {
		if arg == "--" {
			args, rest = args[:i], args[i:]
			break
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (commands go after --)", fs.Arg(0))
	}
	var err error
	if c.addrA, err = netip.ParseAddr(*a); err != nil || !c.addrA.Is4() {
		return nil, fmt.Errorf("-a %q: want an IPv4 address", *a)
	}
	if c.addrB, err = netip.ParseAddr(*b); err != nil || !c.addrB.Is4() || c.addrB == c.addrA {
		return nil, fmt.Errorf("-b %q: want an IPv4 address other than -a's", *b)
	}
	c.ccs = strings.Split(*ccs, ",")
	if len(rest) > 0 {
		parts := splitCommands(rest[1:])
		if len(parts) != 2 || len(parts[0]) == 0 || len(parts[1]) == 0 {
			return nil, errors.New("want -- COMMAND-A [ARGS] -- COMMAND-B [ARGS]")
		}
		c.cmdA, c.cmdB = parts[0], parts[1]
	}
	modes := 0
	for _, on := range []bool{c.hold, c.check, c.cleanup, c.cmdA != nil} {
		if on {
			modes++
		}
	}
	switch {
	case modes != 1:
		return nil, errors.New("choose one of: -- commands, -hold, -check, -cleanup")
	case c.scenario == "" && !c.cleanup:
		return nil, errors.New("-scenario FILE is required")
	case c.packets < 100:
		return nil, errors.New("-packets must be at least 100")
	}
	return c, nil
}

// splitCommands splits args at each "--".
func splitCommands(args []string) [][]string {
	parts := [][]string{nil}
	for _, a := range args {
		if a == "--" {
			parts = append(parts, nil)
			continue
		}
		parts[len(parts)-1] = append(parts[len(parts)-1], a)
	}
	return parts
}

// out writes JSON lines.
type out struct{ w io.Writer }

func (o out) emit(v any) {
	b, _ := json.Marshal(v)
	_, _ = o.w.Write(append(b, '\n'))
}

func (o out) fail(err error) {
	o.emit(map[string]string{"event": "error", "error": err.Error()})
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "raet-netem:", err)
		return exitUsage
	}
	o := out{stdout}
	if cfg.cmdA != nil {
		o = out{stderr}
	}
	if cfg.report != "" {
		f, err := os.Create(cfg.report)
		if err != nil {
			fmt.Fprintln(stderr, "raet-netem:", err)
			return exitUsage
		}
		defer f.Close()
		o = out{f}
	}
	if cfg.cleanup {
		return cleanup(o, stderr)
	}
	sc, err := netsim.LoadScenario(cfg.scenario)
	if err != nil {
		fmt.Fprintln(stderr, "raet-netem:", err)
		return exitUsage
	}
	return emulate(cfg, sc, o, stderr)
}

// cleanup deletes namespaces whose raet-netem process is gone.
func cleanup(o out, stderr io.Writer) int {
	names, err := leftovers()
	if err != nil {
		fmt.Fprintln(stderr, "raet-netem:", err)
		return exitSetup
	}
	for _, ns := range names {
		pid, _ := strconv.Atoi(strings.Split(strings.TrimPrefix(ns, namePrefix), "-")[0])
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			continue // its run is alive
		}
		if err := ipCmd("netns", "delete", ns); err != nil {
			fmt.Fprintln(stderr, "raet-netem:", err)
			return exitSetup
		}
		o.emit(map[string]string{"event": "deleted", "namespace": ns})
	}
	return exitOK
}

// emulate sets the link up, checks it, runs the mode and always tears the
// link down.
func emulate(cfg *config, sc *netsim.Scenario, o out, stderr io.Writer) (code int) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "raet-netem: needs root (network namespaces, TUN, SCHED_FIFO)")
		return exitSetup
	}
	// The bridge's three real-time threads wait in raw system calls and
	// keep their Ps: give them Ps of their own, so that the probes and the
	// runtime still have the usual number.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 3))
	// A collection stops the world, and on a busy machine that takes as
	// long as the slowest thread takes to be scheduled: collect only near
	// a memory bound instead of at every doubling of the heap.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(1 << 30))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	base := fmt.Sprintf("%s%d-", namePrefix, os.Getpid())
	var ends []*end
	defer func() {
		for _, e := range ends {
			if err := e.close(); err != nil {
				fmt.Fprintln(stderr, "raet-netem: cleanup:", err)
			}
		}
	}()
	for _, side := range []struct {
		name       string
		addr, peer netip.Addr
	}{{"a", cfg.addrA, cfg.addrB}, {"b", cfg.addrB, cfg.addrA}} {
		e, err := makeEnd(base+side.name, side.addr, side.peer, cfg.mtu)
		if e != nil {
			ends = append(ends, e)
		}
		if err != nil {
			o.fail(fmt.Errorf("setup: %w", err))
			return exitSetup
		}
	}
	br, err := newBridge(ends[0], ends[1], sc)
	if err != nil {
		o.fail(err)
		return exitUsage
	}
	br.start()
	defer br.close()
	if err := realtimeProcess(); err != nil {
		o.fail(fmt.Errorf("real-time priority: %w", err))
	}
	rt, rtErr := br.realtimeGranted()
	setup := map[string]any{
		"event": "setup", "scenario": sc.Name, "rtt_ms": ms(sc.RTT()),
		"a":        map[string]string{"namespace": ends[0].ns, "addr": cfg.addrA.String()},
		"b":        map[string]string{"namespace": ends[1].ns, "addr": cfg.addrB.String()},
		"realtime": rt, "tc_netem": false,
	}
	if rtErr != nil {
		setup["realtime_error"] = rtErr.Error()
	}
	o.emit(setup)

	if !cfg.noCheck {
		if code := selfCheck(br, sc, o); code != exitOK {
			return code
		}
	}
	br.reset()
	switch {
	case cfg.check:
		return fullCheck(br, sc, cfg, o, sigs)
	case cfg.hold:
		o.emit(map[string]any{"event": "ready", "a": ends[0].ns, "b": ends[1].ns})
		<-sigs
		return report(br, sc, o, exitOK)
	default:
		return runCommands(br, sc, cfg, ends, o, sigs)
	}
}

// lateBound is how late the bridge may write packets (p99) before its
// delays cannot be trusted: 5% of the smaller one-way delay, and never
// under 1 ms (the resolution a busy machine's timers keep).
func lateBound(sc *netsim.Scenario) time.Duration {
	return max(min(sc.AToB.Delay, sc.BToA.Delay)/20, time.Millisecond)
}

// selfCheck measures the delay each way with a short UDP probe and how
// late the bridge wrote its packets, and refuses to go on when either is
// off.
func selfCheck(br *bridge, sc *netsim.Scenario, o out) int {
	br.reset()
	ms, err := checkUDP(br, sc, 2000)
	if err != nil {
		o.fail(fmt.Errorf("self-check: %w", err))
		return exitSetup
	}
	ok := true
	for _, m := range ms {
		if m.What == "delay_ms" {
			m.Event = "self_check"
			o.emit(m)
			ok = ok && m.OK
		}
	}
	if code := trusted(br, sc, o, "self_check"); code != exitOK {
		return code
	}
	if !ok {
		o.fail(errors.New("self-check: the measured delay is off the configured by more than 5%; the machine is too busy to emulate this link"))
		return exitUntrusted
	}
	return exitOK
}

// trusted emits the bridge's lateness and says whether it is within
// lateBound.
func trusted(br *bridge, sc *netsim.Scenario, o out, event string) int {
	p50, p99, p999, n := br.lateness()
	bound := lateBound(sc)
	rt, _ := br.realtimeGranted()
	o.emit(map[string]any{"event": event + "_lateness", "packets": n, "p50_ms": ms(p50), "p99_ms": ms(p99),
		"p999_ms": ms(p999), "bound_ms": ms(bound), "realtime": rt, "ok": p99 <= bound})
	if p99 > bound {
		o.fail(fmt.Errorf("the bridge wrote packets %v late (p99), over the %v a run can be trusted with; nothing reported", p99, bound))
		return exitUntrusted
	}
	return exitOK
}

// report emits what each way carried, unless the bridge was too late.
func report(br *bridge, sc *netsim.Scenario, o out, code int) int {
	if c := trusted(br, sc, o, "run"); c != exitOK {
		return c
	}
	for i, w := range br.ways {
		o.emit(struct {
			Event string `json:"event"`
			wayCounts
		}{"report", w.counts().minus(br.base[i])})
	}
	return code
}

// fullCheck runs every measure and exits 1 when one is out of tolerance.
func fullCheck(br *bridge, sc *netsim.Scenario, cfg *config, o out, sigs chan os.Signal) int {
	missed := false
	emitAll := func(ms []measure) {
		for _, m := range ms {
			o.emit(m)
			missed = missed || !m.OK
		}
	}
	steps := []func() ([]measure, error){
		func() ([]measure, error) { return checkUDP(br, sc, cfg.packets) },
	}
	if sc.AToB.Rate > 0 {
		steps = append(steps, func() ([]measure, error) {
			m, err := checkRate(br, sc, cfg.rateDur)
			return []measure{m}, err
		})
	}
	steps = append(steps, func() ([]measure, error) {
		m, err := checkTCPRTT(br, sc, 16, max(1, int(5*time.Second/max(sc.RTT(), time.Millisecond))))
		return []measure{m}, err
	})
	if sc.AToB.Rate > 0 {
		for _, cc := range cfg.ccs {
			steps = append(steps, func() ([]measure, error) { return checkTCPRate(br, sc, cc, cfg.tcpDur) })
		}
	}
	for _, step := range steps {
		select {
		case <-sigs:
			return exitSignal
		default:
		}
		ms, err := step()
		if err != nil {
			o.fail(err)
			return exitSetup
		}
		emitAll(ms)
	}
	if c := trusted(br, sc, o, "check"); c != exitOK {
		return c
	}
	if missed {
		return exitMissed
	}
	return exitOK
}

// runCommands runs B, then A, over the link and reports.
func runCommands(br *bridge, sc *netsim.Scenario, cfg *config, ends []*end, o out, sigs chan os.Signal) int {
	env := append(os.Environ(), "RAET_NETEM_A="+cfg.addrA.String(), "RAET_NETEM_B="+cfg.addrB.String(),
		"RAET_NETEM_NS_A="+ends[0].ns, "RAET_NETEM_NS_B="+ends[1].ns)
	// The programs get normal priority: chrt sees to it before they run,
	// resetPriority (below) where chrt is missing.
	prefix := []string{}
	if _, err := exec.LookPath("chrt"); err == nil {
		prefix = []string{"chrt", "--other", "0"}
	}
	start := func(ns string, argv []string) (*exec.Cmd, error) {
		args := append(append([]string{"netns", "exec", ns}, prefix...), argv...)
		c := exec.Command("ip", args...)
		c.Env, c.Stdin, c.Stdout, c.Stderr = env, nil, os.Stdout, os.Stderr
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			return nil, err
		}
		if err := resetPriority(c.Process.Pid); err != nil {
			o.fail(fmt.Errorf("normal priority for %s: %w", argv[0], err))
		}
		return c, nil
	}
	stop := func(c *exec.Cmd, done <-chan error) {
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	b, err := start(ends[1].ns, cfg.cmdB)
	if err != nil {
		o.fail(fmt.Errorf("command b: %w", err))
		return exitSetup
	}
	bDone := make(chan error, 1)
	go func() { bDone <- b.Wait() }()
	defer stop(b, bDone)
	time.Sleep(cfg.startDelay)
	a, err := start(ends[0].ns, cfg.cmdA)
	if err != nil {
		o.fail(fmt.Errorf("command a: %w", err))
		return exitSetup
	}
	aDone := make(chan error, 1)
	go func() { aDone <- a.Wait() }()
	select {
	case err = <-aDone:
	case <-sigs:
		stop(a, aDone)
		return exitSignal
	}
	code := exitOK
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			o.fail(fmt.Errorf("command a: %w", err))
			return exitSetup
		}
		code = ee.ExitCode()
	}
	return report(br, sc, o, code)
}
