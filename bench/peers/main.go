// Command peers measures, with one harness and in one run over loopback,
// raw UDP, kcp-go/v5 with AES-GCM, quic-go (one stream), ZeroMQ (libzmq
// through github.com/pebbe/zmq4), NATS core (a nats-server started in this
// process) and the raet-go road stack with both profiles, and prints a
// table per mode with ratios against kcp-go.
//
// It is a module of its own so that the main module gains no dependencies
// (ZeroMQ needs cgo and libzmq: `make bench-peers` installs libzmq3-dev):
//
//	cd bench/peers && go run . [-sizes 64,1024,16384,262144] [-modes windowed,one-way,fanout]
//	                           [-fanout-sizes 64,1024] [-subs 1,10,100]
//	                           [-window 16] [-oneway-window 1024] [-dur 1s] [-runs 3]
//	                           [-peers udp,raet fast] [-raet-fast-mps 8192] [-json] [-cpuprofile FILE]
//	                           [-trace FILE]
//
// Windowed mode: every peer carries each message from a client to a server,
// and the server answers with a small ack (for the road stack: Send until
// the receiver's done; ZeroMQ: REQ/REP; NATS: a request with a reply
// subject). -window messages are in flight; msgs/s counts acked messages,
// RTT is from sending a message to its ack; "idle p50" is the RTT p50 of a
// second, shorter run (-dur/4) with one message in flight. Raw UDP sends a
// message over 65000 bytes as several datagrams, each acked.
//
// One-way mode: a sender streams messages with up to -oneway-window in
// flight (sent, not yet counted by the receiver) and nothing comes back
// (ZeroMQ: PUSH/PULL; NATS: publish to a subscriber; the road stack: Send,
// not waiting for its done). The receiver checks every message (the next
// id, the payload sent) and msgs/s is what it counted per second. Raw UDP
// may lose datagrams; its losses are counted apart, for every other peer a
// lost message is an error.
//
// Fan-out mode (patterns.go): one publisher, -subs subscribers, NATS core,
// ZeroMQ PUB/SUB, the road stack's own Send to each subscriber and the bus
// pub/sub of package bus; msgs/s counts deliveries. The windowed mode has
// the bus's request/reply as a peer too ("raet bus req/rep").
//
// The windowed mode has two rows beside the reference profile's, its
// crypto ceiling (ceiling.go): "raet reference ceiling" signs and verifies,
// on every core and with no I/O, the very datagrams one message of that
// size makes (captured from a real exchange), with the verifier the road
// uses; "raet ref ceiling voi batch" does the same with curve25519-voi's
// batch verifier, which the road does not use. Column ×ceiling gives the
// reference row's msgs/s over its ceiling's (and the batch ceiling's over
// the road verifier's), the median of the ratios of each run (the peers
// take turns in every run); pkts/msg is how many datagrams a message took.
// A message's datagrams cost kernel and Go I/O that no stack avoids, so
// column ×ceiling+I/O gives the reference row's msgs/s over the bound with
// that floor added: the ceiling's CPU per message plus its pkts/msg times
// the CPU of one datagram of the raw udp row (its CPU per message over its
// 2 datagrams), measured in the same run, on the cores the ceiling used.
//
// The fast profile's rows send the payload as bytes (body kind raw), as
// every other peer does; "raet fast json" sends it as a mapping
// ({"data": payload}, JSON), as "raet reference" does, to show what the
// encoding and decoding cost (harness.go says why).
//
// Every mode reports CPU µs per message: the process's CPU time (user and
// system, every thread: both ends, and the NATS server) over the messages
// counted. With -runs N each figure is the median over N runs.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	sizes := flag.String("sizes", "64,1024,16384,262144", "message sizes in bytes")
	modes := flag.String("modes", modeWindowed+","+modeOneWay, "modes to run: "+modeWindowed+", "+modeOneWay+", "+modeFanout)
	fanSizes := flag.String("fanout-sizes", "64,1024", "message sizes of the fan-out mode")
	subs := flag.String("subs", "1,10,100", "subscriber counts of the fan-out mode")
	window := flag.Int("window", 16, "messages in flight, windowed mode")
	owWindow := flag.Int("oneway-window", 1024, "messages in flight, one-way mode")
	dur := flag.Duration("dur", time.Second, "sending time per peer and size")
	runs := flag.Int("runs", 3, "runs; the table shows medians")
	only := flag.String("peers", "", "comma-separated subset of peers (names as in the table, e.g. udp,raet fast)")
	fastMPS := flag.Int("raet-fast-mps", 0, "also measure the fast profile with this packet size (loopback takes e.g. 8192)")
	asJSON := flag.Bool("json", false, "print every measurement as a JSON line too")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	traceFile := flag.String("trace", "", "write an execution trace of the whole run to this file (go tool trace)")
	linkFile := flag.String("link", "", "run every peer over an emulated link: a netsim scenario file (needs root; link.go)")
	netem := flag.String("netem", "raet-netem", "-link: the raet-netem command")
	bulk := flag.String("bulk", "", "-link: run a TCP bulk flow a to b beside every row with this congestion control (e.g. cubic)")
	flag.Parse()
	if *linkFile != "" {
		ran, code, err := overLink(*netem, *linkFile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "peers: link: %v\n", err)
			os.Exit(2)
		}
		if ran {
			os.Exit(code)
		}
		link.bulk = *bulk
	}
	if *traceFile != "" {
		f, err := os.Create(*traceFile)
		if err == nil {
			err = trace.Start(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "peers: trace: %v\n", err)
			os.Exit(2)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "peers: cpu profile: %v\n", err)
			os.Exit(2)
		}
	}
	sz, fsz, nsubs := ints(*sizes, 0), ints(*fanSizes, 0), ints(*subs, 1)
	ps := selectPeers(*only, *fastMPS)
	var ms []string
	for f := range strings.SplitSeq(*modes, ",") {
		f = strings.TrimSpace(f)
		if f != modeWindowed && f != modeOneWay && f != modeFanout || (f == modeFanout && link.scenario != nil) {
			fmt.Fprintf(os.Stderr, "peers: bad mode %q\n", f)
			os.Exit(2)
		}
		ms = append(ms, f)
	}
	if (len(ps) == 0 && len(selectFanPeers(*only)) == 0) || *window < 1 || *owWindow < 1 || *runs < 1 {
		fmt.Fprintln(os.Stderr, "peers: nothing to run")
		os.Exit(2)
	}
	var log io.Writer
	if *asJSON {
		log = os.Stdout
	}
	failed := false
	for i, m := range ms {
		if i > 0 {
			fmt.Println()
		}
		w := *window
		if m == modeOneWay {
			w = *owWindow
		}
		var res []result
		if m == modeFanout {
			res = runFanout(selectFanPeers(*only), fsz, nsubs, w, *runs, *dur, log)
			printFanout(os.Stdout, res, w, *runs, *dur)
		} else {
			res = run(ps, m, sz, w, *runs, *dur, log)
			printTable(os.Stdout, res, m, w, *runs, *dur)
		}
		for _, r := range res {
			// Raw UDP does not retransmit: over a lossy link a message it
			// lost is its nature, shown in the table, not a failed run.
			if r.Peer == "udp" && link.lossy() {
				continue
			}
			failed = failed || r.Errors > 0
		}
	}
	pprof.StopCPUProfile() // a no-op without -cpuprofile
	trace.Stop()           // and without -trace
	if failed {
		os.Exit(1)
	}
}

