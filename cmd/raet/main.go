// Command raet runs RAET estates and yards.
//
//	raet keygen --keep DIR --name NAME [--role ROLE]
//	raet serve  --keep DIR --name NAME --listen HOST:PORT [--main] [--auto always|once|never] [--echo]
//	            [--plugins DIR --serializer plugin:NAME --queue plugin:NAME] ...
//	raet send   --keep DIR --name NAME --listen HOST:PORT --to HOST:PORT [--body-json '{...}' | --size N --count N] ...
//	raet keys   list|accept|reject|pend --keep DIR [NAME]
//	raet lane   serve|send ...
//	raet plugins list --plugins DIR [--check]
//
// Output is JSON lines on stdout; logs go to stderr. Exit codes: 0 success,
// 1 a failure (a message not done, an echo that differs, a join refused),
// 2 bad usage, 3 the keep or socket could not be opened.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
)

// command is a subcommand: it takes its arguments and returns the exit code.
type command func(args []string, stdout, stderr io.Writer) int

// commands maps subcommand names to their functions; files add to it in init.
var commands = map[string]command{
	"keygen": runKeygen,
	"serve":  runServe,
	"send":   runSend,
	"keys":   runKeys,
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		return exitUsage
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "raet: unknown command %q\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return cmd(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "usage: raet COMMAND [flags]; commands:", names)
	fmt.Fprintln(w, "run 'raet COMMAND -h' for a command's flags")
}
