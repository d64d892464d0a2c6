// Command coregraph measures the file graph of one Go package (by default
// road/internal/core): how its files refer to each other, how many of
// those references run back up, and the size of one struct. The functions
// too long or too branchy to read at once are scripts/funcsize's.
//
// An arrow A→B is a pair of distinct non-test files of the package where
// A uses an identifier (type, function, method, field, variable or
// constant) declared in B; each pair counts once however many uses it has.
//
// Arrows running back up: the files are put in one order, lowest first,
// by the greedy feedback-arc-set heuristic of Eades, Lin and Smyth (sinks,
// the files that use no other, go to the bottom, sources to the top, and
// then the file whose arrows out most exceed its arrows in goes up next).
// The order is then improved by sifting: each file in turn moves to the
// place where the fewest arrows run back up, until no move helps. An
// arrow from a file to one placed above it runs back up: the arrows one
// would cut so that every file only uses the files below it (an upper
// bound of the fewest such arrows, the minimum feedback arc set). The
// order does not depend on the files' names or their declared order,
// except to break ties, and a graph without cycles has none.
//
// Usage:
//
//	go run ./scripts/coregraph [flags] [package directory]
//
// Examples:
//
//	go run ./scripts/coregraph                 # road/internal/core, JSON lines
//	go run ./scripts/coregraph -text           # the same, for a reader
//	go run ./scripts/coregraph -arrows -text   # and every arrow
//	go run ./scripts/coregraph -arrows -why -text # with what each uses
//	go run ./scripts/coregraph -type Stack road
//
// Output: JSON lines on stdout, a summary first ({"kind":"summary",...}),
// then, with -arrows, each arrow ({"kind":"arrow",...}); -text prints the same as text.
//
// Exit codes: 0 measured; 1 the package could not be read or type
// checked; 2 bad usage.
package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	typ    string
	arrows bool
	text   bool
	why    bool
	dir    string
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("coregraph", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.typ, "type", "Core", "the struct whose fields and methods are counted")
	fs.BoolVar(&o.arrows, "arrows", false, "list every arrow")
	fs.BoolVar(&o.text, "text", false, "text instead of JSON lines")
	fs.BoolVar(&o.why, "why", false, "with -arrows, the identifiers each arrow uses")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: coregraph [flags] [package directory (default road/internal/core)]")
		fmt.Fprintln(stderr, "examples: coregraph -text; coregraph -arrows -text; coregraph -type Stack road")
		fmt.Fprintln(stderr, "exit codes: 0 measured, 1 package unreadable, 2 bad usage")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	switch fs.NArg() {
	case 0:
		o.dir = "road/internal/core"
	case 1:
		o.dir = fs.Arg(0)
	default:
		fs.Usage()
		return 2
	}
	m, err := measure(o)
	if err != nil {
		fmt.Fprintln(stderr, "coregraph:", err)
		return 1
	}
	if err := m.write(stdout, o); err != nil {
		fmt.Fprintln(stderr, "coregraph:", err)
		return 1
	}
	return 0
}

// Arrow is one file's use of another's declarations.
type Arrow struct {
	Kind string `json:"kind"`
	From string `json:"from"`
	To   string `json:"to"`
	Uses int    `json:"uses"`
	Back bool   `json:"back"`
	// Names are the identifiers of To that From uses (with -why).
	Names []string `json:"names,omitempty"`
}

// Summary is the package's figures.
type Summary struct {
	Kind    string   `json:"kind"`
	Package string   `json:"package"`
	Files   int      `json:"files"`
	Arrows  int      `json:"arrows"`
	Back    int      `json:"back"`
	Type    string   `json:"type"`
	Fields  int      `json:"fields"`
	Methods int      `json:"methods"`
	Order   []string `json:"order"` // lowest first
}

type measurement struct {
	sum    Summary
	arrows []Arrow
}