// ints parses a comma-separated list of integers of at least least.
func ints(list string, least int) []int {
	var out []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < least {
			fmt.Fprintf(os.Stderr, "peers: bad number %q\n", f)
			os.Exit(2)
		}
		out = append(out, n)
	}
	return out
}

// selectFanPeers is selectPeers for the fan-out peers.
func selectFanPeers(only string) []fanPeer {
	all := fanPeers()
	if only == "" {
		return all
	}
	var out []fanPeer
	for f := range strings.SplitSeq(only, ",") {
		for _, p := range all {
			if strings.EqualFold(strings.TrimSpace(f), p.name) {
				out = append(out, p)
			}
		}
	}
	return out
}

func selectPeers(only string, fastMPS int) []peer {
	all := peers(fastMPS)
	if only == "" {
		return all
	}
	var out []peer
	for f := range strings.SplitSeq(only, ",") {
		for _, p := range all {
			if strings.EqualFold(strings.TrimSpace(f), p.name) {
				out = append(out, p)
			}
		}
	}
	return out
}

// run measures in mode every peer that has it at every size runs times and
// returns, per size and peer (in that order), the medians. The peers take
// turns within each run, so that a ratio between two rows compares
// measurements made at about the same time (the machine may be shared).
func run(ps []peer, mode string, sizes []int, window, runs int, dur time.Duration, log io.Writer) []result {
	var out []result
	for _, size := range sizes {
		var these []peer
		for _, p := range ps {
			if (mode == modeWindowed && p.dial == nil && p.ceiling == nil) || (mode == modeOneWay && p.oneWay == nil) {
				continue
			}
			if p.ceiling != nil && link.scenario != nil {
				continue // a crypto ceiling has no link to cross
			}
			these = append(these, p)
		}
		all := make([][]result, len(these))
		for range runs {
			round := make([]result, len(these))
			for i, p := range these {
				stop, err := startBulk()
				if err != nil {
					round[i] = result{Peer: p.name, Size: size, Mode: mode, Errors: 1, ErrorText: "bulk flow: " + err.Error()}
					continue
				}
				var r result
				switch {
				case p.ceiling != nil:
					r = p.ceiling(size, dur)
				case mode == modeOneWay:
					r = measureOneWay(p, size, bdpWindow(window, size), dur, linkTimeout())
				default:
					r = measure(p, size, window, dur, linkTimeout())
					idle := measure(p, size, 1, max(dur/4, time.Millisecond), linkTimeout())
					r.IdleP50us = idle.RTTP50us
					r.Errors += idle.Errors
					if idle.ErrorText != "" {
						r.ErrorText = "window 1: " + idle.ErrorText
					}
				}
				if r.BulkMbitPerS, err = stop(); err != nil && r.ErrorText == "" {
					r.Errors, r.ErrorText = r.Errors+1, "bulk flow: "+err.Error()
				}
				round[i] = r
			}
			ofCeiling(round)
			for i, r := range round {
				if log != nil {
					json.NewEncoder(log).Encode(r)
				}
				all[i] = append(all[i], r)
			}
		}
		for _, rs := range all {
			out = append(out, median(rs))
		}
	}
	return out
}

