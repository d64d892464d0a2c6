package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/metrics"
	"github.com/raet-go/raet/road"
)

// observeFlags are the flags of every long-running command that make it
// observable: --metrics ADDR serves /metrics, /healthz and /status (which
// raet status reads); --txlog FILE writes the road's transaction log.
type observeFlags struct {
	addr, txlog string
	remotes     int
}

func (f *observeFlags) register(fs *flag.FlagSet) {
	f.registerMetrics(fs)
	fs.IntVar(&f.remotes, "metrics-remotes", 16, "per-remote series (srtt, rttvar, retransmits) on /metrics for at most `N` remotes, those with the most retransmissions")
	fs.StringVar(&f.txlog, "txlog", "", "write the road's transaction log, JSON lines (docs/txlog.md), to `file`")
}

// registerMetrics registers --metrics alone (a lane has no transactions
// to log and no remotes' round trips).
func (f *observeFlags) registerMetrics(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "metrics", "", "serve /metrics (Prometheus), /healthz and /status (JSON, for raet status) on this `host:port`")
}

// tapRoad adds the transaction log of --txlog to cfg.Tap, after a tap
// already there (a capture) and under one lock, so that the log and the
// capture have the datagrams in one order. The returned end closes the
// log; call it after the stack is closed.
func (f *observeFlags) tapRoad(cfg *road.Config) (end func() error, err error) {
	if f.txlog == "" {
		return func() error { return nil }, nil
	}
	file, err := os.Create(f.txlog)
	if err != nil {
		return nil, fmt.Errorf("--txlog: %w", err)
	}
	tl := dissect.NewTxLogTap(file, nil)
	prev := cfg.Tap
	var mu sync.Mutex
	cfg.Tap = func(p road.TapPacket) {
		mu.Lock()
		defer mu.Unlock()
		if prev != nil {
			prev(p)
		}
		tl.Tap(dissect.RoadPacket(p))
	}
	return func() error {
		if err := errors.Join(tl.Close(), file.Close()); err != nil {
			return fmt.Errorf("--txlog: %w", err)
		}
		return nil
	}, nil
}

// observed is what a command runs: a road stack, a lane stack, a bus
// node, any of them nil.
type observed struct {
	road   *road.Stack
	lane   *lane.Stack
	node   *bus.Node
	groups []string // queue groups the command knows of (bus)
}

// start serves --metrics, if given, until the returned stop.
func (f *observeFlags) start(o observed, stderr io.Writer) (stop func(), err error) {
	if f.addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics: %w", err)
	}
	srv := &http.Server{Handler: o.handler(f.remotes, time.Now()), ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stderr, "--metrics:", err)
		}
	}()
	fmt.Fprintf(stderr, "metrics, health and status on http://%s/metrics, /healthz, /status\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	}, nil
}

// handler serves /metrics, /healthz and /status for o.
func (o observed) handler(topRemotes int, started time.Time) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if o.road != nil {
		reg.MustRegister(metrics.NewRoad(o.road, &metrics.RoadOptions{TopRemotes: topRemotes}))
	}
	if o.lane != nil {
		reg.MustRegister(metrics.NewLane(o.lane))
	}
	if o.node != nil {
		reg.MustRegister(metrics.NewBus(o.node))
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		if err := o.health(r.Context()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		st, err := o.status(r.Context(), started)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
	})
	return mux
}

// health is nil while every stack runs and the road's goroutine answers.
func (o observed) health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if o.road != nil {
		if _, err := o.road.Counters(ctx); err != nil {
			return fmt.Errorf("road: %w", err)
		}
	}
	if o.lane != nil {
		select {
		case <-o.lane.Done():
			return fmt.Errorf("lane: stopped: %v", o.lane.Err())
		default:
		}
	}
	return nil
}

// statusDoc is /status.
type statusDoc struct {
	Name    string       `json:"name"`
	Addr    string       `json:"addr,omitempty"` // road address or lane socket
	UptimeS float64      `json:"uptime_s"`
	Remotes []remoteLine `json:"remotes,omitempty"`
	Road    *roadStatus  `json:"road,omitempty"`
	Lane    *laneStatus  `json:"lane,omitempty"`
	Bus     *busStatus   `json:"bus,omitempty"`
}

type remoteLine struct {
	Name         string  `json:"name"`
	State        string  `json:"state"` // metrics.RemoteState
	Addr         string  `json:"addr"`
	SRTTms       float64 `json:"srtt_ms"`
	RTTVarms     float64 `json:"rttvar_ms"`
	LastHeard    string  `json:"last_heard,omitempty"`
	Transactions int     `json:"transactions"` // under way
	Retransmits  uint64  `json:"retransmits"`
	Waiting      int     `json:"waiting"`
}