func measure(o options) (*measurement, error) {
	bp, err := build.ImportDir(o.dir, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", o.dir, err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, n := range bp.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(o.dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse: %w", err)
		}
		files = append(files, f)
	}
	name := bp.Name
	slices.SortFunc(files, func(a, b *ast.File) int {
		return cmp.Compare(fset.File(a.Pos()).Name(), fset.File(b.Pos()).Name())
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
	tp, err := conf.Check(name, fset, files, info)
	if err != nil {
		return nil, fmt.Errorf("type check %s: %w", o.dir, err)
	}
	m := &measurement{sum: Summary{Kind: "summary", Package: o.dir, Files: len(files), Type: o.typ}}

	base := func(p token.Pos) string { return filepath.Base(fset.Position(p).Filename) }
	uses := map[[2]string]int{}
	names := map[[2]string]map[string]bool{}
	for id, obj := range info.Uses {
		if obj == nil || obj.Pkg() != tp || !obj.Pos().IsValid() {
			continue
		}
		from, to := base(id.Pos()), base(obj.Pos())
		if from != to {
			k := [2]string{from, to}
			uses[k]++
			if names[k] == nil {
				names[k] = map[string]bool{}
			}
			names[k][objName(obj)] = true
		}
	}
	var fileNames []string
	for _, f := range files {
		fileNames = append(fileNames, base(f.Pos()))
	}
	order := feedbackOrder(fileNames, uses)
	rank := map[string]int{}
	for i, n := range order {
		rank[n] = i
	}
	for k, n := range uses {
		a := Arrow{Kind: "arrow", From: k[0], To: k[1], Uses: n, Back: rank[k[1]] > rank[k[0]]}
		if o.why {
			a.Names = slices.Sorted(maps.Keys(names[k]))
		}
		m.arrows = append(m.arrows, a)
		if a.Back {
			m.sum.Back++
		}
	}
	slices.SortFunc(m.arrows, func(a, b Arrow) int {
		return cmp.Or(cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
	m.sum.Arrows = len(m.arrows)
	m.sum.Order = order

	if obj, ok := tp.Scope().Lookup(o.typ).(*types.TypeName); ok {
		if st, ok := obj.Type().Underlying().(*types.Struct); ok {
			m.sum.Fields = st.NumFields()
		}
		if n, ok := obj.Type().(*types.Named); ok {
			m.sum.Methods = n.NumMethods()
		}
	}

	return m, nil
}

// objName names obj as a reader finds it: a method or field with its
// type's name.
func objName(obj types.Object) string {
	if v, ok := obj.(*types.Var); ok && v.IsField() {
		return "." + v.Name()
	}
	if f, ok := obj.(*types.Func); ok {
		if r := f.Signature().Recv(); r != nil {
			t := r.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			if n, ok := t.(*types.Named); ok {
				return n.Obj().Name() + "." + f.Name()
			}
		}
	}
	return obj.Name()
}

// feedbackOrder orders names lowest first by the Eades–Lin–Smyth
// heuristic on the arrows of uses (from uses to): sinks are taken for the
// bottom, sources for the top, and otherwise the node with the largest
// out-degree minus in-degree goes to the top; ties go by name.
func feedbackOrder(names []string, uses map[[2]string]int) []string {
	out, in := map[string]map[string]bool{}, map[string]map[string]bool{}
	left := map[string]bool{}
	for _, n := range names {
		out[n], in[n], left[n] = map[string]bool{}, map[string]bool{}, true
	}
	for k := range uses {
		out[k[0]][k[1]], in[k[1]][k[0]] = true, true
	}
	remove := func(n string) {
		delete(left, n)
		for t := range out[n] {
			delete(in[t], n)
		}
		for f := range in[n] {
			delete(out[f], n)
		}
	}
	sorted := func() []string {
		s := make([]string, 0, len(left))
		for n := range left {
			s = append(s, n)
		}
		slices.Sort(s)
		return s
	}
	var bottom, top []string // bottom: lowest first; top: highest first
	for len(left) > 0 {
		moved := true
		for moved {
			moved = false
			for _, n := range sorted() {
				if len(out[n]) == 0 {
					bottom = append(bottom, n)
					remove(n)
					moved = true
				} else if len(in[n]) == 0 {
					top = append(top, n)
					remove(n)
					moved = true
				}
			}
		}
		if len(left) == 0 {
			break
		}
		best, bd := "", 0
		for _, n := range sorted() {
			if d := len(out[n]) - len(in[n]); best == "" || d > bd {
				best, bd = n, d
			}
		}
		top = append(top, best)
		remove(best)
	}
	slices.Reverse(top)
	return sift(append(bottom, top...), uses)
}

// sift moves each node of order, lowest first, to the place where the
// fewest arrows of uses run back up, until no move lowers their count.
func sift(order []string, uses map[[2]string]int) []string {
	back := func(o []string) int {
		rank := make(map[string]int, len(o))
		for i, n := range o {
			rank[n] = i
		}
		b := 0
		for k := range uses {
			if rank[k[1]] > rank[k[0]] {
				b++
			}
		}
		return b
	}
	best := back(order)
	for improved := true; improved; {
		improved = false
		for _, n := range slices.Clone(order) {
			i := slices.Index(order, n)
			rest := slices.Delete(slices.Clone(order), i, i+1)
			for j := 0; j <= len(rest); j++ {
				try := slices.Insert(slices.Clone(rest), j, n)
				if b := back(try); b < best {
					order, best, improved = try, b, true
				}
			}
		}
	}
	return order
}

func (m *measurement) write(w io.Writer, o options) error {
	if o.text {
		s := m.sum
		fmt.Fprintf(w, "%s: %d files, %d arrows, %d back up; %s: %d fields, %d methods\n",
			s.Package, s.Files, s.Arrows, s.Back, s.Type, s.Fields, s.Methods)
		fmt.Fprintf(w, "order, lowest first: %s\n", strings.Join(s.Order, " "))
		if o.arrows {
			for _, a := range m.arrows {
				back := ""
				if a.Back {
					back = " (back up)"
				}
				fmt.Fprintf(w, "%s -> %s: %d uses%s", a.From, a.To, a.Uses, back)
				if len(a.Names) > 0 {
					fmt.Fprintf(w, ": %s", strings.Join(a.Names, " "))
				}
				fmt.Fprintln(w)
			}
		}
		return nil
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(m.sum); err != nil {
		return err
	}
	if o.arrows {
		for _, a := range m.arrows {
			if err := enc.Encode(a); err != nil {
				return err
			}
		}
	}
	return nil
}
