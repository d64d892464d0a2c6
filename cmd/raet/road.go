package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/queue"
	"github.com/raet-go/raet/road"
)

// stackFlags are the flags serve and send share.
type stackFlags struct {
	keepDir, name, role, listen, auto, head, body, profile string
	main, mutable                                          bool
	verbose                                                bool
	run                                                    runFlags
}

func (f *stackFlags) register(fs *flag.FlagSet, listen, auto string) {
	fs.StringVar(&f.keepDir, "keep", "", "keep `dir`ectory (estate and role files); empty: keys in memory only")
	fs.StringVar(&f.name, "name", "", "estate `name` (default: from the keep, else random)")
	fs.StringVar(&f.role, "role", "", "`role` (default: the name)")
	fs.StringVar(&f.listen, "listen", listen, "UDP `address` to listen and send on (port 0: any free port)")
	fs.StringVar(&f.auto, "auto", auto, "acceptance of keys remotes offer: always, once or never (never: an operator runs raet keys accept)")
	fs.StringVar(&f.head, "head", "native", "head kind to send: native, json or binary")
	fs.StringVar(&f.body, "body", "json", "body kind of the messages sent: json, msgpack or cbor")
	fs.StringVar(&f.profile, "profile", "fast", "what to offer raet-go peers: fast (negotiated in join and allow) or reference (what the Python reference does)")
	fs.BoolVar(&f.main, "main", false, "be a main estate (accept joins from estates not known yet)")
	fs.BoolVar(&f.mutable, "mutable", false, "let a known estate join again with a changed address, keys or name")
	fs.BoolVar(&f.verbose, "v", false, "log more (to stderr)")
	f.run.register(fs, scopeRoad|scopePlugins)
}

// parseProfile parses --profile.
func parseProfile(s string) (road.Profile, error) {
	switch s {
	case "fast", "auto":
		return road.ProfileAuto, nil
	case "reference", "ref":
		return road.ProfileReference, nil
	}
	return 0, fmt.Errorf("unknown profile %q (fast or reference)", s)
}

// parseAEAD parses --aead.
func parseAEAD(s string) (road.AEADMode, error) {
	switch s {
	case "prefer":
		return road.AEADPrefer, nil
	case "refuse":
		return road.AEADRefuse, nil
	}
	return 0, fmt.Errorf("unknown AEAD mode %q (prefer or refuse)", s)
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
	prof, err := parseProfile(f.profile)
	if err != nil {
		return nil, err
	}
	if err := f.run.check(); err != nil {
		return nil, err
	}
	level := slog.LevelInfo
	if f.verbose {
		level = slog.LevelDebug
	}
	return &road.Config{
		Name: f.name, Role: f.role, Main: f.main, Mutable: f.mutable, Listen: f.listen, KeepDir: f.keepDir, Auto: auto,
		HeadKind: hk, BodyKind: bk, Profile: prof,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}, nil
}

// setup makes the stack's configuration from the flags and applies the
// shared ones (capture, key log, AEAD, plugins). It returns a nil cfg and
// the exit code on failure; else done, to call once the stack is closed.
func (f *stackFlags) setup(prog string, stderr io.Writer) (cfg *road.Config, done func(), code int) {
	cfg, err := f.config(stderr)
	if err != nil {
		return nil, nil, usageError(stderr, prog, "%v", err)
	}
	done = func() {
		if err := f.run.close(); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		}
	}
	if err := f.run.open(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return nil, nil, exitSetup
	}
	if err := f.run.road(context.Background(), cfg, true); err != nil {
		done()
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return nil, nil, exitSetup
	}
	return cfg, done, exitOK
}

// durableQueue says whether q keeps its messages across a crash (a queue
// plugin such as bolt's: queue.Stable).
func durableQueue(q road.Queue) bool {
	st, ok := q.(queue.Stable)
	return ok && st.Instance() != 0
}

func startStack(cfg *road.Config) (*road.Stack, error) {
	s, err := road.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		s.Close() // releases the keep
		return nil, err
	}
	return s, nil
}

