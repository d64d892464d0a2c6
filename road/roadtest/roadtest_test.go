package roadtest_test

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

// Start gives a running stack on loopback, closed when the test ends.
func TestStart(t *testing.T) {
	defer goleak.VerifyNone(t)
	var s *road.Stack
	t.Run("inner", func(t *testing.T) {
		s = roadtest.Start(t, road.Config{Name: "a", AlivePeriod: -1})
		if !s.Addr().Addr().IsLoopback() || s.Addr().Port() == 0 {
			t.Fatalf("listens on %v", s.Addr())
		}
		if _, err := s.Remotes(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := s.Remotes(context.Background()); !errors.Is(err, road.ErrClosed) {
		t.Fatalf("after the test: %v, want ErrClosed", err)
	}
}
