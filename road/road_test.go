package road_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(keepKillChildEnv); dir != "" {
		os.Exit(keepKillChild(dir)) // a main for TestKeepAcrossKill
	}
	goleak.VerifyTestMain(m)
}

// newStack starts a stack on loopback; it is closed when the test ends.
func newStack(t testing.TB, cfg road.Config) *road.Stack {
	t.Helper()
	return roadtest.Start(t, cfg)
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func recvOne(t testing.TB, s *road.Stack, d time.Duration) road.Message {
	t.Helper()
	select {
	case m := <-s.Receive():
		return m
	case <-time.After(d):
		t.Fatalf("%s received nothing in %v", s.Name(), d)
	}
	return road.Message{}
}

func TestJoinAllowAndMessages(t *testing.T) {
	main := newStack(t, road.Config{Name: "main", Main: true, Auto: keep.AutoAlways})
	other := newStack(t, road.Config{Name: "other", Auto: keep.AutoAlways})
	ctx := ctxT(t, 10*time.Second)
	r, err := other.Join(ctx, main.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "main" || !r.Allowed || !r.Joined {
		t.Fatalf("joined %+v", r)
	}
	if err := other.Send(ctx, "main", map[string]any{"subject": "hello main", "n": 1}); err != nil {
		t.Fatal(err)
	}
	m := recvOne(t, main, 5*time.Second)
	if m.From != "other" || m.Body["subject"] != "hello main" {
		t.Fatalf("main got %+v", m)
	}
	if err := main.Send(ctx, "other", map[string]any{"subject": "hello other"}); err != nil {
		t.Fatal(err)
	}
	m = recvOne(t, other, 5*time.Second)
	if m.From != "main" || m.Body["subject"] != "hello other" {
		t.Fatalf("other got %+v", m)
	}
}
