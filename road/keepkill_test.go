package road_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// keepKillChildEnv names the keep directory of TestKeepAcrossKill's child.
const keepKillChildEnv = "RAET_ROAD_KEEP_KILL_CHILD"

// keepKillChild runs a main estate with its keep in dir, prints its
// address and serves until it is killed.
func keepKillChild(dir string) int {
	s, err := road.New(&road.Config{Name: "main", Main: true, KeepDir: dir, Auto: keep.AutoAlways, Listen: "127.0.0.1:0"})
	if err == nil {
		err = s.Start()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(s.Addr())
	select {}
}

// TestKeepAcrossKill kills a main (another process, its keep written
// behind) while estates join it, reopens its keep and checks that it is
// consistent (every file whole, every estate with its role) and that it
// holds every join the main acknowledged: each estate whose Join returned
// before the kill has its role accepted and its estate kept as joined.
func TestKeepAcrossKill(t *testing.T) {
	for run := range 2 {
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), keepKillChildEnv+"="+dir)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the main said nothing")
		}
		addr := strings.TrimSpace(sc.Text())

		const n = 24
		var mu sync.Mutex
		var acked []string // estates whose Join returned, before the kill
		var killed sync.Once
		kill := func() {
			killed.Do(func() {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Error(err)
				}
			})
		}
		at := 1 + rand.IntN(5) // kill as the at-th join returns: its writes were just acknowledged
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		for i := range n {
			name := fmt.Sprintf("r%d_%d", run, i)
			s := newStack(t, road.Config{Name: name, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", JoinTimeout: 2 * time.Second})
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Join(ctx, addr); err == nil {
					mu.Lock()
					defer mu.Unlock()
					acked = append(acked, name)
					if len(acked) == at {
						kill()
					}
				}
			}()
		}
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("the main ended with %v before it was killed", err)
		}
		cancel() // the joins under way at the kill fail
		wg.Wait()
		before := acked // every Join that returned was acknowledged before the kill

		k, err := keep.Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		estates, err := k.LoadRemotes()
		if err != nil {
			t.Fatalf("an estate file is not whole: %v", err)
		}
		roles, err := k.LoadRemoteRoles()
		if err != nil {
			t.Fatalf("a role file is not whole: %v", err)
		}
		role := map[string]keep.RemoteRole{}
		for _, r := range roles {
			role[r.Role] = r
		}
		kept := map[string]keep.RemoteEstate{}
		for _, e := range estates {
			kept[e.Name] = e
			if _, ok := role[e.Role]; !ok {
				t.Errorf("estate %s is kept without its role %s", e.Name, e.Role)
			}
		}
		for _, name := range before {
			e, ok := kept[name]
			if !ok || e.Joined == nil || !*e.Joined {
				t.Errorf("%s's join was acknowledged, but the keep has its estate as %+v (kept %v)", name, e, ok)
			}
			if r, ok := role[name]; !ok || r.Acceptance != keep.Accepted {
				t.Errorf("%s's join was acknowledged, but the keep has its role as %+v", name, r)
			}
		}
		if _, err := k.LoadLocal(); err != nil && (len(before) > 0 || !errors.Is(err, fs.ErrNotExist)) {
			t.Errorf("the local estate: %v", err)
		}
		t.Logf("run %d: killed after %d of %d joins were acknowledged; the keep holds %d estates and %d roles",
			run, len(before), n, len(estates), len(roles))
	}
}

// A keep that cannot be written (its directories gone from under the
// running main) fails for good: the join that needed it gets no answer
// that accepts it, later joins are answered keep-busy, and Err says so
// once the main is closed.
func TestKeepWriteFailure(t *testing.T) {
	dir := t.TempDir()
	m := newStack(t, road.Config{Name: "main", Main: true, KeepDir: dir, Auto: keep.AutoAlways})
	// The main's start may still be writing there: a file made between
	// RemoveAll's reading of the directory and its removal leaves it
	// "not empty", so it tries again (a few times: the start writes few).
	role := filepath.Join(dir, "role")
	err := os.RemoveAll(role)
	for try := 0; err != nil && try < 20; try++ {
		time.Sleep(10 * time.Millisecond)
		err = os.RemoveAll(role)
	}
	if err != nil {
		t.Fatal(err)
	}
	o := newStack(t, road.Config{Name: "other", Auto: keep.AutoAlways, JoinTimeout: time.Second})
	_, err = o.Join(ctxT(t, 3*time.Second), m.Addr().String())
	if err == nil {
		t.Fatal("a join succeeded with a keep that cannot be written")
	}
	o2 := newStack(t, road.Config{Name: "other2", Auto: keep.AutoAlways, JoinTimeout: time.Second})
	_, err = o2.Join(ctxT(t, 2*time.Second), m.Addr().String())
	if road.ReasonOf(err) != road.ReasonKeepBusy {
		t.Fatalf("a join after the keep failed: %v; want keep-busy", err)
	}
	c, cerr := m.Counters(ctxT(t, 5*time.Second))
	if cerr != nil {
		t.Fatal(cerr)
	}
	// The first join's response is held and dropped (keep_failed) when
	// the writer fails on its writes; when a write of the main's start
	// met the removed directory first, it is answered keep-busy too.
	if c.Drops["keep_busy"] == 0 {
		t.Fatalf("drops %v; want keep_busy (the joins after the keep failed)", c.Drops)
	}
	t.Logf("drops: keep_failed %d, keep_busy %d", c.Drops["keep_failed"], c.Drops["keep_busy"])
	m.Close()
	if err := m.Err(); !errors.Is(err, road.ErrClosed) || !errors.Is(err, keep.ErrWriterFailed) {
		t.Fatalf("Err after Close: %v; want ErrClosed and keep.ErrWriterFailed", err)
	}
}
