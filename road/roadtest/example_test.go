package roadtest_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

// In a test, t (a *testing.T) is the TB; an example has none, so a
// stand-in runs the cleanups at its end.
type exampleTB struct{ cleanups []func() }

func (*exampleTB) Helper()                  {}
func (*exampleTB) Fatal(args ...any)        { panic(fmt.Sprint(args...)) }
func (tb *exampleTB) Cleanup(f func())      { tb.cleanups = append(tb.cleanups, f) }
func (*exampleTB) Context() context.Context { return context.Background() }
func (tb *exampleTB) end() {
	for _, f := range slices.Backward(tb.cleanups) {
		f()
	}
}

// A pair of estates joined over an in-memory network, one message each
// way. With an Impairment that loses datagrams, run the test in a
// testing/synctest bubble: the resends' timers then fire at once.
func ExampleLossyPair() {
	t := &exampleTB{}
	defer t.end()
	main, other := roadtest.LossyPair(t, 1, netsim.Impairment{}, road.Config{Name: "alpha"}, road.Config{Name: "beta"})
	ctx := t.Context()
	if err := other.Send(ctx, "alpha", map[string]any{"q": "ping"}); err != nil {
		t.Fatal(err)
	}
	m := <-main.Receive()
	fmt.Println(m.From, "sent", m.Body["q"])
	if err := main.Send(ctx, m.From, []byte("pong")); err != nil {
		t.Fatal(err)
	}
	fmt.Println(string((<-other.Receive()).Raw))
	// Output:
	// beta sent ping
	// pong
}

// Start gives a stack on loopback, closed when the test ends.
func ExampleStart() {
	t := &exampleTB{}
	defer t.end()
	s := roadtest.Start(t, road.Config{Name: "alpha"})
	fmt.Println(s.Name(), s.Addr().Addr().IsLoopback())
	// Output:
	// alpha true
}
