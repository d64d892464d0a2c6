package road_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The README's Go program runs as it is written: its first Go block is
// built and run as a program of this module, and prints what the README
// says it prints.
func TestREADMEProgramRuns(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := bytes.Cut(readme, []byte("\n```go\n"))
	src, _, closed := bytes.Cut(rest, []byte("\n```\n"))
	if !ok || !closed || !bytes.Contains(src, []byte("package main")) {
		t.Fatal("README.md has no Go program in a ```go block")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run the README's program: %v", err)
	}
	// A directory of the module (so the program imports this tree), which
	// ./... patterns skip because its name starts with a dot.
	dir, err := os.MkdirTemp("..", ".readme-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	prog := filepath.Join(dir, "main.go")
	if err := os.WriteFile(prog, append(src, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool, "run", prog)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run the README's program: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if got, want := stdout.String(), "beta says hello 1\nalpha says welcome\n"; got != want {
		t.Fatalf("the program printed %q, want %q", got, want)
	}
	if !strings.Contains(string(readme), "It prints `beta says hello 1` and `alpha says welcome`.") {
		t.Fatal("the README no longer says what the program prints")
	}
}
