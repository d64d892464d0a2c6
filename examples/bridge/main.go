// Command bridge is a road estate that carries messages between remote
// estates and the yards of its host: RAET's "one process per core, many
// tasks per process" design. The estate talks to other hosts on the road
// (UDP, encrypted); worker processes on its host are yards of a lane (Unix
// datagram sockets) and never touch the network. The bridge is both: an
// estate on the road and a yard (default "bridge") on the lane.
//
// # Addressing
//
// A message through the bridge travels in an envelope, a mapping that
// names the far end, across the bridge, and carries the message as "body":
//
//	on the road (estate <-> bridge estate):  {"yard": "worker1", "body": {...}}
//	on the lane (bridge yard <-> yard):      {"estate": "alpha", "body": {...}}
//
// From an estate to a yard: an estate (alpha) sends {"yard": "worker1",
// "body": B} to the bridge's estate; the bridge delivers {"estate":
// "alpha", "body": B} to the lane yard worker1, so the yard knows which
// estate sent B.
//
// From a yard to an estate: a yard (worker1) sends {"estate": "alpha",
// "body": B} to the bridge's yard; the bridge sends {"yard": "worker1",
// "body": B} to the estate alpha, so the estate knows which yard sent B.
//
// So a reply is the envelope sent back where it came from with a new body:
// a yard answers a message from alpha with {"estate": "alpha", "body":
// ...}, and alpha answers a message from worker1 with {"yard": "worker1",
// "body": ...}. Rules:
//
//   - The name must be a non-empty string and the body a mapping; it is
//     passed on as decoded (key order is not kept), and other keys of the
//     envelope are ignored. Anything else is dropped and counted
//     (BridgeCounters.Malformed), never answered.
//   - An estate is reachable once it has joined the bridge's estate (the
//     bridge is a main estate by default) or the bridge joined it (-join).
//     A yard is reachable at <dir>/<lane>.<yard>.uxd.
//   - What cannot be delivered (no such yard, an estate unknown or not
//     answering, a timeout) is answered with a notice to the sender, the
//     envelope with "error" instead of "body": {"yard": "ghost", "error":
//     "..."} on the road, {"estate": "nobody", "error": "..."} on the lane.
//     A notice is never forwarded or answered, so notices cannot loop.
//   - Order is kept per yard from the road and per estate from the lane:
//     each has one forwarder (BridgeConfig.Workers of them each way, with
//     bounded queues; a full queue makes the bridge stop reading, and
//     senders wait). Each forward is bounded in time
//     (BridgeConfig.LaneTimeout, RoadTimeout).
//   - The envelope names one end only: a bridge does not route to a yard
//     behind another bridge.
//
// # Use
//
//	bridge serve  [-name bridge] [-listen 127.0.0.1:7530] [-dir DIR] [-yard bridge] [-join HOST:PORT] [-pcap FILE] ...
//	bridge worker -dir DIR -name worker1
//	bridge demo   [-workers 3] [-pcap FILE]
//
// serve runs a bridge until SIGINT or SIGTERM; then it stops taking
// envelopes, passes on those it has taken (for up to 10 s) and prints its
// counters. worker runs a worker yard
// that answers every envelope with {"yard", "pid", "n", "echo"} (see
// serveWorker). demo runs it all on this host: a bridge, worker processes
// (this program again), and a remote estate alpha that sends a task to
// each worker and prints the answers, then one to a yard that does not
// exist. With -pcap, serve and demo write the bridge's road datagrams and
// lane pages to one capture (raetdump -r FILE).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/road"
)

// shutdownWait bounds how long serve, told to stop, waits for the envelopes
// it has taken to be passed on before it cancels them.
const shutdownWait = 10 * time.Second

