// Command raet runs RAET estates (the road, UDP) and yards (the lane, Unix
// datagram sockets), and manages the keys of a keep.
//
//	raet keygen  make an estate's keys in a keep
//	raet serve   run an estate: print what it receives and what happens on the road
//	raet send    join an estate and send it messages
//	raet keys    list, accept, reject or pend the keys remotes offered
//	raet status  print a running command's status (started with --metrics)
//	raet lane    serve or send on a lane (yards of one host)
//	raet plugins list the plugins of a directory
//	raet bench   measure the road's throughput and latency
//	raet pub, sub, req, rep, push, pull   the messaging patterns of package bus
//
// Run "raet help" for the list, "raet COMMAND --help" for a command's
// usage, flags, an example and its exit codes. Output is JSON lines on
// stdout; logs and errors go to stderr. Exit codes: 0 success, 1 a failure
// (a message not done, an echo that differs, a join refused), 2 bad usage,
// 3 the keep, socket or a plugin could not be opened.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/raet-go/raet/internal/buildinfo"
)

// command is a subcommand: it takes its arguments and returns the exit code.
type command func(args []string, stdout, stderr io.Writer) int

// subcommand is one entry of raet help.
type subcommand struct {
	name, summary string
	run           command
}

// subcommands are raet's commands, in the order a new user needs them.
var subcommands = []subcommand{
	{"keygen", "make an estate's keys in a keep", runKeygen},
	{"serve", "run an estate: print what it receives and what happens on the road", runServe},
	{"send", "join an estate and send it messages; print a summary", runSend},
	{"keys", "list, accept, reject or pend the keys remotes offered (the operator's side)", runKeys},
	{"status", "print a running command's status (its --metrics address): remotes, peers, counters", runStatus},
	{"lane", "serve or send on a lane: yards of one host, over Unix datagram sockets", runLane},
	{"plugins", "list (and check) the plugins of a directory", runPlugins},
	{"bench", "measure the road's throughput and latency", runBench},
	{"pub", "publish JSON lines on subjects to subscribers (package bus)", runPub},
	{"sub", "subscribe to a publisher with subject filters; print what comes", runSub},
	{"req", "send requests and print the replies", runReq},
	{"rep", "answer requests: an echo or a command", runRep},
	{"push", "hand JSON lines as jobs to pullers; print each result once", runPush},
	{"pull", "take jobs from a pusher: an echo or a command", runPull},
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		if len(args) > 1 && args[0] == "help" { // raet help COMMAND
			return run([]string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, buildinfo.Version("raet"))
		return exitOK
	}
	for _, c := range subcommands {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "raet: unknown command %q (run 'raet help')\n", args[0])
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: raet COMMAND [flags]

raet runs RAET estates on a road (UDP, between hosts) and yards on a lane
(Unix datagram sockets, one host). Output is JSON lines on stdout; logs and
errors go to stderr.

commands:
`)
	for _, c := range subcommands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'raet COMMAND --help' for a command's flags, an example and its exit
codes; 'raet --version' for the version.

exit status: `+exitCodes+`
`)
}
