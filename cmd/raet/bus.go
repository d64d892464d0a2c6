package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// busAbout ends the about text of every bus command: the transport flags.
const busAbout = `
The transport: --over road (UDP, the default: --listen, --keep, --main,
--auto, and --join HOST:PORT to join an estate first, which is then the
default peer of sub, req and pull) or --over lane (Unix datagram sockets:
--dir, --lane); --name names this estate or yard. The first line out is
{"ready":true,"name":...} with the road address or the lane socket.
--metrics HOST:PORT serves /metrics, /healthz and /status (raet status);
--txlog FILE writes the road's transaction log (docs/txlog.md).

As raet serve: --pcap FILE writes the traffic for raetdump -r, --keylog
FILE the road's session keys for raetdump -keylog, --aead picks the road's
coat, and the plugin flags pick a serializer, a queue or a coat.`

// busHelp is a bus command's help: its usage, about with the transport
// appended, and example.
func busHelp(usage, about, example string) help {
	return help{usage: usage, about: strings.TrimSpace(about) + "\n" + busAbout, example: example}
}

// busFlags are the transport flags of the bus commands.
type busFlags struct {
	over, name, listen, keepDir, auto, join, dir, laneName string
	main, verbose, sharedDir                               bool
	forDur                                                 time.Duration
	obs                                                    observeFlags
	groups                                                 []string // queue groups for /status
	run                                                    runFlags
}

func (f *busFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.over, "over", "road", "transport: road or lane")
	fs.StringVar(&f.name, "name", "", "estate or yard name")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:7530", "road: UDP address to listen and send on")
	fs.StringVar(&f.keepDir, "keep", "", "road: keep directory; empty: keys in memory only")
	fs.StringVar(&f.auto, "auto", "always", "road: key acceptance: always, once or never")
	fs.StringVar(&f.join, "join", "", "road: join this estate (host:port) first")
	fs.BoolVar(&f.main, "main", false, "road: be a main estate (accept joins)")
	fs.StringVar(&f.dir, "dir", "", "lane: socket directory")
	fs.BoolVar(&f.sharedDir, "allow-shared-dir", false, "lane: use a --dir others can write (they could bind a yard's name and receive its pages)")
	fs.StringVar(&f.laneName, "lane", lane.DefaultLane, "lane: lane name")
	fs.BoolVar(&f.verbose, "v", false, "log more (to stderr)")
	fs.DurationVar(&f.forDur, "for", 0, "stop after this long (0: until done, SIGINT or SIGTERM)")
	f.run.register(fs, scopeRoad|scopeLane|scopePlugins)
	f.obs.register(fs)
}

// busRun is a started transport and node.
type busRun struct {
	node   *bus.Node
	joined string // the road estate joined, if any
	ctx    context.Context
	stop   func()
	out    *json.Encoder
	outMu  sync.Mutex
}

func (r *busRun) emit(v any) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	r.out.Encode(v)
}

