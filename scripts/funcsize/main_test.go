package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScan(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\n" +
		"func small() {}\n\n" +
		"func long() {\n" + strings.Repeat("\t_ = 1\n", 10) + "}\n\n" +
		"type T struct{}\n\n" +
		"func (*T) branchy(a, b bool, n int) {\n" +
		"\tif a && b || a {\n\t}\n\tfor range n {\n\t}\n\tswitch n {\n\tcase 1, 2:\n\tcase 3:\n\tdefault:\n\t}\n" +
		"\tf := func() { if a {} }\n\t_ = f\n}\n\n" +
		"//funcsize:ok a table, one case a kind\nfunc excused() {\n" + strings.Repeat("\t_ = 1\n", 10) + "}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc longTest() {\n"+strings.Repeat("\t_ = 1\n", 10)+"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := scan(dir, false, 8, 6)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]finding{
		"long":         {Func: "long", Lines: 12, Cyclo: 1},
		"(*T).branchy": {Func: "(*T).branchy", Lines: 13, Cyclo: 8}, // 1, if, &&, ||, range, two cases, the literal's if
		"excused":      {Func: "excused", Lines: 12, Cyclo: 1, OK: "a table, one case a kind"},
	}
	if len(got) != len(want) {
		t.Fatalf("scan found %+v, want %d functions", got, len(want))
	}
	for _, f := range got {
		w, ok := want[f.Func]
		if !ok {
			t.Errorf("unexpected %+v", f)
			continue
		}
		w.Pos = f.Pos
		if f != w {
			t.Errorf("got %+v, want %+v", f, w)
		}
	}
	withTests, err := scan(dir, true, 8, 6)
	if err != nil {
		t.Fatal(err)
	}
	if len(withTests) != len(want)+1 {
		t.Errorf("with -tests scan found %d functions, want %d", len(withTests), len(want)+1)
	}
}
