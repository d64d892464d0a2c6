package bus_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
)

// Jobs over every transport are done, each reported once, and no puller
// has more jobs at once than its credit.
func TestPushPull(t *testing.T) {
	for _, k := range []netKind{memKind(), roadKind(0), roadKind(0.10), laneKind()} {
		t.Run(k.name, func(t *testing.T) {
			ns := nodes(t, k.make(t, "pusher", "p1", "p2"), &bus.Config{Heartbeat: -1})
			var busy, most [2]atomic.Int64
			for i := range 2 {
				h := func(ctx context.Context, j *bus.Job) (any, error) {
					if b := busy[i].Add(1); b > most[i].Load() {
						most[i].Store(b)
					}
					defer busy[i].Add(-1)
					time.Sleep(time.Millisecond)
					return map[string]any{"by": i, "n": j.Body.(map[string]any)["n"]}, nil
				}
				if _, err := ns[i+1].Pull([]string{"pusher"}, 3, h); err != nil {
					t.Fatal(err)
				}
			}
			// Both pullers' credit must have reached the pusher before the
			// jobs, or under loss one puller can take them all.
			for i := 0; ns[0].Stats().Pusher.Pullers < 2; i++ {
				if i == 3000 {
					t.Fatalf("pusher sees %d pullers after 30 s", ns[0].Stats().Pusher.Pullers)
				}
				time.Sleep(10 * time.Millisecond)
			}
			const n = 120
			ctx := ctxT(t, time.Minute)
			ids := map[uint64]int{}
			for i := range n {
				id, err := ns[0].Push(ctx, "job.x", map[string]any{"n": i})
				if err != nil {
					t.Fatal(err)
				}
				ids[id] = i
			}
			results := results(t, ns[0], n)
			var by [2]int
			for id, r := range results {
				if i, ok := ids[id]; !ok || r.Err != "" || fmt.Sprint(r.Body.(map[string]any)["n"]) != fmt.Sprint(i) {
					t.Fatalf("job %d: %+v", id, r)
				}
				by[map[string]int{"p1": 0, "p2": 1}[r.Puller]]++
			}
			for i := range 2 {
				if most[i].Load() > 3 {
					t.Fatalf("puller %d ran %d jobs at once with a credit of 3", i+1, most[i].Load())
				}
				if by[i] == 0 {
					t.Fatalf("puller %d got no job: %v", i+1, by)
				}
			}
			if st := ns[0].Stats().Pusher; st.Done != n || st.InFlight != 0 || st.Waiting != 0 || st.Pullers != 2 {
				t.Fatalf("pusher stats %+v", st)
			}
		})
	}
}

// results reads n job results and checks that each job id comes once.
func results(t *testing.T, pusher *bus.Node, n int) map[uint64]bus.JobResult {
	t.Helper()
	out := map[uint64]bus.JobResult{}
	deadline := time.After(time.Minute)
	for len(out) < n {
		select {
		case r := <-pusher.Results():
			if _, dup := out[r.ID]; dup {
				t.Fatalf("job %d reported done twice", r.ID)
			}
			out[r.ID] = r
		case <-deadline:
			t.Fatalf("%d of %d jobs done", len(out), n)
		}
	}
	select {
	case r := <-pusher.Results():
		t.Fatalf("an extra result %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
	return out
}

// A puller killed mid-job (its stack closed, no done sent) has its jobs
// finished by another, and the pusher counts every job done exactly once.
func TestPullerKilledMidJob(t *testing.T) {
	for _, w := range worlds(t) {
		t.Run(w.name, func(t *testing.T) {
			ptr, _ := w.open(t, "pusher-"+w.name)
			pusher := newNode(t, ptr, &bus.Config{Heartbeat: 20 * time.Millisecond, JobTimeout: 5 * time.Second})
			vtr, kill := w.open(t, "victim-"+w.name)
			victim := newNode(t, vtr, &bus.Config{Heartbeat: 20 * time.Millisecond})
			started := make(chan uint64, 100)
			var mu sync.Mutex
			inHand := map[uint64]bool{}
			if _, err := victim.Pull([]string{pusher.Name()}, 4, func(ctx context.Context, j *bus.Job) (any, error) {
				mu.Lock()
				inHand[j.ID] = true
				mu.Unlock()
				started <- j.ID
				<-ctx.Done() // never finishes
				return nil, ctx.Err()
			}); err != nil {
				t.Fatal(err)
			}
			const n = 40
			ctx := ctxT(t, time.Minute)
			for i := range n {
				if _, err := pusher.Push(ctx, "job", map[string]any{"n": i}); err != nil {
					t.Fatal(err)
				}
			}
			for range 4 { // the victim holds 4 jobs
				<-started
			}
			victim.Close()
			kill()
			str, _ := w.open(t, "survivor-"+w.name)
			survivor := newNode(t, str, &bus.Config{Heartbeat: 20 * time.Millisecond})
			if _, err := survivor.Pull([]string{pusher.Name()}, 2, func(ctx context.Context, j *bus.Job) (any, error) {
				return map[string]any{"n": j.Body.(map[string]any)["n"]}, nil
			}); err != nil {
				t.Fatal(err)
			}
			res := results(t, pusher, n)
			mu.Lock()
			defer mu.Unlock()
			for id := range inHand {
				if r := res[id]; r.Puller != survivor.Name() || r.Attempts < 2 {
					t.Fatalf("job %d held by the victim: %+v", id, r)
				}
			}
			if st := pusher.Stats().Pusher; st.Done != n || st.Reassigned < 4 {
				t.Fatalf("pusher stats %+v", st)
			}
		})
	}
}

// A job not done within the job timeout goes to another puller; when the
// first one reports it done after all, the pusher ignores the duplicate.
func TestJobTimeoutReassigns(t *testing.T) {
	trs := memKind().make(t, "pusher", "slow", "fast")
	pusher := newNode(t, trs[0], &bus.Config{Heartbeat: 20 * time.Millisecond, JobTimeout: 100 * time.Millisecond})
	slow := newNode(t, trs[1], &bus.Config{Heartbeat: 20 * time.Millisecond})
	fast := newNode(t, trs[2], &bus.Config{Heartbeat: 20 * time.Millisecond})
	release := make(chan struct{})
	if _, err := slow.Pull([]string{"pusher"}, 1, func(ctx context.Context, j *bus.Job) (any, error) {
		<-release
		return "slow", nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, time.Minute)
	id, err := pusher.Push(ctx, "job", "x")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if st := pusher.Stats().Pusher; st.InFlight != 1 {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	if _, err := fast.Pull([]string{"pusher"}, 1, func(ctx context.Context, j *bus.Job) (any, error) {
		return "fast", nil
	}); err != nil {
		t.Fatal(err)
	}
	res := results(t, pusher, 1)
	if r := res[id]; r.Puller != "fast" || r.Body != "fast" || r.Attempts < 2 {
		t.Fatalf("result %+v", r)
	}
	close(release) // the slow puller's done comes late
	// Every attempt after the first comes from a reassignment (a loaded
	// machine may reassign more than once), and each one's done but the
	// first is a duplicate, counted and not delivered again.
	eventually(t, func() error {
		if st := pusher.Stats().Pusher; st.Done != 1 || st.Duplicates < 1 || st.Duplicates != st.Reassigned {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
}
