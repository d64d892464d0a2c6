package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// Exit codes of the road commands.
const (
	exitOK      = 0
	exitFailure = 1 // a message failed, an echo differed, a join failed
	exitUsage   = 2 // bad flags or arguments
	exitSetup   = 3 // the keep or the socket could not be opened
)

// stackFlags are the flags serve and send share.
type stackFlags struct {
	keepDir, name, role, listen, auto, head, body, keylog string
	main                                                  bool
	verbose                                               bool
	plugins                                               pluginFlags
}

func (f *stackFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.keepDir, "keep", "", "keep directory (estate and role files); empty: keys in memory only")
	fs.StringVar(&f.name, "name", "", "estate name (default: from the keep, else random)")
	fs.StringVar(&f.role, "role", "", "role (default: the name)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:7530", "UDP address to listen and send on")
	fs.StringVar(&f.auto, "auto", "always", "key acceptance: always, once or never")
	fs.StringVar(&f.head, "head", "native", "head kind to send: native, json or binary")
	fs.StringVar(&f.body, "body", "json", "body kind: json, msgpack or cbor")
	fs.StringVar(&f.keylog, "keylog", "", "append session keys to this file (RAET_SESSION lines)")
	fs.BoolVar(&f.main, "main", false, "be a main estate (accept joins from unknown estates)")
	fs.BoolVar(&f.verbose, "v", false, "log more (to stderr)")
	f.plugins.register(fs)
}

func (f *stackFlags) config(stderr io.Writer) (*road.Config, error) {
	auto, err := keep.ParseAutoMode(f.auto)
	if err != nil {
		return nil, err
	}
	head := f.head
	if head == "native" {
		head = "raet"
	}
	hk, ok := codec.ParseHeadKind(head)
	if !ok {
		return nil, fmt.Errorf("unknown head kind %q", f.head)
	}
	bk, ok := codec.ParseBodyKind(f.body)
	if !ok || (bk != codec.BodyKindJSON && bk != codec.BodyKindMsgpack && bk != codec.BodyKindCBOR) {
		return nil, fmt.Errorf("unknown body kind %q", f.body)
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	return &road.Config{
		Name: f.name, Role: f.role, Main: f.main, Listen: f.listen, KeepDir: f.keepDir, Auto: auto,
		HeadKind: hk, BodyKind: bk, KeyLogFile: f.keylog,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}, nil
}

func startStack(cfg *road.Config) (*road.Stack, error) {
	s, err := road.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// received is one JSON line of serve's output.
type received struct {
	From string         `json:"from"`
	Body map[string]any `json:"body"`
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raet serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf stackFlags
	sf.register(fs)
	echo := fs.Bool("echo", false, "send every message back to its sender")
	pcap := fs.String("pcap", "", "write the estate's traffic to this pcapng file (for raetdump)")
	join := fs.String("join", "", "join this estate (host:port) at start")
	duration := fs.Duration("for", 0, "stop after this long (0: until SIGINT or SIGTERM)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	cfg, err := sf.config(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "raet serve:", err)
		return exitUsage
	}
	stopPlugins, err := sf.plugins.apply(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(stderr, "raet serve:", err)
		return exitSetup
	}
	defer stopPlugins()
	if *pcap != "" {
		f, err := os.Create(*pcap)
		if err != nil {
			fmt.Fprintln(stderr, "raet serve:", err)
			return exitSetup
		}
		pw, err := dissect.NewPcapngWriter(f, nil)
		if err != nil {
			f.Close()
			fmt.Fprintln(stderr, "raet serve:", err)
			return exitSetup
		}
		cfg.Tap = func(p road.TapPacket) { pw.Tap(dissect.RoadPacket(p)) }
		defer func() {
			if err := pw.Err(); err != nil {
				fmt.Fprintln(stderr, "raet serve: capture:", err)
			}
			f.Close()
		}()
	}
	s, err := startStack(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "raet serve:", err)
		return exitSetup
	}
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	fmt.Fprintf(stderr, "raet serve: %s listening on %s\n", s.Name(), s.Addr())
	if *join != "" {
		if _, err := s.Join(ctx, *join); err != nil {
			fmt.Fprintln(stderr, "raet serve: join:", err)
			return exitFailure
		}
	}
	enc := json.NewEncoder(stdout)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case m := <-s.Receive():
			if err := enc.Encode(received{From: m.From, Body: m.Body}); err != nil {
				return exitFailure
			}
			if *echo {
				wg.Add(1)
				go func() {
					defer wg.Done()
					sctx, cancel := context.WithTimeout(ctx, time.Minute)
					defer cancel()
					if err := s.Send(sctx, m.From, roadOrdered(m)); err != nil && ctx.Err() == nil {
						fmt.Fprintln(stderr, "raet serve: echo:", err)
					}
				}()
			}
		}
	}
}