// start opens the transport, starts a node and prints the ready line.
func (f *busFlags) start(prog string, cfg *bus.Config, stdout, stderr io.Writer) (*busRun, int) {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if f.forDur > 0 {
		var c2 context.CancelFunc
		ctx, c2 = context.WithTimeout(ctx, f.forDur)
		prev := cancel
		cancel = func() { c2(); prev() }
	}
	r := &busRun{ctx: ctx, out: json.NewEncoder(stdout)}
	var tr bus.Transport
	var closers []func()
	seen := observed{groups: f.groups}
	ready := map[string]any{"ready": true}
	fail := func(code int, err error) (*busRun, int) {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		cancel()
		return nil, code
	}
	if err := f.run.check(); err != nil {
		return fail(exitUsage, err)
	}
	if err := f.run.open(); err != nil {
		return fail(exitSetup, err)
	}
	// The capture and the plugins end after the stack (closers run last
	// first).
	closers = append(closers, func() {
		if err := f.run.close(); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		}
	})
	switch f.over {
	case "road":
		auto, err := keep.ParseAutoMode(f.auto)
		if err != nil {
			return fail(exitUsage, err)
		}
		rc := &road.Config{Name: f.name, Main: f.main, Listen: f.listen, KeepDir: f.keepDir, Auto: auto, Logger: log}
		if err := f.run.road(context.Background(), rc, true); err != nil {
			return fail(exitSetup, err)
		}
		endTxLog, err := f.obs.tapRoad(rc)
		if err != nil {
			return fail(exitSetup, err)
		}
		closers = append(closers, func() { endTxLog() })
		s, err := road.New(rc)
		if err != nil {
			return fail(exitSetup, err)
		}
		seen.road = s
		if err := s.Start(); err != nil {
			return fail(exitSetup, err)
		}
		closers = append(closers, func() { s.Close() })
		if f.join != "" {
			jctx, jcancel := context.WithTimeout(ctx, 30*time.Second)
			rem, err := s.Join(jctx, f.join)
			jcancel()
			if err != nil {
				return fail(exitSetup, fmt.Errorf("join %s: %w", f.join, err))
			}
			r.joined = rem.Name
			ready["joined"] = rem.Name
		}
		rt := bus.NewRoad(s)
		closers = append(closers, func() { rt.Close() })
		tr = rt
		ready["addr"] = s.Addr().String()
	case "lane":
		cfg := &lane.Config{Dir: f.dir, Lane: f.laneName, Name: f.name, Logger: log, AllowSharedDir: f.sharedDir}
		if err := f.run.lane(context.Background(), cfg); err != nil {
			return fail(exitSetup, err)
		}
		s, err := lane.New(cfg)
		if err != nil {
			return fail(exitUsage, err)
		}
		if err := s.Start(); err != nil {
			return fail(exitSetup, err)
		}
		closers = append(closers, func() { s.Close() })
		seen.lane = s
		lt := bus.NewLane(s)
		closers = append(closers, func() { lt.Close() })
		tr = lt
		ready["path"] = s.Path()
	default:
		return fail(exitUsage, fmt.Errorf("--over %q: want road or lane", f.over))
	}
	if cfg == nil {
		cfg = &bus.Config{}
	}
	cfg.Logger = log
	n, err := bus.New(tr, cfg)
	if err != nil {
		return fail(exitSetup, err)
	}
	r.node = n
	seen.node = n
	stopObs, err := f.obs.start(seen, stderr)
	if err != nil {
		n.Close()
		return fail(exitSetup, err)
	}
	r.stop = func() {
		stopObs()
		n.Close()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		cancel()
	}
	ready["name"] = tr.Name()
	r.emit(ready)
	return r, exitOK
}

// until polls cond until it holds or the run ends.
func (r *busRun) until(cond func() bool) {
	for r.ctx.Err() == nil && !cond() {
		time.Sleep(20 * time.Millisecond)
	}
}

// peerOr returns p, or the estate joined when p is empty.
func (r *busRun) peerOr(p string) string {
	if p == "" {
		return r.joined
	}
	return p
}

// parseObject parses a JSON object as the stacks' JSON body does: integers
// stay integers (int64), as a reference estate would send them.
func parseObject(b []byte) (map[string]any, error) {
	var m map[string]any
	if err := (packet.JSONBody{}).Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// jsonLines calls fn with the JSON object of each line of in ("-": stdin).
func jsonLines(in string, fn func(v map[string]any) error) error {
	var rd io.Reader = os.Stdin
	if in != "-" {
		f, err := os.Open(in)
		if err != nil {
			return err
		}
		defer f.Close()
		rd = f
	}
	sc := bufio.NewScanner(rd)
	sc.Buffer(nil, 16<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		v, err := parseObject(b)
		if err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err := fn(v); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
	}
	return sc.Err()
}

// runCommand runs cmd (sh -c) with in as JSON on stdin and decodes its
// stdout as JSON; a failure is an error with its stderr.
func runCommand(ctx context.Context, cmd string, in any) (any, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	c.Stdin = bytes.NewReader(b)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, strings.TrimSpace(errb.String()))
	}
	var v any
	if len(bytes.TrimSpace(out.Bytes())) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		return nil, fmt.Errorf("its output is not JSON: %w", err)
	}
	return v, nil
}

