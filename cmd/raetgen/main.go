// Command raetgen generates the RAET head codecs, the Head type and
// enumerations, their tests and docs/wire.md from spec/raet.yaml.
//
// By default it prints a unified diff of what would change and exits with
// status 1 when anything is stale; with -w it writes the files.
//
//	raetgen            # check: print the diff, exit 1 if stale
//	raetgen -w         # write
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/raet-go/raet/gen"
	"github.com/raet-go/raet/internal/buildinfo"
	"github.com/raet-go/raet/spec"
)

const usage = `usage: raetgen [-w] [-q] [-root DIR] [-spec FILE]

Generate the head codecs, the Head type and enumerations, their tests and
docs/wire.md from spec/raet.yaml. Without -w, print a diff of what is stale
(make check-gen); with -w, write the files (make generate).

flags:
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("raetgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "module root to generate into")
	specPath := fs.String("spec", spec.DefaultPath, "spec file, relative to -root")
	write := fs.Bool("w", false, "write the generated files instead of printing a diff")
	quiet := fs.Bool("q", false, "with the check, print only the names of stale files")
	version := fs.Bool("version", false, "print the version and exit")
	fs.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			fmt.Fprint(stdout, "\nexit status: 0 up to date (or written); 1 some generated files are stale; 2 bad usage or a bad spec.\n")
			return 0
		}
		fmt.Fprintln(stderr, "run 'raetgen -help' for usage")
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "raetgen: unexpected argument %q (run 'raetgen -help' for usage)\n", fs.Arg(0))
		return 2
	}
	if *version {
		fmt.Fprintf(stdout, "%s, generator %s\n", buildinfo.Version("raetgen"), gen.Version)
		return 0
	}
	s, err := spec.Load(filepath.Join(*root, *specPath))
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	files, err := gen.Generate(s, filepath.ToSlash(*specPath))
	if err != nil {
		var be *gen.BrokenError
		if errors.As(err, &be) {
			p := filepath.Join(*root, filepath.FromSlash(be.Path)) + ".broken"
			if werr := os.WriteFile(p, be.Content, 0o644); werr == nil {
				fmt.Fprintln(stderr, "raetgen: wrote", p)
			}
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if *write {
		if err := gen.Write(*root, files); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		return 0
	}
	stale, err := gen.Stale(*root, files)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if len(stale) == 0 {
		return 0
	}
	for _, st := range stale {
		if *quiet {
			fmt.Fprintln(stdout, st.Path)
		} else {
			fmt.Fprint(stdout, st.Diff)
		}
	}
	fmt.Fprintf(stderr, "raetgen: %d generated file(s) are stale; run make generate (raetgen -w)\n", len(stale))
	return 1
}
