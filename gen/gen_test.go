package gen_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/raet-go/raet/gen"
	"github.com/raet-go/raet/spec"
)

// moduleRoot is the repository root, two levels up from gen/.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return root
}

func generate(t *testing.T, root string) []gen.File {
	t.Helper()
	s, err := spec.Load(filepath.Join(root, spec.DefaultPath))
	if err != nil {
		t.Fatal(err)
	}
	files, err := gen.Generate(s, spec.DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// The Go form of make check-gen: the committed generated files are exactly
// what the spec gives.
func TestGeneratedFilesAreUpToDate(t *testing.T) {
	root := moduleRoot(t)
	stale, err := gen.Stale(root, generate(t, root))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		t.Errorf("%s is stale; run make generate:\n%s", s.Path, s.Diff)
	}
}

func TestGenerationIsDeterministic(t *testing.T) {
	root := moduleRoot(t)
	a, b := generate(t, root), generate(t, root)
	if len(a) != len(b) {
		t.Fatal("different file counts")
	}
	for i := range a {
		if a[i].Path != b[i].Path || !bytes.Equal(a[i].Content, b[i].Content) {
			t.Errorf("%s differs between two runs", a[i].Path)
		}
		first, _, _ := strings.Cut(string(a[i].Content), "\n")
		if !strings.HasPrefix(first, gen.Marker) && !strings.Contains(first, gen.Marker[3:]) {
			t.Errorf("%s does not start with the generated-code marker: %q", a[i].Path, first)
		}
	}
}

// copyModule copies what the generated files need (go.mod, go.sum, spec/,
// codec/, docs/, bus/envelope, protocol/) into a temporary module with the same module path.
func copyModule(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	for _, name := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join(root, name), filepath.Join(dst, name))
	}
	for _, dir := range []string{"spec", "codec", "docs", "internal/pyjson", "bus/envelope", "protocol"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return os.MkdirAll(filepath.Join(dst, rel), 0o755)
			}
			copyFile(t, p, filepath.Join(dst, rel))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

const newField = `  - key: zz
    go: Zigzag
    type: u16
    default: 7
    doc: a field added by the test
    native: {format: hex}
    json: {format: number}
    binary: {encoding: uvarint}

`

// tryNewField exercises the regenerated code: the new field is carried by
// all three codecs, and the changed default of sc is what Reset gives and
// what the encoders omit.
const tryNewField = `package main

import (
	"bytes"
	"fmt"
	"os"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/codec/binary"
	"github.com/raet-go/raet/codec/json"
	"github.com/raet-go/raet/codec/native"
)

func main() {
	var h codec.Head
	h.Reset()
	if h.Zigzag != 7 || h.SegmentCount != 2 {
		fail("defaults: %+v", h)
	}
	nat, _ := native.Codec{}.Append(nil, &h)
	if bytes.Contains(nat, []byte("\nsc ")) || bytes.Contains(nat, []byte("\nzz ")) {
		fail("defaults written: %q", nat)
	}
	h.Zigzag, h.SegmentCount = 0x1234, 1
	for _, c := range []codec.Codec{native.Codec{}, json.Codec{}, binary.Codec{}} {
		b, err := c.Append(nil, &h)
		if err != nil {
			fail("%v: %v", c.Kind(), err)
		}
		if err := c.SetPacketLength(b, len(b)); err != nil {
			fail("%v", err)
		}
		var got codec.Head
		if _, err := c.Decode(b, &got); err != nil || got.Zigzag != 0x1234 || got.SegmentCount != 1 {
			fail("%v: %q decoded to %+v, %v", c.Kind(), b, got, err)
		}
	}
	nat, _ = native.Codec{}.Append(nil, &h)
	js, _ := json.Codec{}.Append(nil, &h)
	if !bytes.Contains(nat, []byte("\nsc 1\n")) || !bytes.Contains(nat, []byte("\nzz 1234\n")) || !bytes.Contains(js, []byte(` + "`" + `,"zz":4660` + "`" + `)) {
		fail("encodings %q %q", nat, js)
	}
	fmt.Println("new field ok")
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
`

