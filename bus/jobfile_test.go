package bus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
)

// A pusher with a job file that stops with jobs queued (Push returned, so
// they are on disk) hands them out again when it starts on the same file,
// under the ids Push returned; jobs done before are not handed out again.
func TestJobFileSurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	net := bus.NewMemNet(0)
	wtr, _ := net.Transport("worker")
	t.Cleanup(func() { wtr.Close() })
	worker := newNode(t, wtr, &bus.Config{Heartbeat: 20 * time.Millisecond})
	ctx := ctxT(t, time.Minute)

	ptr, _ := net.Transport("boss")
	boss := newNode(t, ptr, &bus.Config{Heartbeat: 20 * time.Millisecond, JobFile: path})
	pl, err := worker.Pull([]string{"boss"}, 2, func(ctx context.Context, j *bus.Job) (any, error) {
		return j.Body, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := boss.Push(ctx, "job", map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	results(t, boss, 5)
	pl.Close()
	left := map[uint64]int{}
	for i := 5; i < 15; i++ {
		id, err := boss.Push(ctx, "job", map[string]any{"n": i})
		if err != nil {
			t.Fatal(err)
		}
		left[id] = i
	}
	boss.Close()
	ptr.Close()

	ptr2, err := net.Transport("boss")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptr2.Close() })
	boss2 := newNode(t, ptr2, &bus.Config{Heartbeat: 20 * time.Millisecond, JobFile: path})
	if st := boss2.Stats().Pusher; st.Waiting != len(left) {
		t.Fatalf("restarted pusher: %+v, want %d jobs waiting", st, len(left))
	}
	if _, err := worker.Pull([]string{"boss"}, 2, func(ctx context.Context, j *bus.Job) (any, error) {
		return j.Body, nil
	}); err != nil {
		t.Fatal(err)
	}
	for id, r := range results(t, boss2, len(left)) {
		i, ok := left[id]
		if !ok || fmt.Sprint(r.Body.(map[string]any)["n"]) != fmt.Sprint(i) {
			t.Fatalf("after the restart job %d: %+v", id, r)
		}
	}
	boss2.Close()
	ptr2.Close()
	ptr3, err := net.Transport("boss")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptr3.Close() })
	if st := newNode(t, ptr3, &bus.Config{Heartbeat: -1, JobFile: path}).Stats().Pusher; st.Waiting != 0 {
		t.Fatalf("jobs done came back: %+v", st)
	}
}

// jobCrashChildEnv names the job file a re-executed test binary pushes
// jobs into until it is killed.
const jobCrashChildEnv = "RAET_BUS_CRASH_JOBS"

// TestJobFileSurvivesKill: a child process pushes jobs from 4 goroutines
// into a pusher with a job file and no puller, printing each id Push
// acknowledged; it is killed (SIGKILL) mid-stream. A pusher started on the
// file hands out every acknowledged job, under its id, with its body.
func TestJobFileSurvivesKill(t *testing.T) {
	if path := os.Getenv(jobCrashChildEnv); path != "" {
		jobCrashChild(path)
		return
	}
	path := filepath.Join(t.TempDir(), "jobs.db")
	acked := killMidStream(t, "TestJobFileSurvivesKill", jobCrashChildEnv, path, 500)

	net := bus.NewMemNet(0)
	ptr, _ := net.Transport("boss")
	t.Cleanup(func() { ptr.Close() })
	wtr, _ := net.Transport("worker")
	t.Cleanup(func() { wtr.Close() })
	boss := newNode(t, ptr, &bus.Config{Heartbeat: -1, JobFile: path, JobQueue: 10_000})
	worker := newNode(t, wtr, &bus.Config{Heartbeat: -1})
	onDisk := boss.Stats().Pusher.Waiting
	if _, err := worker.Pull([]string{"boss"}, 8, func(ctx context.Context, j *bus.Job) (any, error) {
		return j.Body, nil
	}); err != nil {
		t.Fatal(err)
	}
	got := results(t, boss, onDisk)
	missing := 0
	for id, gk := range acked {
		r, ok := got[id]
		if !ok {
			missing++
			continue
		}
		if b, _ := r.Body.(map[string]any); fmt.Sprint(b["g"], b["k"]) != fmt.Sprint(gk[0], gk[1]) {
			t.Errorf("job %d: body %v, acknowledged as g %d k %d", id, r.Body, gk[0], gk[1])
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged jobs lost by the kill", missing, len(acked))
	}
	t.Logf("%d acknowledged, %d on disk, all handed out again", len(acked), onDisk)
}

// jobCrashChild pushes jobs until killed, printing "id g k" for each
// acknowledged job k of goroutine g.
func jobCrashChild(path string) {
	tr, err := bus.NewMemNet(0).Transport("boss")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n, err := bus.New(tr, &bus.Config{Heartbeat: -1, JobFile: path, JobQueue: 1_000_000})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ackUntilKilled(4, func(g, k int) (uint64, error) {
		return n.Push(context.Background(), "crash", map[string]any{"g": g, "k": k})
	})
}