var pubHelp = busHelp(`raet pub [--over road|lane] [TRANSPORT FLAGS] [--subject S] [--input FILE] [--wait-subs N] [--history N] [--durable FILE]`, `
Publishes each line of the input (default stdin), a JSON object: a body on --subject, or,
without --subject, an object {"subject":S,"body":...,"origin":O}. Prints
{"published":SEQ,"subject":S} per message and a summary at the end, once the
subscribers have everything, or at --for, SIGINT or SIGTERM:
{"summary":true,"published":N,"drops":D,"cuts":C,"ended":[{"peer":P,"reason":R,...}],...},
where ended lists the subscriptions that ended and why (unsubscribed: the
subscriber left; silent: it stopped answering; slow: it held Publish too long).`, `raet pub --main --listen 127.0.0.1:7530 --wait-subs 1 --subject orders.new < orders.jsonl`)

func runPub(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("raet pub", stderr)
	var bf busFlags
	bf.register(fs)
	subject := fs.String("subject", "", "subject of every line (else each line names its own)")
	input := fs.String("input", "-", "file of JSON lines ('-': stdin)")
	waitSubs := fs.Int("wait-subs", 0, "wait for this many subscriptions before publishing")
	history := fs.Int("history", 1000, "messages retained per subject for replay")
	durable := fs.String("durable", "", "keep the history in this bbolt file (survives restarts)")
	policies := fs.String("policies", "drop_newest,drop_oldest,cut", "the policies subscribers may have, the first for those asking another (add block to let them hold Publish)")
	if code, ok := parseFlags(fs, pubHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	cfg := &bus.Config{HistoryLast: *history}
	for _, name := range strings.Split(*policies, ",") {
		p, ok := parsePolicy(strings.TrimSpace(name))
		if !ok {
			return usageError(stderr, "raet pub", "--policies: unknown policy %q", name)
		}
		cfg.Policies = append(cfg.Policies, p)
	}
	if *durable != "" {
		h, err := bus.NewBoltHistory(*durable, *history, 0)
		if err != nil {
			fmt.Fprintln(stderr, "raet pub:", err)
			return exitSetup
		}
		cfg.History = h // the node closes it
	}
	r, code := bf.start("raet pub", cfg, stdout, stderr)
	if r == nil {
		if cfg.History != nil {
			cfg.History.Close()
		}
		return code
	}
	defer r.stop()
	r.until(func() bool { return r.node.Stats().Publisher.Subscriptions >= *waitSubs })
	var count atomic.Int64
	read := make(chan error, 1)
	go func() {
		read <- jsonLines(*input, func(v map[string]any) error {
			m := bus.Pub{Subject: *subject, Body: v}
			if *subject == "" {
				var ok bool
				if m.Subject, ok = v["subject"].(string); !ok {
					return errors.New(`without --subject a line must be {"subject":...,"body":...}`)
				}
				m.Origin, _ = v["origin"].(string)
				m.Body = v["body"]
			}
			seq, err := r.node.Publish(r.ctx, m)
			if err != nil {
				return err
			}
			count.Add(1)
			r.emit(map[string]any{"published": seq, "subject": m.Subject})
			return nil
		})
	}()
	var err error
	select { // a signal ends the run even while stdin has nothing to read
	case err = <-read:
	case <-r.ctx.Done():
	}
	interrupted := r.ctx.Err() != nil
	if err != nil && !interrupted {
		fmt.Fprintln(stderr, "raet pub:", err)
		return exitFailure
	}
	// Linger until every subscription has what it was sent.
	r.until(func() bool {
		held := 0
		for _, st := range r.node.Subscribers() {
			if st.Ended == "" {
				held += st.Queued
			}
		}
		return held == 0
	})
	r.emit(pubSummary(r.node, count.Load(), interrupted))
	return exitOK
}

// pubSummary is raet pub's last line: what it published, dropped and cut,
// and each subscription that ended, with why (unsubscribed, silent, slow,
// cut, peer gone, ...).
func pubSummary(n *bus.Node, published int64, interrupted bool) map[string]any {
	st := n.Stats().Publisher
	ended := []map[string]any{}
	for _, s := range n.Subscribers() {
		if s.Ended != "" {
			ended = append(ended, map[string]any{"peer": s.Peer, "id": s.ID, "reason": s.Ended, "sent": s.Sent})
		}
	}
	return map[string]any{"summary": true, "published": published, "subscriptions": st.Subscriptions,
		"drops": st.Drops, "cuts": st.Cuts, "ended": ended, "interrupted": interrupted}
}

var subHelp = busHelp(`raet sub [--over road|lane] [TRANSPORT FLAGS] [--from PEER] [--last N | --since-seq S [--epoch E]]
         [--policy block|drop_newest|drop_oldest|cut] [--hwm N] [--count N] FILTER...`, `
Subscribes to the publisher PEER (default: the estate joined) with subject
filters (tokens, * for one, > for the rest; flags may follow them) and
prints each delivery:
{"kind":"message","publisher":P,"subject":S,"seq":N,"epoch":E,"time":T,"origin":O,"body":...}
and {"kind":"drops"|"gap"|"cut",...} for what it missed; --since-seq N --epoch E
resume after the message printed. Stops after --count messages, at --for,
SIGINT or SIGTERM (unsubscribing), or when cut off (exit 1).`, `raet sub --listen 127.0.0.1:7531 --join 127.0.0.1:7530 --last 10 'orders.>'`)

func runSub(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("raet sub", stderr)
	var bf busFlags
	bf.register(fs)
	from := fs.String("from", "", "the publisher (default: the estate joined)")
	last := fs.Uint64("last", 0, "replay the last N retained messages first")
	sinceSeq := fs.Uint64("since-seq", 0, "replay every retained message after sequence number S")
	epoch := fs.Uint64("epoch", 0, "with --since-seq: the publisher history's epoch S counts in")
	policy := fs.String("policy", "block", "at the publisher's high-water mark: block, drop_newest, drop_oldest or cut (a publisher that does not allow it gives its default; block asks nothing)")
	hwm := fs.Int("hwm", 0, "high-water mark (0: the publisher's default)")
	count := fs.Int("count", 0, "stop after this many messages (0: never)")
	if code, ok := parseFlags(fs, subHelp, interspersed(fs, args), envelope.MaxList, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 || (*last > 0 && *sinceSeq > 0) {
		return usageError(stderr, "raet sub", "need at least one FILTER, and at most one of --last and --since-seq")
	}
	pol, ok := parsePolicy(*policy)
	if !ok {
		return usageError(stderr, "raet sub", "unknown policy %q", *policy)
	}
	r, code := bf.start("raet sub", nil, stdout, stderr)
	if r == nil {
		return code
	}
	defer r.stop()
	opt := &bus.SubOptions{Policy: pol, HWM: *hwm}
	switch {
	case *last > 0:
		opt.Replay = bus.Replay{Mode: bus.ReplayLast, N: *last}
	case *sinceSeq > 0:
		opt.Replay = bus.Replay{Mode: bus.ReplaySinceSeq, Seq: *sinceSeq, Epoch: *epoch}
	}
	peer := r.peerOr(*from)
	if peer == "" {
		return usageError(stderr, "raet sub", "need --from (or --join)")
	}
	s, err := r.node.Subscribe(peer, fs.Args(), opt)
	if err != nil {
		return usageError(stderr, "raet sub", "%v", err)
	}
	got := 0
	for {
		select {
		case <-r.ctx.Done():
			return exitOK
		case d := <-s.Messages():
			line := map[string]any{"kind": deliveryKind(d.Kind), "publisher": d.Publisher}
			if d.Kind == bus.DeliveryMessage {
				line["subject"], line["seq"], line["time"], line["body"] = d.Subject, d.Seq, d.Time.UTC().Format(time.RFC3339Nano), d.Body
				line["epoch"] = d.Epoch // with seq, what --since-seq and --epoch take to resume
				if d.Origin != "" {
					line["origin"] = d.Origin
				}
			}
			if len(d.Drops) > 0 {
				line["drops"] = d.Drops
			}
			if d.Kind == bus.DeliveryGap {
				line["missed"] = d.Missed
			}
			r.emit(line)
			if d.Kind == bus.DeliveryCut {
				fmt.Fprintln(stderr, "raet sub:", bus.ErrCut)
				return exitFailure
			}
			if d.Kind == bus.DeliveryMessage {
				if got++; *count > 0 && got >= *count {
					return exitOK
				}
			}
		}
	}
}

// interspersed puts the flags among args before the other arguments, so
// that flags may follow a FILTER (raet sub 't.>' --last 2); "--" ends the
// flags.
func interspersed(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		f := fs.Lookup(name)
		if f == nil || i+1 == len(args) {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !b.IsBoolFlag() {
			flags = append(flags, args[i+1]) // its value
			i++
		}
	}
	return append(append(flags, "--"), rest...)
}

func parsePolicy(s string) (bus.Policy, bool) {
	for _, p := range []bus.Policy{bus.Block, bus.DropNewest, bus.DropOldest, bus.Cut} {
		if p.String() == s {
			return p, true
		}
	}
	return 0, false
}

func deliveryKind(k bus.DeliveryKind) string {
	return map[bus.DeliveryKind]string{bus.DeliveryMessage: "message", bus.DeliveryDrops: "drops",
		bus.DeliveryGap: "gap", bus.DeliveryCut: "cut"}[k]
}

var reqHelp = busHelp(`raet req [--over road|lane] [TRANSPORT FLAGS] [--to PEER | --group G] --subject S [--body-json '{...}'] [--count N] [--timeout DUR]`, `
Sends --count requests and prints each reply {"from":P,"rtt_us":N,"body":...}.`, `raet req --listen 127.0.0.1:7532 --join 127.0.0.1:7530 --subject svc.echo --body-json '{"x":1}'`)

func runReq(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("raet req", stderr)
	var bf busFlags
	bf.register(fs)
	to := fs.String("to", "", "the responder (default: the estate joined)")
	group := fs.String("group", "", "send to a live member of this queue group instead")
	subject := fs.String("subject", "", "the request's subject")
	bodyJSON := fs.String("body-json", "{}", "the request's body, JSON")
	count := fs.Int("count", 1, "how many requests")
	timeout := fs.Duration("timeout", 5*time.Second, "how long each request waits for its reply")
	if code, ok := parseFlags(fs, reqHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	if *subject == "" || *count < 1 {
		return usageError(stderr, "raet req", "need --subject and --count >= 1")
	}
	body, err := parseObject([]byte(*bodyJSON))
	if err != nil {
		return usageError(stderr, "raet req", "--body-json: %v", err)
	}
	if *group != "" {
		bf.groups = []string{*group}
	}
	r, code := bf.start("raet req", nil, stdout, stderr)
	if r == nil {
		return code
	}
	defer r.stop()
	peer := r.peerOr(*to)
	if peer == "" && *group == "" {
		return usageError(stderr, "raet req", "need --to, --group or --join")
	}
	if *group != "" { // learn the group's members first
		r.until(func() bool { return len(r.node.GroupMembers(*group)) > 0 })
	}
	for range *count {
		ctx, cancel := context.WithTimeout(r.ctx, *timeout)
		var rep bus.Reply
		var err error
		if *group != "" {
			rep, err = r.node.RequestGroup(ctx, *group, *subject, body)
		} else {
			rep, err = r.node.Request(ctx, peer, *subject, body)
		}
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "raet req:", err)
			return exitFailure
		}
		r.emit(map[string]any{"from": rep.From, "rtt_us": rep.RTT.Microseconds(), "body": rep.Body})
	}
	return exitOK
}

var repHelp = busHelp(`raet rep [--over road|lane] [TRANSPORT FLAGS] [--group G] [--exec CMD] [--concurrency N] [--count N] FILTER`, `
Answers requests whose subject matches FILTER: with the request's body (an
echo), or with the JSON output of CMD (sh -c), which reads
{"from":P,"subject":S,"body":...} on stdin; a failing CMD is an error reply.
Prints {"request":S,"from":P} per request; stops after --count or at --for.`, `raet rep --main --listen 127.0.0.1:7530 --group echoers 'svc.>'`)

func runRep(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("raet rep", stderr)
	var bf busFlags
	bf.register(fs)
	group := fs.String("group", "", "serve in this queue group")
	command := fs.String("exec", "", "answer with this command's output (default: echo the body)")
	conc := fs.Int("concurrency", 16, "requests handled at once")
	count := fs.Int("count", 0, "stop after this many requests (0: never)")
	if code, ok := parseFlags(fs, repHelp, interspersed(fs, args), 1, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, "raet rep", "need one FILTER")
	}
	if *group != "" {
		bf.groups = []string{*group}
	}
	r, code := bf.start("raet rep", nil, stdout, stderr)
	if r == nil {
		return code
	}
	defer r.stop()
	served := newAnswered(*count)
	h := func(ctx context.Context, q *bus.Request) (any, error) {
		r.emit(map[string]any{"request": q.Subject, "from": q.From})
		defer served.one()
		return answer(ctx, *command, q.Body, map[string]any{"from": q.From, "subject": q.Subject, "body": q.Body})
	}
	if _, err := r.node.Serve(fs.Arg(0), h, &bus.ServeOptions{Group: *group, Concurrency: *conc}); err != nil {
		return usageError(stderr, "raet rep", "%v", err)
	}
	served.wait(r.ctx)
	return exitOK
}

