package main

import (
	"bufio"
	"context"
	"math"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// serveEcho starts raet serve --echo with body kind kind, and a stack
// sending bodies of kind bk joined to it; serve's stderr lines come on
// errLines.
func serveEcho(t *testing.T, kind string, bk codec.BodyKind) (*road.Stack, road.Remote, <-chan string, context.Context) {
	t.Helper()
	addr := freePort(t)
	srv := raetCmd(t, "serve", "--keep", filepath.Join(t.TempDir(), "a"), "--listen", addr, "--main",
		"--auto", "always", "--echo", "--body", kind, "--for", "60s")
	errPipe, err := srv.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	errLines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			errLines <- sc.Text()
		}
	}()
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	s, err := road.New(&road.Config{Name: "beta", KeepDir: filepath.Join(t.TempDir(), "b"),
		Listen: "127.0.0.1:0", Auto: keep.AutoAlways, BodyKind: bk})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	t.Cleanup(cancel)
	return s, joinServe(t, ctx, s, addr), errLines, ctx
}

// joinServe joins s to the raet serve at addr, which may not listen yet.
func joinServe(t *testing.T, ctx context.Context, s *road.Stack, addr string) road.Remote {
	t.Helper()
	remote, err := s.Join(ctx, addr)
	for err != nil && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
		remote, err = s.Join(ctx, addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return remote
}

// A body JSON cannot print (a msgpack float inf or NaN) is echoed all the
// same, and serve says on stderr that it did not print it.
func TestServeEchoNonFinite(t *testing.T) {
	s, remote, errLines, ctx := serveEcho(t, "msgpack", codec.BodyKindMsgpack)
	if err := s.Send(ctx, remote.Name, map[string]any{"inf": math.Inf(1), "nan": math.NaN()}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-s.Receive():
		inf, _ := m.Body["inf"].(float64)
		nan, _ := m.Body["nan"].(float64)
		if !math.IsInf(inf, 1) || !math.IsNaN(nan) {
			t.Fatalf("echo %v", m.Body)
		}
	case <-ctx.Done():
		t.Fatal("no echo of a body with inf and NaN")
	}
	for {
		select {
		case line := <-errLines:
			if strings.Contains(line, "not printed") {
				return
			}
		case <-ctx.Done():
			t.Fatal("serve did not say it left the message unprinted")
		}
	}
}

// The road echo of raet serve keeps the body's key order, and a value the
// echo's body kind cannot carry (an integer beyond 64 bits in msgpack) is
// refused, not re-encoded.
func TestServeEchoKeepsWhatItCarries(t *testing.T) {
	for _, kind := range []string{"json", "msgpack"} {
		t.Run(kind, func(t *testing.T) {
			s, remote, errLines, ctx := serveEcho(t, kind, codec.BodyKindJSON)
			body := packet.OrderedMap{{Key: "z", Value: 1},
				{Key: "a", Value: packet.OrderedMap{{Key: "y", Value: "é"}, {Key: "b", Value: []any{2, nil}}}}, {Key: "m", Value: 1.5}}
			if err := s.Send(ctx, remote.Name, body); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-s.Receive():
				ser, err := packet.SerializerFor(m.Kind)
				var om packet.OrderedMap
				if err != nil || ser.Unmarshal(m.Raw, &om) != nil {
					t.Fatalf("echo of kind %v: %x", m.Kind, m.Raw)
				}
				got, _ := packet.JSONBody{}.Marshal(nil, om)
				want, _ := packet.JSONBody{}.Marshal(nil, body)
				if m.Kind.String() != kind || string(got) != string(want) {
					t.Fatalf("echo in %v %s, want in %s %s", m.Kind, got, kind, want)
				}
			case <-ctx.Done():
				t.Fatal("no echo")
			}
			if kind != "msgpack" {
				return
			}
			// 2^70: the msgpack echo is refused, and nothing comes back.
			big70, _ := new(big.Int).SetString("1180591620717411303424", 10)
			if err := s.Send(ctx, remote.Name, packet.OrderedMap{{Key: "n", Value: big70}}); err != nil {
				t.Fatal(err)
			}
			for {
				select {
				case line := <-errLines:
					if strings.Contains(line, "echo") && strings.Contains(line, "cannot carry an integer beyond 64 bits") {
						return
					}
					t.Logf("serve: %s", line)
				case m := <-s.Receive():
					t.Fatalf("echoed %s", m.Raw)
				case <-ctx.Done():
					t.Fatal("no refusal on serve's stderr")
				}
			}
		})
	}
}
