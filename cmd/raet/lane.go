package main

// raet lane serve|send: yards of a lane (Unix datagram sockets on one
// host), with the output conventions of raet serve|send: JSON lines on
// stdout, logs on stderr, exit codes 0 success, 1 failure, 2 usage,
// 3 the socket could not be bound (for example a live yard holds it).

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/packet"
)

const laneUsage = `usage:
  raet lane serve --dir DIR [--lane NAME] --name YARD [--echo] [--count N] [--for DUR] [--body json|msgpack|cbor]
                  [--pcap FILE] [PLUGIN FLAGS] [-v]
  raet lane send  --dir DIR [--lane NAME] [--name YARD] --to YARD (--body-json '{...}' | --size BYTES) [--count N]
                  [--expect-echo] [--timeout DUR] [--body json|msgpack|cbor] [--pcap FILE] [PLUGIN FLAGS] [-v]
  both: [--allow-shared-dir]
PLUGIN FLAGS, as for raet serve and send:
  [--plugins DIR] [--serializer json|msgpack|cbor|plugin:NAME] [--queue memory[:N]|plugin:NAME] [--plugin-timeout DUR]

serve prints each message received as a line {"from":YARD,"body":{...}}; with
--echo it sends the message back to its sender; with --pcap it writes every
page it sends and receives to FILE as a pcapng capture (raetdump -r FILE).
send prints one summary line.
--serializer plugin:NAME sends bodies serialized by the serializer plugin NAME
of --plugins DIR (pages of its kind, e.g. 5 for zstdjson) and decodes the
bodies of its kind received; --queue plugin:NAME keeps each message in the
queue plugin NAME until sent, and a yard started again with the same durable
queue sends what an earlier run could not.
A --dir its group or other users can write (even with the sticky bit) is
refused (exit 3): another user could bind a yard's name and receive its pages;
--allow-shared-dir accepts that risk.
Example: raet lane serve --dir /run/raet --name echo --echo
Exit status: 0 success, 1 failure (a send failed, an echo is missing or
differs), 2 usage, 3 the yard's socket could not be bound (e.g. it is live) or a
plugin could not be started.
`

func runLane(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, laneUsage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return runLaneServe(args[1:], stdout, stderr)
	case "send":
		return runLaneSend(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, laneUsage)
		return exitOK
	}
	fmt.Fprintf(stderr, "raet lane: unknown subcommand %q\n", args[0])
	fmt.Fprint(stderr, laneUsage)
	return exitUsage
}

// laneFlags are the flags serve and send share.
type laneFlags struct {
	dir, lane, name, pack string
	verbose, shared       bool
	run                   runFlags
}

func (f *laneFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "dir", "", "socket directory (default: /var/cache/raet, else ~/.raet/uxd)")
	fs.StringVar(&f.lane, "lane", lane.DefaultLane, "lane name")
	fs.StringVar(&f.name, "name", "", "this yard's name (default: lane_ and random hex)")
	fs.StringVar(&f.pack, "body", "json", "body kind of the messages sent (the page's pack kind): json, msgpack or cbor")
	fs.BoolVar(&f.shared, "allow-shared-dir", false, "use a --dir others can write (they could bind a yard's name and receive its pages)")
	fs.BoolVar(&f.verbose, "v", false, "log more (to stderr)")
	f.run.register(fs, scopeLane|scopePlugins)
}