// answered counts what rep or pull answered, up to count (0: no limit).
type answered struct {
	count int
	mu    sync.Mutex
	n     int
	wg    sync.WaitGroup
}

func newAnswered(count int) *answered {
	a := &answered{count: count}
	a.wg.Add(max(count, 1))
	return a
}

// one counts one answered.
func (a *answered) one() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n++; a.count > 0 && a.n <= a.count {
		a.wg.Done()
	}
}

// wait waits for count answered, or for ctx without a count.
func (a *answered) wait(ctx context.Context) {
	waitOr(ctx, a.count > 0, &a.wg)
}

// answer is the answer of rep and pull: body (an echo) without a command,
// else the output of command (sh -c) reading in.
func answer(ctx context.Context, command string, body any, in map[string]any) (any, error) {
	if command == "" {
		return body, nil
	}
	return runCommand(ctx, command, in)
}

// waitOr waits for wg when counting, else for ctx.
func waitOr(ctx context.Context, counting bool, wg *sync.WaitGroup) {
	if !counting {
		<-ctx.Done()
		return
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		time.Sleep(50 * time.Millisecond) // let the last answer go out
	case <-ctx.Done():
	}
}

var pushHelp = busHelp(`raet push [--over road|lane] [TRANSPORT FLAGS] --subject S [--input FILE] [--wait-pullers N] [--job-timeout DUR]`, `
Pushes each line of the input (default stdin), a JSON object, as a job to the pullers
that pull from this peer, and prints each result once:
{"id":N,"puller":P,"attempts":A,"body":...} (or "error"). Exits when all are
done (1 if a job failed).`, `raet push --main --listen 127.0.0.1:7530 --wait-pullers 2 --subject resize < jobs.jsonl`)

