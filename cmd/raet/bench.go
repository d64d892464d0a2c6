package main

// raet bench: iperf-like throughput and latency of the road stack, over
// loopback in one process (the default: two stacks) or across two
// processes (raet bench --serve --listen ADDR on one side, raet bench --to
// ADDR on the other). One JSON line per message size on stdout.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

var benchHelp = help{
	usage: `raet bench [--sizes 64,1024,16384,262144] [--count N | --duration DUR] [--window N]
           [--profile fast|reference] [--aead prefer|refuse] [--fast-mps BYTES] [--body json|msgpack|cbor]
           [--pcap FILE] [--keylog FILE]
raet bench --serve --listen HOST:PORT [--profile fast|reference] [--aead prefer|refuse] [--fast-mps BYTES] [--for DUR]
raet bench --to HOST:PORT [--listen HOST:PORT] [--sizes ...] [--count N | --duration DUR] [--window N] ...`,
	about: `Without --serve or --to, two stacks run in this process over loopback.
Each message is {"data": "x"*SIZE}; Send returns when the receiver says
done, and its duration is the round trip. For each size one line:
{"size":..,"profile":..,"head":..,"foot":..,"coat":..,"max_packet_size":..,"count":..,
"seconds":..,"msgs_per_s":..,"mb_per_s":..,"rtt_p50_us":..,"rtt_p99_us":..,"errors":..}
(MB/s counts SIZE bytes per message, 10^6 bytes per MB).
--serve drains what it receives until SIGINT/SIGTERM or --for.`,
	example: `raet bench --sizes 1024 --count 2000 --profile reference`,
}

// benchResult is one JSON line of raet bench.
type benchResult struct {
	Size          int     `json:"size"`
	Profile       string  `json:"profile"`
	Head          string  `json:"head"`
	Foot          string  `json:"foot"`
	Coat          string  `json:"coat"`
	MaxPacketSize int     `json:"max_packet_size"`
	Window        int     `json:"window"`
	Count         int     `json:"count"`
	Seconds       float64 `json:"seconds"`
	MsgsPerSec    float64 `json:"msgs_per_s"`
	MBPerSec      float64 `json:"mb_per_s"`
	RTTP50us      float64 `json:"rtt_p50_us"`
	RTTP99us      float64 `json:"rtt_p99_us"`
	Errors        int     `json:"errors"`
}

type benchOpts struct {
	sizes    []int
	count    int
	duration time.Duration
	window   int
	profile  road.Profile
	profName string
	run      *runFlags // --pcap, --keylog, --aead
	fastMPS  int
	body     codec.BodyKind
	timeout  time.Duration
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad size %q", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no sizes")
	}
	return out, nil
}