type roadStatus struct {
	PacketsIn      map[string]uint64 `json:"packets_in"`
	PacketsOut     map[string]uint64 `json:"packets_out"`
	Drops          map[string]uint64 `json:"drops,omitempty"`
	Events         map[string]uint64 `json:"events,omitempty"`
	Retransmits    uint64            `json:"retransmits"`
	MessagesIn     uint64            `json:"messages_in"`
	MessagesDone   uint64            `json:"messages_done"`
	MessagesFailed uint64            `json:"messages_failed"`
	Reassembling   int               `json:"reassembling"`
	ReceiveQueue   int               `json:"receive_queue"`
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}

type laneStatus struct {
	Yards    []string      `json:"yards"`
	Counters lane.Counters `json:"counters"`
}

type busStatus struct {
	Peers         []busPeer             `json:"peers"`
	Subscriptions []bus.SubscriberStats `json:"subscriptions"`
	Groups        map[string][]string   `json:"groups,omitempty"`
	Stats         bus.Stats             `json:"stats"`
}

type busPeer struct {
	Name  string  `json:"name"`
	Up    bool    `json:"up"`
	RTTms float64 `json:"rtt_ms,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// status gathers /status.
func (o observed) status(ctx context.Context, started time.Time) (*statusDoc, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st := &statusDoc{UptimeS: time.Since(started).Round(time.Millisecond).Seconds()}
	if s := o.road; s != nil {
		st.Name, st.Addr = s.Name(), s.Addr().String()
		rs, err := s.Remotes(ctx)
		if err != nil {
			return nil, err
		}
		c, err := s.Counters(ctx)
		if err != nil {
			return nil, err
		}
		st.Road = &roadStatus{PacketsIn: c.PacketsIn, PacketsOut: c.PacketsOut, Drops: c.Drops, Events: c.Events,
			Retransmits: c.Retransmits, MessagesIn: c.MessagesIn, MessagesDone: c.MessagesOut, MessagesFailed: c.MessageFails,
			Reassembling: c.Reassembling, ReceiveQueue: c.ReceiveQueue}
		slices.SortFunc(rs, func(a, b road.Remote) int { return strings.Compare(a.Name, b.Name) })
		for _, r := range rs {
			l := remoteLine{Name: r.Name, State: metrics.RemoteState(r), Addr: r.Addr.String(), SRTTms: ms(r.SRTT),
				RTTVarms: ms(r.RTTVar), Transactions: r.Transactions,
				Retransmits: r.Retransmits, Waiting: r.Waiting}
			if !r.LastHeard.IsZero() {
				l.LastHeard = r.LastHeard.UTC().Format(time.RFC3339Nano)
			}
			st.Remotes = append(st.Remotes, l)
		}
	}
	if s := o.lane; s != nil {
		st.Name, st.Addr = s.Name(), s.Path()
		yards := s.Yards()
		slices.Sort(yards)
		st.Lane = &laneStatus{Yards: yards, Counters: s.Counters()}
	}
	if n := o.node; n != nil {
		st.Name = n.Name()
		b := &busStatus{Stats: n.Stats(), Subscriptions: n.Subscribers()}
		for name, up := range n.Peers() {
			p := busPeer{Name: name, Up: up}
			if rtt, ok := n.RTT(name); ok {
				p.RTTms = ms(rtt.Avg)
			}
			b.Peers = append(b.Peers, p)
		}
		slices.SortFunc(b.Peers, func(a, b busPeer) int { return strings.Compare(a.Name, b.Name) })
		slices.SortFunc(b.Subscriptions, func(a, b bus.SubscriberStats) int {
			return cmp.Or(strings.Compare(a.Peer, b.Peer), cmp.Compare(a.ID, b.ID))
		})
		for _, g := range o.groups {
			if b.Groups == nil {
				b.Groups = map[string][]string{}
			}
			b.Groups[g] = n.GroupMembers(g)
		}
		st.Bus = b
	}
	return st, nil
}

var statusHelp = help{
	usage: `raet status [--json] [--timeout DUR] HOST:PORT`,
	about: `Ask a running raet command for its status (it was started with --metrics
HOST:PORT) and print it for a person: the estate, its remotes (state,
address, round-trip estimate, last heard, transactions under way and
messages waiting, retransmissions), the road's counters (messages received,
done, failed), and for a bus its peers, subscriptions and queue groups.
--json prints /status as it comes. /metrics on the same address is for
Prometheus (docs/metrics.md), /healthz for a health check.`,
	example: `raet serve --main --metrics 127.0.0.1:9530 &