// ofCeiling sets, in one round of measurements, the reference profile's
// msgs/s over its crypto ceiling's and over the ceiling with the I/O floor
// added (ioBound, with the raw udp row of the round), and the batch
// ceiling's over the road verifier's ceiling.
func ofCeiling(round []result) {
	i := slices.IndexFunc(round, func(r result) bool { return r.Peer == ceilingPeer })
	if i < 0 || round[i].MsgsPerS == 0 {
		return
	}
	var bound float64
	if u := slices.IndexFunc(round, func(r result) bool { return r.Peer == udpPeer }); u >= 0 {
		bound = ioBound(round[i], round[u])
	}
	for j, r := range round {
		if r.Peer == ceilingOf || r.Peer == batchCeilingPeer {
			round[j].OfCeiling = r.MsgsPerS / round[i].MsgsPerS
		}
		if r.Peer == ceilingOf && bound > 0 {
			round[j].OfCeilingIO = r.MsgsPerS / bound
		}
	}
}

// ioBound is the msgs/s the reference profile would reach if a message
// cost the CPU of its crypto (the ceiling row c's per message) and of
// sending and receiving its datagrams (c's datagrams per message, each at
// what one datagram of the raw udp row u cost: the kernel's and Go's
// work, no protocol), on as many cores as the ceiling kept busy; 0
// without the figures. The reference row cannot pass it: its datagrams
// go through the same kernel, and its coats, heads and bodies cost more.
func ioBound(c, u result) float64 {
	if c.CPUusPerMsg <= 0 || u.CPUusPerMsg <= 0 || u.PktsPerMsg <= 0 {
		return 0
	}
	floor := c.PktsPerMsg * u.CPUusPerMsg / u.PktsPerMsg
	return c.MsgsPerS * c.CPUusPerMsg / (c.CPUusPerMsg + floor)
}