// roadOrdered is a message's body in its key order, to echo it as it came
// (the stack re-encodes it in its body kind, which refuses what it cannot
// carry); m.Body if it does not decode again.
func roadOrdered(m road.Message) any {
	ser, err := packet.SerializerFor(m.Kind)
	var om packet.OrderedMap
	if err != nil || ser.Unmarshal(m.Raw, &om) != nil {
		return m.Body
	}
	return om
}

// summary is send's result line.
type summary struct {
	To        string  `json:"to"`
	Sent      int     `json:"sent"`
	Done      int     `json:"done"`
	Echoed    int     `json:"echoed,omitempty"`
	Failed    int     `json:"failed"`
	Resent    int     `json:"resent,omitempty"` // messages an earlier run left in a durable queue, done now
	Bytes     int     `json:"bytes_each"`
	ElapsedMS float64 `json:"elapsed_ms"`
	MsgsPerS  float64 `json:"msgs_per_s"`
	P50MS     float64 `json:"rtt_p50_ms"`
	P99MS     float64 `json:"rtt_p99_ms"`
	Error     string  `json:"error,omitempty"`
}

func runSend(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raet send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var sf stackFlags
	sf.register(fs)
	to := fs.String("to", "", "the estate to send to (host:port)")
	bodyJSON := fs.String("body-json", "", "the message, a JSON object")
	size := fs.Int("size", 0, "send generated messages of about this many bytes")
	count := fs.Int("count", 1, "how many messages")
	window := fs.Int("window", 16, "messages in flight at once")
	expectEcho := fs.Bool("expect-echo", false, "wait for each message to come back, identical")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *to == "" || (*bodyJSON == "") == (*size == 0) || *count < 1 || *window < 1 {
		fmt.Fprintln(stderr, "raet send: need --to and exactly one of --body-json or --size, with --count >= 1")
		return exitUsage
	}
	var fixed map[string]any
	if *bodyJSON != "" {
		if err := json.Unmarshal([]byte(*bodyJSON), &fixed); err != nil {
			fmt.Fprintln(stderr, "raet send: --body-json:", err)
			return exitUsage
		}
	}
	cfg, err := sf.config(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "raet send:", err)
		return exitUsage
	}
	stopPlugins, err := sf.plugins.apply(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(stderr, "raet send:", err)
		return exitSetup
	}
	defer stopPlugins()
	s, err := startStack(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "raet send:", err)
		return exitSetup
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	sum := summary{To: *to}
	fail := func(err error) int {
		sum.Error = err.Error()
		json.NewEncoder(stdout).Encode(sum)
		return exitFailure
	}
	r, err := s.Join(ctx, *to)
	if err != nil {
		return fail(fmt.Errorf("join: %w", err))
	}
	// Generated messages carry this run's id, so that echoes of an earlier
	// run (which a remote may still deliver after a new allow) are told apart.
	runID := randomID()
	body := func(i int) map[string]any {
		if fixed != nil {
			return fixed
		}
		return map[string]any{"run": runID, "seq": int64(i), "data": strings.Repeat(string(rune('a'+i%26)), *size)}
	}
	sum.Bytes = *size
	echoes := newEchoSet(*expectEcho, runID)
	go echoes.collect(ctx, s)

	start := time.Now()
	rtts := make([]time.Duration, *count)
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, *window)
	var wg sync.WaitGroup
	for i := range *count {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			b := body(i)
			echoes.expect(b)
			t0 := time.Now()
			err := s.Send(ctx, r.Name, b)
			mu.Lock()
			defer mu.Unlock()
			sum.Sent++
			if err != nil {
				sum.Failed++
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			sum.Done++
			rtts[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	// What an earlier run left in a durable --queue goes again at start;
	// wait for it too, so that nothing stays behind.
	resent, refailed, err := s.WaitPending(ctx)
	sum.Resent = resent
	if err == nil && refailed > 0 {
		err = fmt.Errorf("%d messages of an earlier run failed again (still queued)", refailed)
	}
	if err != nil && firstErr == nil {
		firstErr = fmt.Errorf("queued messages of an earlier run: %w", err)
	}
	if *expectEcho {
		sum.Echoed, err = echoes.wait(ctx, sum.Done)
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	el := time.Since(start)
	sum.ElapsedMS = float64(el.Microseconds()) / 1000
	sum.MsgsPerS = float64(sum.Done) / el.Seconds()
	var got []time.Duration
	for _, d := range rtts {
		if d > 0 {
			got = append(got, d)
		}
	}
	slices.Sort(got)
	if len(got) > 0 {
		sum.P50MS = float64(got[len(got)/2].Microseconds()) / 1000
		sum.P99MS = float64(got[min(len(got)-1, len(got)*99/100)].Microseconds()) / 1000
	}
	if firstErr != nil {
		return fail(firstErr)
	}
	json.NewEncoder(stdout).Encode(sum)
	return exitOK
}

func randomID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// echoSet checks that every message comes back identical.
type echoSet struct {
	on      bool
	run     string // generated messages' run id; echoes of other runs are ignored
	mu      sync.Mutex
	want    map[string]int // canonical JSON of a message sent -> how many are awaited
	matched int
	bad     error
	signal  chan struct{}
}

func newEchoSet(on bool, run string) *echoSet {
	return &echoSet{on: on, run: run, want: map[string]int{}, signal: make(chan struct{}, 1)}
}

func canonical(b map[string]any) string {
	j, _ := json.Marshal(b) // map keys sorted: canonical
	return string(j)
}

func (e *echoSet) expect(b map[string]any) {
	if !e.on {
		return
	}
	e.mu.Lock()
	e.want[canonical(b)]++
	e.mu.Unlock()
}

func (e *echoSet) collect(ctx context.Context, s *road.Stack) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-s.Receive():
			if !e.on {
				continue
			}
			if r, ok := m.Body["run"].(string); ok && r != e.run {
				continue // an echo of an earlier run
			}
			got := canonical(m.Body)
			e.mu.Lock()
			if e.want[got] > 0 {
				e.want[got]--
				e.matched++
			} else {
				e.bad = errors.Join(e.bad, fmt.Errorf("an echo from %s matched no message sent", m.From))
			}
			e.mu.Unlock()
			select {
			case e.signal <- struct{}{}:
			default:
			}
		}
	}
}

func (e *echoSet) wait(ctx context.Context, n int) (int, error) {
	for {
		e.mu.Lock()
		matched, bad := e.matched, e.bad
		e.mu.Unlock()
		if bad != nil || matched >= n {
			return matched, bad
		}
		select {
		case <-ctx.Done():
			return matched, fmt.Errorf("%d of %d echoes came back: %w", matched, n, ctx.Err())
		case <-e.signal:
		}
	}
}
