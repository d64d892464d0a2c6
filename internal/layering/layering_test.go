// Package layering_test checks which of the module's packages may depend on
// which: data flows one way, from the wire formats up to the stacks and the
// tools. It reads the dependency graph with go list, as the build sees it.
package layering_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/raet-go/raet"

// rule forbids every package under from to depend, directly or not, on a
// package under one of not. Paths are relative to the module; a path
// covers itself and its subpackages, but with exact only itself.
type rule struct {
	from   string
	except []string // packages under from that the rule does not cover
	not    []string
	direct bool // only imports count: depending through an allowed package is fine
	exact  bool // not names packages, not trees
	why    string
}

var rules = []rule{
	{from: "", except: []string{"road"}, not: []string{"road/internal"}, direct: true,
		why: "the road's internals are the road's"},
	{from: "road/internal", not: []string{"road"}, exact: true,
		why: "the road's core is below its shell (the shell reaches it through its API)"},
	{from: "codec", not: []string{"packet", "road", "lane", "keep", "dissect", "plugins"},
		why: "heads are below bodies and stacks"},
	{from: "internal/pyjson", not: []string{""},
		why: "the JSON rules depend on nothing of the module"},
	{from: "protocol", not: []string{""},
		why: "the spec's values beyond the heads depend on nothing of the module"},
	{from: "keep", not: []string{"codec"}, direct: true,
		why: "the keep's enumerations are in protocol, not with the packet heads"},
	{from: "packet", not: []string{"road", "lane", "keep", "dissect", "plugins"},
		why: "bodies, coats and feet are below the stacks"},
	{from: "keep", not: []string{"packet", "road", "lane", "dissect", "plugins"},
		why: "the keep is a file format"},
	{from: "plugins/sdk", not: []string{"road", "lane", "plugins/host"},
		why: "a plugin is built without the stacks"},
	{from: "dissect", not: []string{"road", "lane"},
		why: "the dissector reads the wire, not the stacks (mirror types: RoadPacket, LanePacket)"},
}

func under(pkg, rel string) bool {
	p := module
	if rel != "" {
		p += "/" + rel
	}
	return pkg == p || strings.HasPrefix(pkg, p+"/")
}

// violations lists, for each package of deps (a package's import path to
// its transitive dependencies; imports: to its direct ones), the
// dependencies a rule forbids.
func violations(deps, imports map[string][]string) []string {
	var out []string
	pkgs := make([]string, 0, len(deps))
	for p := range deps {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, r := range rules {
		for _, p := range pkgs {
			if !under(p, r.from) || slices.ContainsFunc(r.except, func(e string) bool { return under(p, e) }) {
				continue
			}
			ds := deps[p]
			if r.direct {
				ds = imports[p]
			}
			for _, d := range ds {
				for _, n := range r.not {
					if under(d, n) && (!r.exact || d == module+"/"+n) {
						out = append(out, fmt.Sprintf("%s imports %s: %s", p, d, r.why))
					}
				}
			}
		}
	}
	return out
}

// TestLayering: no package depends on what is above it.
func TestLayering(t *testing.T) {
	cmd := exec.Command("go", "list", "-e", "-tags", "pcap", "-json=ImportPath,Deps,Imports,Error", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	deps, imports := map[string][]string{}, map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Deps       []string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if p.Error != nil {
			t.Fatalf("%s: %s", p.ImportPath, p.Error.Err)
		}
		deps[p.ImportPath], imports[p.ImportPath] = p.Deps, p.Imports
	}
	for _, must := range []string{"codec", "packet", "dissect", "plugins/sdk", "road", "internal/pyjson"} {
		if _, ok := deps[module+"/"+must]; !ok {
			t.Fatalf("go list did not list %s", must)
		}
	}
	for _, v := range violations(deps, imports) {
		t.Error(v)
	}
}

// TestRulesCatch: each rule reports a dependency it forbids, and only that.
func TestRulesCatch(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	deps := map[string][]string{
		m("codec/json"):         {m("codec"), m("internal/pyjson"), m("packet")},
		m("dissect"):            {m("packet"), m("road")},
		m("plugins/sdk"):        {m("packet"), m("lane")},
		m("cmd/raet"):           {m("road"), m("road/internal/core")},
		m("cmd/raetdump"):       {m("road"), m("road/internal/core")},
		m("road"):               {m("road/internal/core")},
		m("road/internal/core"): {m("road")},
		m("road/internal/x"):    {m("road/internal/core")},
		m("internal/pyjson"):    {"strconv", m("codec")},
		m("keep"):               {m("keys")},
		m("packet"):             {m("codec"), m("internal/pyjson")},
		"example.com/unrelated": {m("road/internal/core")},
	}
	imports := maps.Clone(deps)
	imports[m("cmd/raetdump")] = []string{m("road")} // road/internal/core only through road
	got := violations(deps, imports)
	want := []string{
		m("cmd/raet") + " imports " + m("road/internal/core"),
		m("road/internal/core") + " imports " + m("road"),
		m("codec/json") + " imports " + m("packet"),
		m("internal/pyjson") + " imports " + m("codec"),
		m("plugins/sdk") + " imports " + m("lane"),
		m("dissect") + " imports " + m("road"),
	}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+":") {
			t.Errorf("violation %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// coreBounds are the most the road's core may have of what scripts/coregraph
// measures: the arrows between its files that run back up (a file using one
// placed above it in the best order found) and the fields of Core (the state
// lives in its parts: outbox, inbox, wake clock, spares, keeper, readers'
// keys, roster, local estate).
var coreBounds = struct{ back, fields int }{back: 10, fields: 25}

// TestCoreFiles: within the road's core, files use the files below them
// but for a few arrows, and Core holds its parts, not their fields.
func TestCoreFiles(t *testing.T) {
	out := runScript(t, "coregraph", "road/internal/core")
	var sum struct {
		Kind                        string
		Files, Arrows, Back, Fields int
	}
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&sum); err != nil || sum.Kind != "summary" {
		t.Fatalf("coregraph's first line: %+v, %v", sum, err)
	}
	if sum.Files < 10 || sum.Arrows == 0 || sum.Fields == 0 {
		t.Fatalf("coregraph measured nothing: %+v", sum)
	}
	if sum.Back > coreBounds.back {
		t.Errorf("%d arrows between the core's files run back up, at most %d (go run ./scripts/coregraph -arrows -why -text)", sum.Back, coreBounds.back)
	}
	if sum.Fields > coreBounds.fields {
		t.Errorf("Core has %d fields, at most %d: state belongs in a part", sum.Fields, coreBounds.fields)
	}
}

// TestRoadFunctionSize: no function of the road or its core is over 60
// lines or a cyclomatic complexity of 20 but those marked //funcsize:ok
// with their reason (scripts/funcsize lists them).
func TestRoadFunctionSize(t *testing.T) {
	runScript(t, "funcsize", "road", "road/internal/core") // exits 1 on one unmarked
}

// runScript runs go run ./scripts/name args from the module's root and
// returns its standard output; it fails the test when the script fails.
func runScript(t *testing.T, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "./scripts/" + name}, args...)...)
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", name, err, out, stderr.Bytes())
	}
	return out
}