func median(rs []result) result {
	m := rs[0]
	pick := func(f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	m.MsgsPerS = pick(func(r result) float64 { return r.MsgsPerS })
	m.MBPerS = pick(func(r result) float64 { return r.MBPerS })
	m.RTTP50us = pick(func(r result) float64 { return r.RTTP50us })
	m.RTTP99us = pick(func(r result) float64 { return r.RTTP99us })
	m.RTTP999us = pick(func(r result) float64 { return r.RTTP999us })
	m.IdleP50us = pick(func(r result) float64 { return r.IdleP50us })
	m.BulkMbitPerS = pick(func(r result) float64 { return r.BulkMbitPerS })
	m.CPUusPerMsg = pick(func(r result) float64 { return r.CPUusPerMsg })
	m.PktsPerMsg = pick(func(r result) float64 { return r.PktsPerMsg })
	m.OfCeiling = pick(func(r result) float64 { return r.OfCeiling })
	m.OfCeilingIO = pick(func(r result) float64 { return r.OfCeilingIO })
	m.Count, m.Errors, m.Lost = 0, 0, 0
	for _, r := range rs {
		m.Count += r.Count
		m.Errors += r.Errors
		m.Lost += r.Lost
		if r.ErrorText != "" {
			m.ErrorText = r.ErrorText
		}
	}
	return m
}

func printTable(w io.Writer, res []result, mode string, window, runs int, dur time.Duration) {
	fmt.Fprintf(w, "%s, %s, window %d, %v per run, medians of %d runs; ratios against kcp-go aes-gcm\n", mode, linkTitle(), window, dur, runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	oneWay := mode == modeOneWay
	if link.scenario != nil {
		printLinkTable(tw, res, oneWay)
		tw.Flush()
		printErrors(w, res)
		return
	}
	if oneWay {
		fmt.Fprintln(tw, "size\tpeer\tmsgs/s\tMB/s\tCPU µs/msg\tmsgs/s ×kcp\tCPU ×kcp\tlost\terrors\t")
	} else {
		fmt.Fprintln(tw, "size\tpeer\tmsgs/s\tMB/s\tCPU µs/msg\tp50 µs\tp99 µs\tidle p50 µs\tmsgs/s ×kcp\tCPU ×kcp\tp50 ×kcp\tidle p50 ×kcp\tpkts/msg\t×ceiling\t×ceiling+I/O\terrors\t")
	}
	base := map[int]result{}
	for _, r := range res {
		if r.Peer == "kcp-go aes-gcm" {
			base[r.Size] = r
		}
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, r := range res {
		b := base[r.Size]
		if oneWay {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.2f\t%s\t%s\t%d\t%d\t\n", sizeName(r.Size), r.Peer, r.MsgsPerS, r.MBPerS,
				r.CPUusPerMsg, ratio(r.MsgsPerS, b.MsgsPerS), ratio(r.CPUusPerMsg, b.CPUusPerMsg), r.Lost, r.Errors)
			continue
		}
		// The reference profile's rows against its crypto ceiling
		// (ceiling.go): the stack's share of it, and the batch verifier's
		// ceiling over the road verifier's (medians of the ratios of each
		// run).
		ofCeiling, ofCeilingIO, pkts := "-", "-", "-"
		if r.OfCeiling > 0 {
			ofCeiling = fmt.Sprintf("%.2f", r.OfCeiling)
		}
		if r.OfCeilingIO > 0 {
			ofCeilingIO = fmt.Sprintf("%.2f", r.OfCeilingIO)
		}
		if r.PktsPerMsg > 0 {
			pkts = fmt.Sprintf("%.2f", r.PktsPerMsg)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.2f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", sizeName(r.Size), r.Peer, r.MsgsPerS, r.MBPerS,
			r.CPUusPerMsg, r.RTTP50us, r.RTTP99us, r.IdleP50us, ratio(r.MsgsPerS, b.MsgsPerS), ratio(r.CPUusPerMsg, b.CPUusPerMsg),
			ratio(r.RTTP50us, b.RTTP50us), ratio(r.IdleP50us, b.IdleP50us), pkts, ofCeiling, ofCeilingIO, r.Errors)
	}
	tw.Flush()
	printErrors(w, res)
}

func printErrors(w io.Writer, res []result) {
	for _, r := range res {
		if r.ErrorText != "" {
			fmt.Fprintf(w, "%s %s: %s\n", sizeName(r.Size), r.Peer, r.ErrorText)
		}
	}
}

// printLinkTable is the table over a link: what matters there is the
// latency's tail (in ms) and, one way, the goodput.
func printLinkTable(tw io.Writer, res []result, oneWay bool) {
	if oneWay {
		fmt.Fprintln(tw, "size\tpeer\tmsgs/s\tMbit/s\tbeside: "+link.bulk+" bulk Mbit/s\tCPU µs/msg\tlost\terrors\t")
		for _, r := range res {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t%d\t\n", sizeName(r.Size), r.Peer, r.MsgsPerS, 8*r.MBPerS,
				r.BulkMbitPerS, r.CPUusPerMsg, r.Lost, r.Errors)
		}
		return
	}
	fmt.Fprintln(tw, "size\tpeer\tmsgs/s\tp50 ms\tp99 ms\tp99.9 ms\tidle p50 ms\tpkts/msg\terrors\t")
	for _, r := range res {
		pkts := "-"
		if r.PktsPerMsg > 0 {
			pkts = fmt.Sprintf("%.2f", r.PktsPerMsg)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%d\t\n", sizeName(r.Size), r.Peer, r.MsgsPerS,
			r.RTTP50us/1e3, r.RTTP99us/1e3, r.RTTP999us/1e3, r.IdleP50us/1e3, pkts, r.Errors)
	}
}

func sizeName(n int) string {
	switch {
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d B", n)
	}
}