func runPush(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("raet push", stderr)
	var bf busFlags
	bf.register(fs)
	subject := fs.String("subject", "", "the jobs' subject")
	input := fs.String("input", "-", "file of JSON lines ('-': stdin)")
	waitPullers := fs.Int("wait-pullers", 1, "wait until this many peers are known before pushing")
	jobTimeout := fs.Duration("job-timeout", 30*time.Second, "hand a job not done this long to another puller")
	if code, ok := parseFlags(fs, pushHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	if *subject == "" {
		return usageError(stderr, "raet push", "need --subject")
	}
	r, code := bf.start("raet push", &bus.Config{JobTimeout: *jobTimeout}, stdout, stderr)
	if r == nil {
		return code
	}
	defer r.stop()
	r.until(func() bool { return len(r.node.Peers()) >= *waitPullers })
	var pushed int
	results := make(chan int, 1)
	failed := false
	var mu sync.Mutex
	total := -1
	go func() {
		got := 0
		for {
			mu.Lock()
			done := total >= 0 && got >= total
			mu.Unlock()
			if done {
				results <- got
				return
			}
			select {
			case res := <-r.node.Results():
				got++
				line := map[string]any{"id": res.ID, "puller": res.Puller, "attempts": res.Attempts}
				if res.Err != "" {
					line["error"] = res.Err
					mu.Lock()
					failed = true
					mu.Unlock()
				} else {
					line["body"] = res.Body
				}
				r.emit(line)
			case <-time.After(20 * time.Millisecond):
			case <-r.ctx.Done():
				results <- got
				return
			}
		}
	}()
	err := jsonLines(*input, func(v map[string]any) error {
		_, err := r.node.Push(r.ctx, *subject, v)
		pushed++
		return err
	})
	mu.Lock()
	total = pushed
	mu.Unlock()
	got := <-results
	if err != nil {
		fmt.Fprintln(stderr, "raet push:", err)
		return exitFailure
	}
	mu.Lock()
	defer mu.Unlock()
	if got < pushed || failed {
		fmt.Fprintf(stderr, "raet push: %d of %d jobs done, failed: %v\n", got, pushed, failed)
		return exitFailure
	}
	return exitOK
}

var pullHelp = busHelp(`raet pull [--over road|lane] [TRANSPORT FLAGS] [--from PEER] [--credit N] [--exec CMD] [--count N]`, `
Takes jobs from the pusher PEER (default: the estate joined), --credit at once,
and answers each with its body (an echo) or with the JSON output of CMD (sh -c),
which reads {"id":N,"subject":S,"body":...} on stdin; a failing CMD fails the
job. Prints {"job":N,"from":P,"subject":S} per job; stops after --count or at --for.`, `raet pull --listen 127.0.0.1:7533 --join 127.0.0.1:7530 --credit 4 --exec 'jq .body'`)

func runPull(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("raet pull", stderr)
	var bf busFlags
	bf.register(fs)
	from := fs.String("from", "", "the pusher (default: the estate joined)")
	credit := fs.Int("credit", 1, "jobs taken at once")
	command := fs.String("exec", "", "answer with this command's output (default: echo the body)")
	count := fs.Int("count", 0, "stop after this many jobs (0: never)")
	if code, ok := parseFlags(fs, pullHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	r, code := bf.start("raet pull", nil, stdout, stderr)
	if r == nil {
		return code
	}
	defer r.stop()
	peer := r.peerOr(*from)
	if peer == "" {
		return usageError(stderr, "raet pull", "need --from (or --join)")
	}
	done := newAnswered(*count)
	h := func(ctx context.Context, j *bus.Job) (any, error) {
		r.emit(map[string]any{"job": j.ID, "from": j.From, "subject": j.Subject})
		defer done.one()
		return answer(ctx, *command, j.Body, map[string]any{"id": j.ID, "subject": j.Subject, "body": j.Body})
	}
	if _, err := r.node.Pull([]string{peer}, *credit, h); err != nil {
		fmt.Fprintln(stderr, "raet pull:", err)
		return exitFailure
	}
	done.wait(r.ctx)
	return exitOK
}