// A field added to the spec and a changed default reach all three codecs and
// docs/wire.md with no hand edit.
func TestSpecChangeRegeneratesEverything(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a temporary module")
	}
	root := moduleRoot(t)
	tmp := copyModule(t, root)
	specPath := filepath.Join(tmp, spec.DefaultPath)
	src, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	anchor := "# Keys the reference lists"
	if !strings.Contains(text, anchor) {
		t.Fatal("spec layout changed: no anchor for the new field")
	}
	text = strings.Replace(text, anchor, newField+anchor, 1)
	oldSC := "    type: u16\n    default: 1\n    doc: segment count"
	if !strings.Contains(text, oldSC) {
		t.Fatal("spec layout changed: sc default not found")
	}
	text = strings.Replace(text, oldSC, "    type: u16\n    default: 2\n    doc: segment count", 1)
	if err := os.WriteFile(specPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}

	before := map[string][]byte{}
	for _, p := range []string{"codec/head_gen.go", "codec/native/header_gen.go", "codec/json/header_gen.go", "codec/binary/header_gen.go", "docs/wire.md"} {
		before[p], _ = os.ReadFile(filepath.Join(tmp, p))
	}
	files := generate(t, tmp)
	if err := gen.Write(tmp, files); err != nil {
		t.Fatal(err)
	}
	for p, old := range before {
		now, err := os.ReadFile(filepath.Join(tmp, p))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(old, now) {
			t.Errorf("%s did not change", p)
		}
	}
	doc, _ := os.ReadFile(filepath.Join(tmp, "docs/wire.md"))
	if !bytes.Contains(doc, []byte("| `zz` | `Zigzag` | u16 | `7` |")) || !bytes.Contains(doc, []byte("| `sc` | `SegmentCount` | u16 | `2` |")) {
		t.Errorf("docs/wire.md lacks the new field or default")
	}

	// The regenerated tests of every codec pass, and a program uses the field.
	goCmd(t, tmp, "test", "./codec/native", "./codec/json", "./codec/binary", "./codec/lane")
	if err := os.MkdirAll(filepath.Join(tmp, "cmd/try"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "cmd/try/main.go"), []byte(tryNewField), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := goCmd(t, tmp, "run", "./cmd/try"); !strings.Contains(out, "new field ok") {
		t.Fatalf("go run: %s", out)
	}
}

// Editing a generated file makes the check (raetgen without -w, which make
// check-gen runs) fail and name the file; regenerating mends it.
func TestCheckGenCatchesAnEditedFile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds raetgen")
	}
	root := moduleRoot(t)
	tmp := copyModule(t, root)
	// raetgen itself is built from the real module.
	bin := filepath.Join(t.TempDir(), "raetgen")
	goCmd(t, root, "build", "-o", bin, "./cmd/raetgen")
	run := func() (int, string) {
		cmd := exec.Command(bin, "-root", tmp)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, out := run(); code != 0 {
		t.Fatalf("fresh copy reported stale (%d):\n%s", code, out)
	}
	target := filepath.Join(tmp, "codec/native/header_gen.go")
	b, _ := os.ReadFile(target)
	edited := bytes.Replace(b, []byte(`"\npk "`), []byte(`"\nPK "`), 1)
	if bytes.Equal(edited, b) {
		t.Fatal("nothing to edit")
	}
	if err := os.WriteFile(target, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	// A generated file the spec no longer produces is stale too.
	orphan := filepath.Join(tmp, "codec/native/old_gen.go")
	if err := os.WriteFile(orphan, []byte(gen.Marker+" from spec/raet.yaml. DO NOT EDIT.\npackage native\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := run()
	if code != 1 || !strings.Contains(out, "codec/native/header_gen.go") || !regexp.MustCompile(`(?m)^\+\s+b = append\(b, "\\npk "\.\.\.\)$`).MatchString(out) || !strings.Contains(out, "old_gen.go") {
		t.Fatalf("check after an edit: exit %d\n%s", code, out)
	}
	cmd := exec.Command(bin, "-root", tmp, "-w")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("raetgen -w: %v\n%s", err, out)
	}
	if code, out := run(); code != 0 {
		t.Fatalf("still stale after -w (%d):\n%s", code, out)
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphan not removed: %v", err)
	}
}

func TestUnifiedDiffIsPatchable(t *testing.T) {
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\n"
	new := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	d := gen.UnifiedDiff("a/x", "b/x", old, new)
	want := "--- a/x\n+++ b/x\n@@ -1,5 +1,5 @@\n a\n-b\n+B\n c\n d\n e\n@@ -8,3 +8,4 @@\n h\n i\n j\n+k\n"
	if d != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", d, want)
	}
	if _, err := exec.LookPath("patch"); err == nil {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x"), []byte(old), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("patch", "-p1", "--quiet")
		cmd.Dir, cmd.Stdin = dir, strings.NewReader(d)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("patch: %v\n%s", err, out)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "x")); string(got) != new {
			t.Fatalf("patched file %q", got)
		}
	}
}
