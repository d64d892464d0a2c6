package road_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// goCalls sends n messages {"n": i} with Go to the remote named to, all
// outcomes to done, and returns the Calls in the order sent.
func goCalls(t *testing.T, s *road.Stack, ctx context.Context, to string, n int, done chan *road.Call) []*road.Call {
	t.Helper()
	calls := make([]*road.Call, n)
	for i := range calls {
		c, err := s.Go(ctx, to, map[string]any{"n": i}, done)
		if err != nil {
			t.Fatalf("Go %d: %v", i, err)
		}
		if c.To != to || c.Done != done {
			t.Fatalf("Go %d returned %+v", i, c)
		}
		calls[i] = c
	}
	return calls
}

// outcomes reads n Calls from done, each of calls once.
func outcomes(t *testing.T, done chan *road.Call, calls []*road.Call, d time.Duration) []*road.Call {
	t.Helper()
	want := map[*road.Call]bool{}
	for _, c := range calls {
		want[c] = true
	}
	var got []*road.Call
	deadline := time.After(d)
	for len(got) < len(calls) {
		select {
		case c := <-done:
			if !want[c] {
				t.Fatalf("an outcome of a Call not sent, or twice: %+v", c)
			}
			delete(want, c)
			got = append(got, c)
		case <-deadline:
			t.Fatalf("%d of %d outcomes in %v", len(got), len(calls), d)
		}
	}
	return got
}

// Many messages in flight from one goroutine, their outcomes on a channel
// with less room than that (so some wait in the stack): each Call comes
// back once, done, and each message is delivered once.
func TestGoManyInFlight(t *testing.T) {
	m, o := joined(t, road.Config{}, road.Config{})
	ctx := ctxT(t, 30*time.Second)
	const n = 300
	done := make(chan *road.Call, 4)
	calls := goCalls(t, o, ctx, "main", n, done)
	seen := map[string]bool{}
	for range n {
		msg := recvOne(t, m, 10*time.Second)
		k := fmt.Sprint(msg.Body["n"])
		if seen[k] {
			t.Fatalf("message %s delivered twice", k)
		}
		seen[k] = true
	}
	for _, c := range outcomes(t, done, calls, 10*time.Second) {
		if c.Err != nil {
			t.Errorf("message %v: %v", c.Body, c.Err)
		}
	}
}

// Outcomes come in the order they are known, also through a done channel
// with room for one that is not read until all are known: to an unknown
// remote each fails as the owner takes it, in the order of Go.
func TestGoOutcomeOrder(t *testing.T) {
	_, o := joined(t, road.Config{}, road.Config{})
	ctx := ctxT(t, 30*time.Second)
	done := make(chan *road.Call, 1)
	unknown := goCalls(t, o, ctx, "nobody", 50, done)
	known := goCalls(t, o, ctx, "main", 1, done)
	got := outcomes(t, done, append(unknown, known...), 10*time.Second)
	for i, c := range got[:len(unknown)] {
		if c != unknown[i] {
			t.Fatalf("outcome %d is of message %v", i, c.Body)
		}
		if !errors.Is(c.Err, road.ErrUnknownRemote) {
			t.Fatalf("to an unknown remote: %v", c.Err)
		}
	}
	if c := got[len(got)-1]; c.Err != nil {
		t.Fatalf("to main: %v", c.Err)
	}
}

// A message stays in the send queue (SendQueue) until its outcome is
// handed over: with the one place taken, Go waits until ctx ends, or with
// FailFast fails at once; neither returns a Call. Close fails the Call
// still outstanding with ErrClosed and hands it over.
func TestGoQueueFullAndClose(t *testing.T) {
	for _, failFast := range []bool{false, true} {
		t.Run(fmt.Sprint("failfast=", failFast), func(t *testing.T) {
			m, o := joined(t, road.Config{}, road.Config{SendQueue: 1, FailFast: failFast, MessageTimeout: time.Hour})
			m.Close() // nothing answers: the message stays outstanding
			ctx := ctxT(t, 30*time.Second)
			done := make(chan *road.Call, 1)
			first, err := o.Go(ctx, "main", map[string]any{"n": 1}, done)
			if err != nil {
				t.Fatal(err)
			}
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			c, err := o.Go(short, "main", map[string]any{"n": 2}, done)
			want := context.DeadlineExceeded
			if failFast {
				want = road.ErrQueueFull
			}
			if !errors.Is(err, want) || c != nil {
				t.Fatalf("Go with the queue full: %v, %v; want %v and no Call", c, err, want)
			}
			o.Close()
			select {
			case c := <-done:
				if c != first || !errors.Is(c.Err, road.ErrClosed) {
					t.Fatalf("after Close: %v (%v)", c.Body, c.Err)
				}
			default:
				t.Fatal("Close returned, and the outstanding Call has no outcome")
			}
			if _, err := o.Go(ctx, "main", map[string]any{"n": 3}, done); !errors.Is(err, road.ErrClosed) {
				t.Fatalf("Go after Close: %v", err)
			}
		})
	}
}