const usage = `usage:
  bridge serve  [-name NAME] [-listen HOST:PORT] [-main=false] [-keep DIR] [-auto always|once|never]
                [-join HOST:PORT] [-dir DIR] [-lane NAME] [-yard NAME] [-workers N] [-pcap FILE] [-v]
  bridge worker -dir DIR [-lane NAME] -name YARD [-v]
  bridge demo   [-workers N] [-pcap FILE] [-v]
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run runs a subcommand and returns the exit status: 0 success, 1 failure,
// 2 usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = runServe(args[1:], stderr)
	case "worker":
		err = runWorker(args[1:], stderr)
	case "demo":
		err = runDemo(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprint(stderr, usage)
		return 2
	}
	var ue usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "bridge %s: %v\n", args[0], err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "bridge %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

type usageError struct{ error }

func newLogger(w io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelWarn
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	return nil
}

func runServe(args []string, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("bridge serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "bridge", "estate name")
	listen := fs.String("listen", "127.0.0.1:7530", "UDP address of the estate")
	isMain := fs.Bool("main", true, "be a main estate (accept joins from unknown estates)")
	keepDir := fs.String("keep", "", "keep directory of the estate; empty: keys in memory only")
	auto := fs.String("auto", "always", "key acceptance: always, once or never")
	join := fs.String("join", "", "join this estate (HOST:PORT) at start")
	dir := fs.String("dir", "", "lane socket directory (default: /var/cache/raet, else ~/.raet/uxd)")
	laneName := fs.String("lane", lane.DefaultLane, "lane name")
	yard := fs.String("yard", "bridge", "the bridge's yard name")
	workers := fs.Int("workers", DefaultWorkers, "forwarders each way")
	pcap := fs.String("pcap", "", "write the bridge's road datagrams and lane pages to this pcapng file")
	verbose := fs.Bool("v", false, "log more (to stderr)")
	if err := parse(fs, args); err != nil {
		return err
	}
	am, err := keep.ParseAutoMode(*auto)
	if err != nil {
		return usageError{err}
	}
	log := newLogger(stderr, *verbose)
	capt, err := openCapture(*pcap)
	if err != nil {
		return err
	}
	defer capt.close(&err) // last: after the stacks are closed

	rs, err := road.New(&road.Config{Name: *name, Main: *isMain, Listen: *listen, KeepDir: *keepDir,
		Auto: am, Logger: log, Tap: capt.road()})
	if err != nil {
		return err
	}
	if err := rs.Start(); err != nil {
		return err
	}
	defer rs.Close()
	ls, err := lane.New(&lane.Config{Dir: *dir, Lane: *laneName, Name: *yard, Logger: log, Tap: capt.lane()})
	if err != nil {
		return err
	}
	if err := ls.Start(); err != nil {
		return err
	}
	defer ls.Close()
	b, err := NewBridge(BridgeConfig{Road: rs, Lane: ls, Workers: *workers, Logger: log})
	if err != nil {
		return usageError{err}
	}
	if err := b.Start(); err != nil {
		return err
	}
	defer b.Close() // first: the stacks close after it

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *join != "" {
		r, err := rs.Join(ctx, *join)
		if err != nil {
			return fmt.Errorf("join %s: %w", *join, err)
		}
		log.Info("joined", "estate", r.Name, "addr", r.Addr)
	}
	fmt.Fprintf(stderr, "bridge serve: estate %s on %s, yard %s\n", rs.Name(), rs.Addr(), ls.Path())
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := b.Shutdown(sctx); err != nil {
		log.Warn("bridge serve: stopped before every envelope was passed on", "err", err)
	}
	fmt.Fprintf(stderr, "bridge serve: %+v\n", b.Counters())
	return nil
}

func runWorker(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bridge worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "lane socket directory (default: /var/cache/raet, else ~/.raet/uxd)")
	laneName := fs.String("lane", lane.DefaultLane, "lane name")
	name := fs.String("name", "", "the worker's yard name")
	stdinEOF := fs.Bool("stdin-eof", false, "also stop when stdin reaches its end (the parent left)")
	verbose := fs.Bool("v", false, "log more (to stderr)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return usageError{errors.New("-name is required")}
	}
	log := newLogger(stderr, *verbose)
	st, err := lane.New(&lane.Config{Dir: *dir, Lane: *laneName, Name: *name, Logger: log})
	if err != nil {
		return err
	}
	if err := st.Start(); err != nil {
		return err
	}
	defer st.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *stdinEOF {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() { // ends with the process
			io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
	}
	serveWorker(ctx, st, log)
	return nil
}