func runBench(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("raet bench", stderr)
	sizes := fs.String("sizes", "64,1024,16384,262144", "message sizes in bytes, comma-separated")
	count := fs.Int("count", 2000, "messages per size (ignored when --duration is set)")
	duration := fs.Duration("duration", 0, "send for this long per size instead of --count messages")
	window := fs.Int("window", 16, "messages in flight")
	profile := fs.String("profile", "fast", "fast (negotiated between raet-go estates) or reference")
	fastMPS := fs.Int("fast-mps", 0, "largest packet of the fast profile (0: the stack's default, 1400)")
	body := fs.String("body", "json", "body serialization: json, msgpack or cbor")
	serve := fs.Bool("serve", false, "be the receiving side for a raet bench --to elsewhere")
	listen := fs.String("listen", "", "UDP address (default 127.0.0.1:0; with --serve required)")
	to := fs.String("to", "", "benchmark against a raet bench --serve at this address")
	forDur := fs.Duration("for", 0, "with --serve: stop after this long (0: until SIGINT or SIGTERM)")
	timeout := fs.Duration("timeout", time.Minute, "per-message timeout (and join timeout)")
	var run runFlags
	run.register(fs, scopeRoad)
	if code, ok := parseFlags(fs, benchHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	o := benchOpts{count: *count, duration: *duration, window: *window, fastMPS: *fastMPS, timeout: *timeout, run: &run}
	var err error
	if o.sizes, err = parseSizes(*sizes); err != nil {
		fmt.Fprintln(stderr, "raet bench:", err)
		return exitUsage
	}
	if o.profile, err = parseProfile(*profile); err != nil {
		return usageError(stderr, "raet bench", "%v", err)
	}
	o.profName = map[road.Profile]string{road.ProfileAuto: "fast", road.ProfileReference: "reference"}[o.profile]
	if err = run.check(); err != nil {
		return usageError(stderr, "raet bench", "%v", err)
	}
	if err = run.open(); err != nil {
		fmt.Fprintln(stderr, "raet bench:", err)
		return exitSetup
	}
	defer func() { // after the stacks are closed
		if err := run.close(); err != nil {
			fmt.Fprintln(stderr, "raet bench:", err)
		}
	}()
	switch *body {
	case "json":
		o.body = codec.BodyKindJSON
	case "msgpack":
		o.body = codec.BodyKindMsgpack
	case "cbor":
		o.body = codec.BodyKindCBOR
	default:
		fmt.Fprintf(stderr, "raet bench: unknown body %q\n", *body)
		return exitUsage
	}
	if o.window < 1 || (o.count < 1 && o.duration <= 0) || o.fastMPS < 0 {
		fmt.Fprintln(stderr, "raet bench: --window and --count must be positive")
		return exitUsage
	}
	if *serve && *to != "" {
		fmt.Fprintln(stderr, "raet bench: --serve and --to exclude each other")
		return exitUsage
	}
	if *serve {
		if *listen == "" {
			fmt.Fprintln(stderr, "raet bench: --serve needs --listen")
			return exitUsage
		}
		return benchServe(o, *listen, *forDur, stderr)
	}
	if *listen == "" {
		*listen = "127.0.0.1:0"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A fresh name each run: a serving side is not Mutable towards a name it
	// knows with other keys.
	client, err := benchStack(o, fmt.Sprintf("bench_client_%08x", rand.Uint32()), false, *listen, true)
	if err != nil {
		fmt.Fprintln(stderr, "raet bench:", err)
		return exitSetup
	}
	defer client.Close()
	addr := *to
	if addr == "" {
		srv, err := benchStack(o, "bench_serve", true, "127.0.0.1:0", false)
		if err != nil {
			fmt.Fprintln(stderr, "raet bench:", err)
			return exitSetup
		}
		defer srv.Close()
		dctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go benchDrain(dctx, srv)
		addr = srv.Addr().String()
	}
	jctx, cancel := context.WithTimeout(ctx, o.timeout)
	rem, err := client.Join(jctx, addr)
	cancel()
	if err != nil {
		fmt.Fprintln(stderr, "raet bench: join:", err)
		return exitFailure
	}
	enc := json.NewEncoder(stdout)
	code := exitOK
	for _, size := range o.sizes {
		r := benchSize(ctx, client, rem, o, size)
		if err := enc.Encode(r); err != nil {
			return exitFailure
		}
		if r.Errors > 0 {
			code = exitFailure
		}
		if ctx.Err() != nil {
			return exitFailure
		}
	}
	return code
}

// benchStack starts one side of the benchmark, its traffic captured with
// tap: one socket, the client's when both sides run here, sees every
// datagram.
func benchStack(o benchOpts, name string, main bool, listen string, tap bool) (*road.Stack, error) {
	cfg := &road.Config{
		Name: name, Main: main, Auto: keep.AutoAlways, Listen: listen, AlivePeriod: -1,
		Profile: o.profile, FastMaxPacketSize: o.fastMPS, BodyKind: o.body,
		HeadKind: codec.HeadKindRaet, MessageTimeout: o.timeout,
	}
	if err := o.run.road(context.Background(), cfg, tap); err != nil {
		return nil, err
	}
	s, err := road.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

func benchDrain(ctx context.Context, s *road.Stack) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.Receive():
		}
	}
}

func benchServe(o benchOpts, listen string, forDur time.Duration, stderr io.Writer) int {
	s, err := benchStack(o, "bench_serve", true, listen, true)
	if err != nil {
		fmt.Fprintln(stderr, "raet bench:", err)
		return exitSetup
	}
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if forDur > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, forDur)
		defer cancel()
	}
	fmt.Fprintf(stderr, "raet bench: serving on %s (profile %s)\n", s.Addr(), o.profName)
	benchDrain(ctx, s)
	return exitOK
}

// benchSize sends messages of one size with o.window in flight and
// measures each Send (until done).
func benchSize(ctx context.Context, s *road.Stack, rem road.Remote, o benchOpts, size int) benchResult {
	body := map[string]any{"data": strings.Repeat("x", size)}
	r := benchResult{
		Size: size, Profile: o.profName, Head: rem.HeadKind.String(), Foot: rem.FootKind.String(),
		Coat: rem.CoatKind.String(), MaxPacketSize: rem.MaxPacketSize, Window: o.window,
	}
	var (
		mu     sync.Mutex
		rtts   []time.Duration
		errs   atomic.Int64
		issued int
		wg     sync.WaitGroup
	)
	sem := make(chan struct{}, o.window)
	var deadline time.Time
	t0 := time.Now()
	if o.duration > 0 {
		deadline = t0.Add(o.duration)
	}
	for ctx.Err() == nil {
		if o.duration > 0 {
			if !time.Now().Before(deadline) {
				break
			}
		} else if issued >= o.count {
			break
		}
		sem <- struct{}{}
		issued++
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			st := time.Now()
			err := s.Send(ctx, rem.Name, body)
			d := time.Since(st)
			if err != nil {
				errs.Add(1)
				return
			}
			mu.Lock()
			rtts = append(rtts, d)
			mu.Unlock()
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	r.Count = len(rtts)
	r.Errors = int(errs.Load())
	r.Seconds = round3(el.Seconds())
	if el > 0 {
		r.MsgsPerSec = round3(float64(r.Count) / el.Seconds())
		r.MBPerSec = round3(float64(r.Count) * float64(size) / el.Seconds() / 1e6)
	}
	if len(rtts) > 0 {
		slices.Sort(rtts)
		r.RTTP50us = round3(float64(rtts[len(rtts)/2].Nanoseconds()) / 1e3)
		r.RTTP99us = round3(float64(rtts[len(rtts)*99/100].Nanoseconds()) / 1e3)
	}
	return r
}

func round3(f float64) float64 {
	return float64(int64(f*1000+0.5)) / 1000
}