// keptListen is the address an estate listened on last time, from its
// keep: raet send listens there again unless --listen says otherwise, so
// that the main, which knows it at that address, lets it join again on an
// immutable road. "" when the keep has none.
func keptListen(keepDir string) string {
	if keepDir == "" {
		return ""
	}
	k, err := keep.OpenReadOnly(keepDir)
	if err != nil {
		return ""
	}
	est, err := k.LoadLocal()
	if err != nil || est.AHA.Port == 0 {
		return ""
	}
	host := est.AHA.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(int(est.AHA.Port)))
}

// received is one JSON line of serve's output: a message.
type received struct {
	From string          `json:"from"`
	Body json.RawMessage `json:"body"`
}

// eventLine is one JSON line of serve's output: something that happened
// to a remote.
type eventLine struct {
	Event  string `json:"event"`
	Remote string `json:"remote"`
	UID    uint32 `json:"uid,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func newEventLine(e road.Event) eventLine {
	return eventLine{Event: e.Kind.String(), Remote: e.Remote, UID: e.UID, Reason: e.Reason.String()}
}

// countersLine is serve's last line: the stack's counters at exit.
type countersLine struct {
	Counters struct {
		MessagesIn   uint64            `json:"messages_in"`
		MessagesOut  uint64            `json:"messages_out"`
		MessageFails uint64            `json:"message_fails"`
		Retransmits  uint64            `json:"retransmits"`
		Spurious     uint64            `json:"spurious_retransmits"` // whose done showed them needless
		SendErrors   uint64            `json:"send_errors"`
		EventDrops   uint64            `json:"event_drops"`
		Drops        map[string]uint64 `json:"drops,omitempty"`
	} `json:"counters"`
}

func newCountersLine(c road.Counters) countersLine {
	var l countersLine
	l.Counters.MessagesIn, l.Counters.MessagesOut, l.Counters.MessageFails = c.MessagesIn, c.MessagesOut, c.MessageFails
	l.Counters.Retransmits, l.Counters.SendErrors, l.Counters.EventDrops = c.Retransmits, c.SendErrors, c.EventDrops
	l.Counters.Spurious = c.SpuriousRetransmits
	l.Counters.Drops = c.Drops
	return l
}

// bodyJSON returns a message's body as JSON, its keys in the order they
// came: the bytes as received for a json body, else the body decoded in
// order and written as JSON.
func bodyJSON(m road.Message) (json.RawMessage, error) {
	if m.Kind == codec.BodyKindJSON {
		var b bytes.Buffer
		if len(m.Raw) == 0 {
			return json.RawMessage("{}"), nil
		}
		if err := json.Compact(&b, m.Raw); err != nil {
			return nil, err
		}
		return b.Bytes(), nil
	}
	om, err := ordered(m)
	if err != nil {
		return nil, err
	}
	if om == nil {
		return json.RawMessage("{}"), nil
	}
	return json.Marshal(om)
}

// ordered decodes a message's body keeping its key order, to send it on
// as it came.
func ordered(m road.Message) (packet.OrderedMap, error) {
	ser, err := packet.SerializerFor(m.Kind)
	if err != nil {
		return nil, err
	}
	var om packet.OrderedMap
	err = ser.Unmarshal(m.Raw, &om)
	return om, err
}

var serveHelp = help{
	usage: `raet serve [--keep DIR] [--name NAME] [--listen HOST:PORT] [--main] [--auto always|once|never]
           [--echo] [--join HOST:PORT] [--for DUR] [--pcap FILE] [--keylog FILE] [--profile fast|reference] [--aead prefer|refuse]
           [--metrics HOST:PORT] [--txlog FILE] ...`,
	about: `Run an estate until SIGINT, SIGTERM or --for. Each message received is a
line {"from":NAME,"body":{...}} on stdout, its keys in the order they came;
each thing that happens to a remote is a line {"event":KIND,"remote":NAME,
"uid":N,"reason":WHY} (joined, pending, rejected, allowed, alive, dead,
reaped, unreaped, removed, forgotten). At exit, one line {"counters":{...}}. Joins,
pends, rejections and removals are also logged to stderr with the reason and
the command that resolves it. With --echo every message is sent back to its
sender, keys in order; each echo is queued (--queue) before the next message
is read, and with a durable queue (--queue plugin:NAME) the road holds at most
one received message unread (the road says done on receipt: a crash loses the
echoes of at most the two it holds and the one being queued). --pcap writes the traffic as pcapng and --keylog the
session keys, which raetdump reads (raetdump -r FILE -keep DIR -keylog FILE).
A keep is locked while its estate runs: a second stack on it fails (exit 3).
--metrics serves /metrics (Prometheus), /healthz and /status (raet status
reads it); --txlog writes the transaction log (docs/txlog.md), the same as
raetdump -r FILE -txlog OUT makes from a capture.`,
	example: `raet keygen --keep /tmp/a --name alpha
raet serve --keep /tmp/a --main --auto never --echo --pcap /tmp/a.pcapng --keylog /tmp/keys.log
raet serve --main --metrics 127.0.0.1:9530 --txlog /tmp/a.txlog.jsonl`,
}

func runServe(args []string, stdout, stderr io.Writer) int {
	const prog = "raet serve"
	fs := newFlags(prog, stderr)
	var sf stackFlags
	sf.register(fs, "127.0.0.1:7530", "always")
	echo := fs.Bool("echo", false, "send every message back to its sender")
	join := fs.String("join", "", "join this estate (`host:port`) at start")
	duration := fs.Duration("for", 0, "stop after this long (0: until SIGINT or SIGTERM)")
	var obs observeFlags
	obs.register(fs)
	if code, ok := parseFlags(fs, serveHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	cfg, done, code := sf.setup(prog, stderr)
	if cfg == nil {
		return code
	}
	defer done()
	endTxLog, err := obs.tapRoad(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "raet serve:", err)
		return exitSetup
	}
	defer endTxLog() // after the stack is closed
	if *echo && durableQueue(cfg.Queue) {
		// The road says done for a message once it is in the receive
		// queue, before serve has it: what it holds there is acknowledged
		// and not yet echoed. Keep it to one (and one in Receive), so that
		// a crash loses at most those and the one being queued (the echo
		// is queued before the next is read).
		cfg.ReceiveQueue = 1
	}
	s, err := startStack(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "raet serve:", err)
		return exitSetup
	}
	defer s.Close()
	stopObs, err := obs.start(observed{road: s}, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "raet serve:", err)
		return exitSetup
	}
	defer stopObs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
		defer cancel()
	}
	fmt.Fprintf(stderr, "raet serve: %s listening on %s\n", s.Name(), s.Addr())
	enc := json.NewEncoder(stdout)
	// Echoes in flight get a moment to be done when serve stops.
	echoCtx, cancelEchoes := context.WithCancel(context.Background())
	defer cancelEchoes()
	var wg sync.WaitGroup
	defer wg.Wait()
	joinErr := make(chan error, 1)
	if *join != "" {
		go func() { _, err := s.Join(ctx, *join); joinErr <- err }()
	}
	for {
		select {
		case <-ctx.Done():
			finished := make(chan struct{})
			go func() { wg.Wait(); close(finished) }()
			select {
			case <-finished:
			case <-time.After(2 * time.Second):
			}
			cancelEchoes()
			wg.Wait()
			if c, err := s.Counters(context.Background()); err == nil {
				enc.Encode(newCountersLine(c))
			}
			return exitOK
		case <-s.Done():
			fmt.Fprintln(stderr, "raet serve:", s.Err())
			return exitFailure
		case err := <-joinErr:
			if err != nil {
				fmt.Fprintln(stderr, "raet serve: join:", err)
				return exitFailure
			}
		case e := <-s.Events():
			if err := enc.Encode(newEventLine(e)); err != nil {
				return exitFailure
			}
		case m, ok := <-s.Receive():
			if !ok {
				fmt.Fprintln(stderr, "raet serve:", s.Err())
				return exitFailure
			}
			if body, err := bodyJSON(m); err != nil {
				// Not a line JSON can print (a msgpack or CBOR float inf or
				// NaN): said here; the echo goes all the same.
				fmt.Fprintf(stderr, "raet serve: message from %s not printed: %v\n", m.From, err)
			} else if err := enc.Encode(received{From: m.From, Body: body}); err != nil {
				return exitFailure
			}
			if *echo {
				om, err := ordered(m)
				if err != nil {
					fmt.Fprintf(stderr, "raet serve: echo to %s: %v\n", m.From, err)
					continue
				}
				// Queued (in a durable queue: stored) before the next
				// message is read; its outcome is waited for aside.
				call, err := s.Go(ctx, m.From, om, nil)
				if err != nil {
					if ctx.Err() == nil {
						fmt.Fprintln(stderr, "raet serve: echo:", err)
					}
					continue
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					select {
					case <-call.Done:
						if call.Err != nil && echoCtx.Err() == nil {
							fmt.Fprintln(stderr, "raet serve: echo:", call.Err)
						}
					case <-echoCtx.Done():
					}
				}()
			}
		}
	}
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

var sendHelp = help{
	usage: `raet send --to HOST:PORT (--body-json '{...}' | --size BYTES) [--count N] [--window N] [--expect-echo]
          [--keep DIR] [--name NAME] [--listen HOST:PORT] [--timeout DUR] [--profile fast|reference] [--aead prefer|refuse] ...`,
	about: `Join the estate at --to (join, then allow: the session is up), send it
--count messages and print one summary line {"to":..,"sent":..,"done":..,
"failed":..,"rtt_p50_ms":..,...}. A message is done when the remote says so.
--body-json sends that JSON object as it is written: key order and integers
are kept. --size sends generated messages of that many bytes. With
--expect-echo every message must come back identical (raet serve --echo).
While it waits, send says on stderr what for: keys pending at the remote, a
remote that does not answer. It listens where its keep says it listened last time, else on a free port,
unless --listen says.
Without --keep it has new keys every run: a main with --auto never or once
then sees a new estate each time.`,
	example: `raet send --keep /tmp/b --name beta --to 127.0.0.1:7530 --body-json '{"n":1,"big":9007199254740993}'
raet send --to 127.0.0.1:7530 --size 1000 --count 100 --expect-echo`,
}

func runSend(args []string, stdout, stderr io.Writer) int {
	const prog = "raet send"
	fs := newFlags(prog, stderr)
	var sf stackFlags
	sf.register(fs, "127.0.0.1:0", "always")
	to := fs.String("to", "", "the estate to send to (`host:port`)")
	bodyJSON := fs.String("body-json", "", "the message, a JSON `object`, keys and integers kept as written")
	size := fs.Int("size", 0, "send generated messages of about this many `bytes`")
	count := fs.Int("count", 1, "how many messages")
	window := fs.Int("window", 16, "messages in flight at once")
	expectEcho := fs.Bool("expect-echo", false, "wait for each message to come back, identical")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if code, ok := parseFlags(fs, sendHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	if *to == "" || (*bodyJSON == "") == (*size == 0) || *count < 1 || *window < 1 || *size < 0 {
		return usageError(stderr, prog, "need --to and exactly one of --body-json or --size, with --count >= 1")
	}
	var fixed packet.OrderedMap // keeps the key order and the integers given
	if *bodyJSON != "" {
		if err := (packet.JSONBody{}).Unmarshal([]byte(*bodyJSON), &fixed); err != nil {
			return usageError(stderr, prog, "--body-json: %v", err)
		}
	}
	cfg, done, code := sf.setup(prog, stderr)
	if cfg == nil {
		return code
	}
	defer done()
	listenSet := false
	fs.Visit(func(f *flag.Flag) { listenSet = listenSet || f.Name == "listen" })
	kept := ""
	if !listenSet {
		if kept = keptListen(sf.keepDir); kept != "" {
			cfg.Listen = kept
		}
	}
	s, err := startStack(cfg)
	if err != nil && kept != "" && errors.Is(err, syscall.EADDRINUSE) {
		fmt.Fprintf(stderr, "raet send: %s, where this estate listened last time, is in use; listening on a free port (a main on an immutable road may refuse the new address)\n", kept)
		cfg.Listen = "127.0.0.1:0"
		s, err = startStack(cfg)
	}
	if err != nil {
		fmt.Fprintln(stderr, "raet send:", err)
		return exitSetup
	}
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	sum := summary{To: *to}
	fail := func(err error) int {
		sum.Error = err.Error()
		json.NewEncoder(stdout).Encode(sum)
		fmt.Fprintln(stderr, "raet send:", err)
		return exitFailure
	}
	joinCtx, joined := context.WithCancel(ctx)
	told := make(chan struct{})
	go func() { defer close(told); tellWaits(joinCtx, s, *to, stderr) }()
	r, err := s.Join(ctx, *to)
	joined()
	<-told
	if err != nil {
		return fail(fmt.Errorf("join: %w", err))
	}
	// Generated messages carry this run's id, so that echoes of an earlier
	// run (which a remote may still deliver after a new allow) are told apart.
	runID := randomID()
	body := func(i int) any {
		if fixed != nil {
			return fixed
		}
		return packet.OrderedMap{{Key: "run", Value: runID}, {Key: "seq", Value: int64(i)},
			{Key: "data", Value: strings.Repeat(string(rune('a'+i%26)), *size)}}
	}
	sum.Bytes = *size
	echoes := newEchoSet(*expectEcho, runID)
	if fixed != nil {
		echoes.exact, _ = (packet.JSONBody{}).Marshal(nil, fixed)
		sum.Bytes = len(echoes.exact)
	}
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

// tellWaits says on stderr what a join waits for, from the stack's events,
// until ctx ends.
func tellWaits(ctx context.Context, s *road.Stack, to string, stderr io.Writer) {
	fmt.Fprintf(stderr, "raet send: %s joining %s from %s\n", s.Name(), to, s.Addr())
	silent := time.NewTicker(3 * time.Second) // while nothing is heard
	defer silent.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-silent.C:
			fmt.Fprintf(stderr, "raet send: no answer from %s yet; trying again (until --timeout)\n", to)
		case e := <-s.Events():
			silent.Stop()
			if e.Reason != road.ReasonNone {
				fmt.Fprintf(stderr, "raet send: %s %s: %s\n", e.Remote, e.Kind, e.Reason.Describe())
			}
		}
	}
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
	exact   []byte // --body-json as JSON: a JSON echo must have these bytes (key order too)
	mu      sync.Mutex
	want    map[string]int // canonical JSON of a message sent -> how many are awaited
	matched int
	bad     error
	signal  chan struct{}
}

func newEchoSet(on bool, run string) *echoSet {
	return &echoSet{on: on, run: run, want: map[string]int{}, signal: make(chan struct{}, 1)}
}

// canonical is a body as JSON with sorted keys: the same for a body sent
// and its echo, whatever the order its keys came in.
func canonical(b any) string {
	if om, ok := b.(packet.OrderedMap); ok {
		raw, err := (packet.JSONBody{}).Marshal(nil, om)
		if err != nil {
			return ""
		}
		var m map[string]any
		if err := (packet.JSONBody{}).Unmarshal(raw, &m); err != nil {
			return ""
		}
		b = m
	}
	j, _ := json.Marshal(b) // map keys sorted: canonical
	return string(j)
}

func (e *echoSet) expect(b any) {
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
		case m, ok := <-s.Receive():
			if !ok {
				return
			}
			if !e.on {
				continue
			}
			if r, ok := m.Body["run"].(string); ok && r != e.run {
				continue // an echo of an earlier run
			}
			got := canonical(m.Body)
			var compact bytes.Buffer
			if e.exact != nil && m.Kind == codec.BodyKindJSON && (json.Compact(&compact, m.Raw) != nil || !bytes.Equal(compact.Bytes(), e.exact)) {
				got = "" // the same values, but not as sent: the keys in another order
			}
			e.mu.Lock()
			if e.want[got] > 0 {
				e.want[got]--
				e.matched++
			} else {
				e.bad = errors.Join(e.bad, fmt.Errorf("an echo from %s matched no message sent (in values and key order)", m.From))
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