func (f *laneFlags) config(stderr io.Writer) (*lane.Config, error) {
	pk, ok := codec.ParsePackKind(strings.Replace(f.pack, "msgpack", "pack", 1))
	if !ok {
		return nil, fmt.Errorf("unknown pack kind %q", f.pack)
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	return &lane.Config{
		Dir: f.dir, Lane: f.lane, Name: f.name, PackKind: pk, AllowSharedDir: f.shared,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
	}, nil
}

// startLane makes and starts a stack with the shared flags applied (the
// capture, the serializer and queue of the plugin flags); a bad
// configuration is a usage error, a failure to open the capture, start a
// plugin or bind a setup error. Call stop, which ends the plugins and
// closes the capture (reporting its error), after closing the stack.
func startLane(f *laneFlags, prog string, stderr io.Writer) (s *lane.Stack, stop func() error, code int) {
	stop = func() error { return nil }
	cfg, err := f.config(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return nil, stop, exitUsage
	}
	if err := f.run.open(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return nil, stop, exitSetup
	}
	if err := f.run.lane(context.Background(), cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		f.run.close()
		return nil, stop, exitSetup
	}
	if s, err = lane.New(cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		f.run.close()
		return nil, stop, exitUsage
	}
	if err := s.Start(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		f.run.close()
		return nil, stop, exitSetup
	}
	return s, f.run.close, exitOK
}

// laneBodyJSON writes the body of m as one line of JSON: the bytes as
// they came for a json body (compacted), else the decoded body.
func laneBodyJSON(buf *bytes.Buffer, m lane.Message) error {
	if m.Kind == codec.PackKindJSON && len(m.Raw) > 0 {
		return json.Compact(buf, m.Raw)
	}
	b, err := json.Marshal(m.Body)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// laneSerializer returns the body serializer of a lane pack kind: a
// built-in one, or the plugin registered for its kind (--serializer
// plugin:NAME registers it).
func laneSerializer(pk codec.PackKind) (packet.Serializer, error) {
	bk, ok := lane.BodyKindOf(pk)
	if !ok {
		return nil, fmt.Errorf("pack kind %v names no serializer", pk)
	}
	return packet.SerializerFor(bk)
}

// laneOrdered decodes a message's body keeping its key order, to echo it
// as it came.
func laneOrdered(m lane.Message) (packet.OrderedMap, error) {
	ser, err := laneSerializer(m.Kind)
	if err != nil {
		return nil, err
	}
	var om packet.OrderedMap
	err = ser.Unmarshal(m.Raw, &om)
	return om, err
}

var laneServeHelp = help{
	usage: `raet lane serve --name YARD [--dir DIR] [--lane NAME] [--echo] [--count N] [--for DUR]
                [--body json|msgpack|cbor] [--pcap FILE] [PLUGIN FLAGS] [-v]`,
	about: `Run a yard: bind <DIR>/<LANE>.<YARD>.uxd and print each message received as
a line {"from":YARD,"body":{...}}, keys in the order they came. With --echo
every message goes back to its sender, keys in order; with --pcap every page
sent and received is written to FILE as pcapng (raetdump -r FILE). It stops
at SIGINT, SIGTERM, --for or after --count messages.`,
	example: `raet lane serve --dir /tmp/lane --name beta --echo`,
}

var laneSendHelp = help{
	usage: `raet lane send --to YARD (--body-json '{...}' | --size BYTES) [--dir DIR] [--lane NAME] [--name YARD]
               [--count N] [--expect-echo] [--timeout DUR] [--body json|msgpack|cbor] [--pcap FILE] [PLUGIN FLAGS] [-v]`,
	about: `Send --count messages to the yard YARD of the lane and print one summary
line. A message is sent when all its pages are in the destination's socket
queue. --body-json sends that JSON object as written (key order, integers);
with --expect-echo every message must come back identical and in order
(raet lane serve --echo). --pcap writes every page sent and received to
FILE as pcapng (raetdump -r FILE).`,
	example: `raet lane send --dir /tmp/lane --to beta --body-json '{"n":1}' --expect-echo`,
}

func runLaneServe(args []string, stdout, stderr io.Writer) (status int) {
	const prog = "raet lane serve"
	fs := newFlags(prog, stderr)
	var lf laneFlags
	lf.register(fs)
	echo := fs.Bool("echo", false, "send every message back to its sender")
	count := fs.Int("count", 0, "exit after this many messages (0: no limit)")
	duration := fs.Duration("for", 0, "stop after this long (0: until SIGINT or SIGTERM)")
	var obs observeFlags
	obs.registerMetrics(fs)
	if code, ok := parseFlags(fs, laneServeHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	if *count < 0 {
		return usageError(stderr, prog, "--count must be >= 0")
	}
	s, stopRun, code := startLane(&lf, prog, stderr)
	if s == nil {
		return code
	}
	defer func() { // after the stack is closed: no page comes later
		if err := stopRun(); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
			if status == exitOK {
				status = exitFailure
			}
		}
	}()
	defer s.Close()
	stopObs, err := obs.start(observed{lane: s}, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
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
	fmt.Fprintf(stderr, "%s: %s listening on %s\n", prog, s.Name(), s.Path())
	out := bytes.NewBuffer(nil)
	muted := map[string]bool{} // yards whose echo failed
	for n := 0; *count == 0 || n < *count; n++ {
		var m lane.Message
		select {
		case <-ctx.Done():
			return status
		case m = <-s.Receive():
		}
		out.Reset()
		out.WriteString(`{"from":`)
		from, _ := json.Marshal(m.From)
		out.Write(from)
		out.WriteString(`,"body":`)
		if err := laneBodyJSON(out, m); err != nil {
			fmt.Fprintf(stderr, "%s: message from %s: %v\n", prog, m.From, err)
			status = exitFailure
			continue
		}
		out.WriteString("}\n")
		if _, err := stdout.Write(out.Bytes()); err != nil {
			return exitFailure
		}
		if *echo {
			// In order and in this goroutine: the lane keeps each yard's
			// messages in order, and a slow sender slows us down.
			body, err := laneOrdered(m)
			if err == nil {
				sctx, cancel := context.WithTimeout(ctx, time.Minute)
				err = s.Send(sctx, m.From, body)
				cancel()
			}
			switch {
			case err == nil:
				delete(muted, m.From)
			case ctx.Err() == nil && !muted[m.From]:
				// Logged once until an echo to that yard works again: a
				// sender that left makes every queued echo fail.
				fmt.Fprintf(stderr, "%s: echo: %v\n", prog, err)
				muted[m.From] = true
			}
		}
	}
	return status
}

// laneSummary is lane send's result line; it has the fields of raet
// send's summary, and the pages written.
type laneSummary struct {
	To        string  `json:"to"`
	Sent      int     `json:"sent"`
	Done      int     `json:"done"`
	Echoed    int     `json:"echoed,omitempty"`
	Failed    int     `json:"failed"`
	Bytes     int     `json:"bytes_each"`
	Pages     uint64  `json:"pages"`
	ElapsedMS float64 `json:"elapsed_ms"`
	MsgsPerS  float64 `json:"msgs_per_s"`
	P50MS     float64 `json:"rtt_p50_ms"`
	P99MS     float64 `json:"rtt_p99_ms"`
	Error     string  `json:"error,omitempty"`
}

func runLaneSend(args []string, stdout, stderr io.Writer) int {
	const prog = "raet lane send"
	fs := newFlags(prog, stderr)
	var lf laneFlags
	lf.register(fs)
	to := fs.String("to", "", "the `yard` to send to")
	bodyJSON := fs.String("body-json", "", "the message, a JSON object")
	size := fs.Int("size", 0, "send generated messages with this many bytes of data")
	count := fs.Int("count", 1, "how many messages")
	expectEcho := fs.Bool("expect-echo", false, "wait for every message to come back, identical and in order")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if code, ok := parseFlags(fs, laneSendHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	if *to == "" || (*bodyJSON == "") == (*size == 0) || *count < 1 || *size < 0 {
		return usageError(stderr, prog, "need --to and exactly one of --body-json or --size, with --count >= 1")
	}
	var fixed packet.OrderedMap // keeps the key order given
	if *bodyJSON != "" {
		if err := (packet.JSONBody{}).Unmarshal([]byte(*bodyJSON), &fixed); err != nil {
			fmt.Fprintf(stderr, "%s: --body-json: %v\n", prog, err)
			return exitUsage
		}
	}
	s, stopRun, code := startLane(&lf, prog, stderr)
	if s == nil {
		return code
	}
	defer func() { // after the stack is closed
		if err := stopRun(); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		}
	}()
	defer s.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	// Generated messages carry this run's id, so that late echoes of an
	// earlier run are told apart.
	runID := randomID()
	body := func(i int) any {
		if fixed != nil {
			return fixed
		}
		return packet.OrderedMap{{Key: "run", Value: runID}, {Key: "seq", Value: int64(i)},
			{Key: "data", Value: strings.Repeat(string(rune('a'+i%26)), *size)}}
	}
	ser, err := laneSerializer(s.Config().PackKind)
	if err != nil { // cannot be: the stack serializes with it
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return exitSetup
	}
	sum := laneSummary{To: *to, Bytes: *size}
	if fixed != nil {
		b, _ := (packet.JSONBody{}).Marshal(nil, fixed)
		sum.Bytes = len(b)
	}
	sent := make([]atomic.Int64, *count) // when each Send began (monotonic ns since start)
	rtts := make([]time.Duration, 0, *count)
	echoErr := make(chan error, 1)
	echoed := make(chan int, 1)
	start := time.Now()
	if !*expectEcho {
		// Drain what comes (a serve --echo answers): a stack whose
		// messages are not read stops reading its socket, and its peers
		// wait for it.
		go func() {
			for range s.Receive() {
			}
		}()
	} else {
		go func() { // collects the echoes, in order
			n := 0
			defer func() { echoed <- n }()
			for n < *count {
				var m lane.Message
				select {
				case <-ctx.Done():
					echoErr <- fmt.Errorf("%d of %d echoes: %w", n, *count, ctx.Err())
					return
				case m = <-s.Receive():
				}
				if m.From != *to {
					continue
				}
				if fixed == nil && m.Body["run"] != runID {
					continue // an earlier run's
				}
				if !laneSame(m, body(n), ser) {
					echoErr <- fmt.Errorf("echo %d differs: got %.200s", n, m.Raw)
					return
				}
				rtts = append(rtts, time.Since(start)-time.Duration(sent[n].Load()))
				n++
			}
		}()
	}

	var firstErr error
	for i := range *count {
		t0 := time.Since(start)
		sent[i].Store(int64(t0))
		err := s.Send(ctx, *to, body(i))
		sum.Sent++
		if err != nil {
			sum.Failed++
			firstErr = err
			break
		}
		sum.Done++
		if !*expectEcho {
			rtts = append(rtts, time.Since(start)-t0)
		}
	}
	if *expectEcho {
		if firstErr != nil {
			cancel() // no point waiting
		}
		sum.Echoed = <-echoed
		select {
		case err := <-echoErr:
			if firstErr == nil {
				firstErr = err
			}
		default:
		}
	}
	el := time.Since(start)
	sum.Pages = s.Counters().PagesOut
	sum.ElapsedMS = float64(el.Microseconds()) / 1000
	sum.MsgsPerS = float64(sum.Done) / el.Seconds()
	slices.Sort(rtts)
	if len(rtts) > 0 {
		sum.P50MS = float64(rtts[len(rtts)/2].Microseconds()) / 1000
		sum.P99MS = float64(rtts[min(len(rtts)-1, len(rtts)*99/100)].Microseconds()) / 1000
	}
	enc := json.NewEncoder(stdout)
	if firstErr != nil {
		sum.Error = firstErr.Error()
		enc.Encode(sum)
		fmt.Fprintf(stderr, "%s: %v\n", prog, firstErr)
		return exitFailure
	}
	enc.Encode(sum)
	return exitOK
}

// laneSame reports whether message m carries body: the same bytes when
// both sides serialize alike, else the same canonical JSON (sorted keys)
// of the decoded values.
func laneSame(m lane.Message, body any, ser packet.Serializer) bool {
	want, err := ser.Marshal(nil, body)
	if err != nil {
		return false
	}
	if bytes.Equal(m.Raw, want) {
		return true
	}
	var wm map[string]any
	if err := ser.Unmarshal(want, &wm); err != nil {
		return false
	}
	a, _ := json.Marshal(wm)
	b, _ := json.Marshal(m.Body)
	return bytes.Equal(a, b)
}
