package host_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/plugins/sdk"
)

// A serializer plugin that answers 8 MiB per item to six callers at once:
// under a budget of two calls' room the plugin never has more than two
// calls at once (the others wait their turn and all succeed), and nothing
// is held once they returned.
func TestAnswerBudget(t *testing.T) {
	spec := faultySpec("serializer")
	h, _ := newHost(t, host.Config{MaxBytesInFlight: 2*sdk.MaxCallSize + 1<<20}, spec)
	ctx := ctxT(t, time.Minute)
	s, err := h.SerializerPlugin(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	const callers, answer = 6, 8 << 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			rs, err := s.Encode(ctx, [][]byte{[]byte(`{"x":"SLOW BIG:` + strconv.Itoa(answer) + `"}`)})
			switch {
			case err != nil:
				errs <- err
			case len(rs[0].Data) != answer:
				errs <- errors.New("answer of " + strconv.Itoa(len(rs[0].Data)) + " bytes")
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a caller under the budget: %v", err)
	}
	rs, err := s.Encode(ctx, [][]byte{[]byte(`{"x":"CALLS"}`)})
	if err != nil {
		t.Fatal(err)
	}
	most, err := strconv.Atoi(string(rs[0].Data))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d callers of 8 MiB answers: at most %d calls in the plugin at once", callers, most)
	if most > 2 {
		t.Fatalf("%d calls in flight at once; the budget has room for 2", most)
	}
	if st, _ := h.Status("faulty"); st.BytesInFlight != 0 {
		t.Fatalf("%d bytes in flight after every call returned", st.BytesInFlight)
	}
}

// A call that finds no room waits up to its deadline, then fails with
// ErrOverBudget in a *CallError; once the call in flight returns, calls go
// again.
func TestAnswerBudgetDeadline(t *testing.T) {
	h, _ := newHost(t, host.Config{MaxBytesInFlight: 1}, faultySpec("serializer"))
	ctx := ctxT(t, time.Minute)
	s, err := h.SerializerPlugin(ctx, "faulty")
	if err != nil {
		t.Fatal(err)
	}
	slow := make(chan error, 1)
	go func() {
		_, err := s.Encode(ctx, [][]byte{[]byte(`{"x":"SLOW"}`)})
		slow <- err
	}()
	waitFor(t, 5*time.Second, "the slow call in flight", func() bool {
		st, _ := h.Status("faulty")
		return st.BytesInFlight > 0
	})
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = s.Encode(short, [][]byte{[]byte(`{"x":1}`)})
	var ce *host.CallError
	if !errors.Is(err, host.ErrOverBudget) || !errors.As(err, &ce) || ce.Plugin != "faulty" || ce.Op != "Encode" {
		t.Fatalf("a call beside one that fills the budget: %v; want a *CallError wrapping ErrOverBudget", err)
	}
	if err := <-slow; err != nil {
		t.Fatalf("the slow call: %v", err)
	}
	if rs, err := s.Encode(ctx, [][]byte{[]byte(`{"x":1}`)}); err != nil || string(rs[0].Data) != `{"x":1}` {
		t.Fatalf("after the budget came back: %v", err)
	}
}