raet status 127.0.0.1:9530`,
}

func runStatus(args []string, stdout, stderr io.Writer) int {
	const prog = "raet status"
	fs := newFlags(prog, stderr)
	asJSON := fs.Bool("json", false, "print /status as JSON")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	if code, ok := parseFlags(fs, statusHelp, args, 1, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(stderr, prog, "give the HOST:PORT of a command's --metrics")
	}
	addr := fs.Arg(0)
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	client := &http.Client{Timeout: *timeout}
	resp, err := client.Get(strings.TrimSuffix(addr, "/") + "/status")
	if err != nil {
		fmt.Fprintln(stderr, "raet status:", err)
		return exitFailure
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "raet status: %s: %s %v\n", addr, resp.Status, cmp.Or(err, errors.New(strings.TrimSpace(string(body)))))
		return exitFailure
	}
	if *asJSON {
		stdout.Write(body)
		return exitOK
	}
	var st statusDoc
	if err := json.Unmarshal(body, &st); err != nil {
		fmt.Fprintln(stderr, "raet status: /status:", err)
		return exitFailure
	}
	printStatus(stdout, &st)
	return exitOK
}

// printStatus writes st as tables for a person.
func printStatus(w io.Writer, st *statusDoc) {
	fmt.Fprintf(w, "%s  %s  up %s\n", st.Name, st.Addr, time.Duration(st.UptimeS*float64(time.Second)).Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if c := st.Road; c != nil {
		fmt.Fprintf(w, "road: packets in %d, out %d, retransmitted %d, dropped %d; messages received %d, done %d, failed %d\n",
			sum(c.PacketsIn), sum(c.PacketsOut), c.Retransmits, sum(c.Drops), c.MessagesIn, c.MessagesDone, c.MessagesFailed)
	}
	if len(st.Remotes) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(tw, "REMOTE\tSTATE\tADDRESS\tSRTT\tLAST HEARD\tUNDER WAY\tWAITING\tRETRANS")
		now := time.Now()
		for _, r := range st.Remotes {
			heard := "-"
			if t, err := time.Parse(time.RFC3339Nano, r.LastHeard); err == nil {
				heard = now.Sub(t).Round(time.Millisecond).String() + " ago"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.1fms\t%s\t%d\t%d\t%d\n", r.Name, r.State, r.Addr, r.SRTTms, heard,
				r.Transactions, r.Waiting, r.Retransmits)
		}
		tw.Flush()
	}
	if l := st.Lane; l != nil {
		fmt.Fprintf(w, "lane: yards %s; pages in %d, out %d; messages in %d, out %d; dropped %d\n",
			strings.Join(l.Yards, " "), l.Counters.PagesIn, l.Counters.PagesOut, l.Counters.MessagesIn, l.Counters.MessagesOut, l.Counters.Dropped())
	}
	if b := st.Bus; b != nil {
		s := b.Stats
		fmt.Fprintf(w, "\nbus: published %d, subscriptions %d, HWM drops %d; requests %d, replies %d, timeouts %d; jobs pushed %d, done %d, waiting %d\n",
			s.Publisher.Published, s.Publisher.Subscriptions, s.Publisher.Drops, s.Requester.Requests, s.Requester.Replies,
			s.Requester.Timeouts, s.Pusher.Pushed, s.Pusher.Done, s.Pusher.Waiting)
		if len(b.Peers) > 0 {
			fmt.Fprintln(tw, "PEER\tUP\tRTT")
			for _, p := range b.Peers {
				fmt.Fprintf(tw, "%s\t%v\t%.1fms\n", p.Name, p.Up, p.RTTms)
			}
			tw.Flush()
		}
		if len(b.Subscriptions) > 0 {
			fmt.Fprintln(tw, "SUBSCRIBER\tID\tFILTERS\tQUEUED\tSENT\tDROPS")
			for _, sub := range b.Subscriptions {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\n", sub.Peer, sub.ID, strings.Join(sub.Filters, ","), sub.Queued, sub.Sent, sum(sub.Drops))
			}
			tw.Flush()
		}
		groups := make([]string, 0, len(b.Groups))
		for g := range b.Groups {
			groups = append(groups, g)
		}
		slices.Sort(groups)
		for _, g := range groups {
			fmt.Fprintf(w, "group %s: %s\n", g, cmp.Or(strings.Join(b.Groups[g], " "), "no other member known"))
		}
	}
}