// Close fails every Call outstanding, also more than done has room for,
// and lingers while done is read, so each one's outcome is handed over.
func TestGoCloseOutstanding(t *testing.T) {
	m, o := joined(t, road.Config{}, road.Config{MessageTimeout: time.Hour})
	m.Close()
	ctx := ctxT(t, 30*time.Second)
	done := make(chan *road.Call, 4)
	calls := goCalls(t, o, ctx, "main", 40, done)
	read := make(chan *road.Call, len(calls))
	go func() { // reads done while Close runs
		for range calls {
			select {
			case c := <-done:
				read <- c
			case <-time.After(10 * time.Second):
				return
			}
		}
	}()
	o.Close()
	for _, c := range outcomes(t, read, calls, 10*time.Second) {
		if !errors.Is(c.Err, road.ErrClosed) {
			t.Errorf("message %v: %v, want ErrClosed", c.Body, c.Err)
		}
	}
}

// With a Queue, a Call comes back once the Queue has forgotten its message.
func TestGoQueueForgets(t *testing.T) {
	q := &memQueue{}
	m, o := joined(t, road.Config{}, road.Config{Queue: q})
	ctx := ctxT(t, 30*time.Second)
	done := make(chan *road.Call, 8)
	calls := goCalls(t, o, ctx, "main", 20, done)
	for range calls {
		recvOne(t, m, 10*time.Second)
	}
	for _, c := range outcomes(t, done, calls, 10*time.Second) {
		if c.Err != nil {
			t.Errorf("message %v: %v", c.Body, c.Err)
		}
	}
	if left := q.len(); left != 0 {
		t.Fatalf("%d messages still queued after the last outcome", left)
	}
}

func TestGoNotStarted(t *testing.T) {
	s, err := road.New(&road.Config{Name: "idle", Auto: keep.AutoAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Go(context.Background(), "main", map[string]any{}, nil); !errors.Is(err, road.ErrNotStarted) {
		t.Fatalf("Go before Start: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Go with an unbuffered done did not panic")
		}
	}()
	s.Go(context.Background(), "main", map[string]any{}, make(chan *road.Call))
}

// The hand-off of a message to the owner goroutine and of its outcome
// back allocates nothing: a Send (to an unknown remote, so that the core
// does no more than look it up) costs no allocation, since its serialized
// body goes into a pooled buffer that comes back with the outcome; a Go
// one, its Call; a raw body the same (its copy is pooled too). (make
// allocs; -race skips it.)
func TestSendHandOffAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("-race allocates, and sync.Pool drops at random under it")
	}
	s := newStack(t, road.Config{Name: "alone", Auto: keep.AutoAlways})
	ctx := context.Background()
	done := make(chan *road.Call, 1)
	for _, b := range []struct {
		name string
		body any
	}{{"mapping", map[string]any{"data": "x"}}, {"raw", []byte("x")}} {
		for _, tc := range []struct {
			name string
			max  float64
			f    func()
		}{
			{"Send", 0, func() {
				if err := s.Send(ctx, "nobody", b.body); !errors.Is(err, road.ErrUnknownRemote) {
					t.Fatal(err)
				}
			}},
			{"Go", 1, func() {
				if _, err := s.Go(ctx, "nobody", b.body, done); err != nil {
					t.Fatal(err)
				}
				if c := <-done; !errors.Is(c.Err, road.ErrUnknownRemote) {
					t.Fatal(c.Err)
				}
			}},
		} {
			if n := testing.AllocsPerRun(1000, tc.f); n > tc.max {
				t.Errorf("%s %s: %v allocations, want at most %v", tc.name, b.name, n, tc.max)
			}
		}
	}
}
