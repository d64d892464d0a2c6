// Command funcsize lists the functions of Go packages that are longer than
// a number of lines or whose cyclomatic complexity is higher than a bound
// (issue 33's rule for road/ and road/internal/core: 60 lines, 20).
//
// Usage:
//
//	go run ./scripts/funcsize [-lines 60] [-cyclo 20] [-tests] DIR...
//
// Each DIR is one package's folder (not its subfolders); test files are
// skipped unless -tests. It prints one JSON line per function over a bound
// ({"pos":"road/stack.go:120","func":"(*Stack).run","lines":70,"cyclo":12}),
// and exits 1 when there is one, 0 when there is none, 2 on a usage or parse
// error. A function may carry an exception with its reason, a directive
// line in its doc comment (hidden from go doc):
//
//	//funcsize:ok the ladder of the spec's packet kinds, one case each
//
// It is then listed with its reason ("ok") and does not fail the run.
//
// The complexity is gocyclo's: 1, plus one for each if, for, range, case
// and select case (a default is none), && and ||. Lines run from the func
// keyword to the closing brace.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// finding is one function over a bound.
type finding struct {
	Pos   string `json:"pos"`
	Func  string `json:"func"`
	Lines int    `json:"lines"`
	Cyclo int    `json:"cyclo"`
	OK    string `json:"ok,omitempty"` // the exception's reason
}

const directive = "//funcsize:ok"

func main() {
	fs := flag.NewFlagSet("funcsize", flag.ContinueOnError)
	maxLines := fs.Int("lines", 60, "the most `lines` a function may have")
	maxCyclo := fs.Int("cyclo", 20, "the highest cyclomatic `complexity` a function may have")
	tests := fs.Bool("tests", false, "include _test.go files")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: funcsize [-lines N] [-cyclo N] [-tests] DIR...\n\nexample: go run ./scripts/funcsize road road/internal/core\n\nexit: 0 none over a bound, 1 some, 2 usage or parse error")
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() == 0 {
		if err == nil {
			fs.Usage()
		}
		os.Exit(2)
	}
	var all []finding
	for _, dir := range fs.Args() {
		found, err := scan(dir, *tests, *maxLines, *maxCyclo)
		if err != nil {
			fmt.Fprintln(os.Stderr, "funcsize:", err)
			os.Exit(2)
		}
		all = append(all, found...)
	}
	enc := json.NewEncoder(os.Stdout)
	failed := false
	for _, f := range all {
		enc.Encode(f)
		failed = failed || f.OK == ""
	}
	if failed {
		os.Exit(1)
	}
}

// scan reports the functions of the Go files in dir over a bound.
func scan(dir string, tests bool, maxLines, maxCyclo int) ([]finding, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	fset := token.NewFileSet()
	var out []finding
	for _, name := range names {
		if !tests && strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			f := finding{
				Pos:   fmt.Sprintf("%s:%d", filepath.ToSlash(name), fset.Position(fn.Pos()).Line),
				Func:  funcName(fn),
				Lines: fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1,
				Cyclo: cyclo(fn),
			}
			if f.Lines <= maxLines && f.Cyclo <= maxCyclo {
				continue
			}
			f.OK = exception(fn)
			out = append(out, f)
		}
	}
	return out, nil
}

// funcName is fn's name, with its receiver's type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if ix, ok := t.(*ast.IndexListExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + star + id.Name + ")." + fn.Name.Name
	}
	return fn.Name.Name
}

// exception is the reason of fn's funcsize:ok directive, or "".
func exception(fn *ast.FuncDecl) string {
	if fn.Doc == nil {
		return ""
	}
	for _, c := range fn.Doc.List {
		if rest, ok := strings.CutPrefix(c.Text, directive); ok {
			if why := strings.TrimSpace(rest); why != "" {
				return why
			}
			return "(no reason given)"
		}
	}
	return ""
}

// cyclo is fn's cyclomatic complexity, as gocyclo counts it; function
// literals inside count toward fn.
func cyclo(fn *ast.FuncDecl) int {
	n := 1
	ast.Inspect(fn.Body, func(x ast.Node) bool {
		switch x := x.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			n++
		case *ast.CaseClause:
			if x.List != nil {
				n++
			}
		case *ast.CommClause:
			if x.Comm != nil {
				n++
			}
		case *ast.BinaryExpr:
			if x.Op == token.LAND || x.Op == token.LOR {
				n++
			}
		}
		return true
	})
	return n
}
