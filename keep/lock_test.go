package keep

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A keep locked by another process is refused with ErrLocked and the
// holder's pid; once that process exits, the lock is free again.
func TestLockAcrossProcesses(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no advisory locks")
	}
	dir := t.TempDir()
	// The helper is this test binary, holding the lock until its stdin closes.
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelperProcess$")
	cmd.Env = append(os.Environ(), "RAET_KEEP_LOCK_HELPER="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf) // "locked\n" once it holds the lock
	if !strings.HasPrefix(string(buf[:n]), "locked") {
		t.Fatalf("helper said %q", buf[:n])
	}
	k, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = k.Lock()
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "process "+strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("Lock of a held keep: %v", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	l, err := k.Lock()
	if err != nil {
		t.Fatalf("Lock after the holder exited: %v", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
}

func TestLockHelperProcess(t *testing.T) {
	dir := os.Getenv("RAET_KEEP_LOCK_HELPER")
	if dir == "" {
		t.Skip("helper process only")
	}
	k, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Lock(); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("locked\n")
	b := make([]byte, 1)
	os.Stdin.Read(b) // until the test closes stdin
	os.Exit(0)
}

func TestOpenMustExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "typo")
	if _, err := Open(missing, &Config{MustExist: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a missing keep: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open made the missing keep: %v", err)
	}
	if _, err := Open(t.TempDir(), &Config{MustExist: true}); err != nil {
		t.Fatal(err)
	}
}

// Open removes the temporary files an interrupted write left, but not
// those of a keep a stack holds (Lock): they may be its writes under way
// (a Writer's batch), which an operator's command beside the stack must
// not break.
func TestOpenLeavesTempsOfALockedKeep(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no advisory locks")
	}
	dir := t.TempDir()
	k, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "remote", tempPrefix+"under-way"+tempSuffix)
	if err := os.WriteFile(tmp, []byte("{}"), filePerm); err != nil {
		t.Fatal(err)
	}
	l, err := k.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("Open of a locked keep removed a temporary file: %v", err)
	}
	l.Unlock()
	if _, err := Open(dir, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open of a free keep left a temporary file: %v", err)
	}
}
