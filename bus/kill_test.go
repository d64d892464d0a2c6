package bus_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// killMidStream runs test of this binary again as a child, with env set to
// path, reads the "id g k" lines it prints for what it acknowledged (see
// ackUntilKilled), kills it (SIGKILL) after killAfter of them and returns
// them all: what the child acknowledged before it died, by id.
func killMidStream(t *testing.T, test, env, path string, killAfter int) map[uint64][2]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+path)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[uint64][2]int{}
	sc := bufio.NewScanner(out)
	for sc.Scan() { // after the kill, what the child wrote before it
		var id uint64
		var g, k int
		if _, err := fmt.Sscan(sc.Text(), &id, &g, &k); err != nil {
			t.Fatalf("child wrote %q: %v", sc.Text(), err)
		}
		acked[id] = [2]int{g, k}
		if len(acked) == killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if len(acked) < killAfter {
		t.Fatalf("the child acknowledged %d and ended: %v", len(acked), err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed: %v", err)
	}
	return acked
}

// ackUntilKilled is the child of killMidStream: goroutines goroutines each
// call op(g, k) for k = 0, 1, ... and print "id g k" for each id op
// acknowledged, until the parent kills the process.
func ackUntilKilled(goroutines int, op func(g, k int) (uint64, error)) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	deadline := time.Now().Add(30 * time.Second) // the parent kills it long before
	for g := range goroutines {
		wg.Go(func() {
			for k := 0; time.Now().Before(deadline); k++ {
				id, err := op(g, k)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				mu.Lock()
				fmt.Fprintln(os.Stdout, id, g, k) // unbuffered: written once acknowledged
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(3) // not killed
}
