package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit codes of every command.
const (
	exitOK      = 0
	exitFailure = 1 // a message failed, an echo differed, a join failed
	exitUsage   = 2 // bad flags or arguments
	exitSetup   = 3 // the keep, the socket or a plugin could not be opened
)

// exitCodes describes the exit codes in every help text.
const exitCodes = `0 success; 1 a failure (a message not done, an echo missing or
different, a join refused: the reason is on stderr); 2 bad usage; 3 the
keep, the socket or a plugin could not be opened (a keep in use by another
stack, an address in use, a missing directory).`

// help is a command's --help text: its usage lines, what it does, and an
// example; the flags and the exit codes are added when it is printed.
type help struct {
	usage, about, example string
}

// newFlags returns the flag set of a command. Errors go to stderr;
// --help is printed by parseFlags.
func newFlags(prog string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // parseFlags prints the help
	return fs
}

// parseFlags parses args for fs. It reports ok false with the exit code
// when the command is done: --help (the help on stdout, exit 0), a bad
// flag, or more than maxArgs positional arguments (exit 2, the problem on
// stderr).
func parseFlags(fs *flag.FlagSet, h help, args []string, maxArgs int, stdout, stderr io.Writer) (code int, ok bool) {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printHelp(fs, h, stdout)
		return exitOK, false
	case err != nil:
		fmt.Fprintf(stderr, "run '%s --help' for usage\n", fs.Name())
		return exitUsage, false
	case fs.NArg() > maxArgs:
		fmt.Fprintf(stderr, "%s: unexpected argument %q (run '%s --help' for usage)\n", fs.Name(), fs.Arg(maxArgs), fs.Name())
		return exitUsage, false
	}
	return exitOK, true
}

// usageError prints a usage problem and returns exitUsage.
func usageError(stderr io.Writer, prog, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s (run '%s --help' for usage)\n", prog, fmt.Sprintf(format, args...), prog)
	return exitUsage
}

func printHelp(fs *flag.FlagSet, h help, w io.Writer) {
	fmt.Fprintf(w, "usage:\n%s\n\n%s\n", indent(h.usage), strings.TrimSpace(h.about))
	var flags strings.Builder
	fs.SetOutput(&flags)
	fs.PrintDefaults()
	if flags.Len() > 0 {
		fmt.Fprintf(w, "\nflags:\n%s", flags.String())
	}
	fmt.Fprintf(w, "\nexample:\n%s\n\nexit status: %s\n", indent(h.example), exitCodes)
}

func indent(s string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}
