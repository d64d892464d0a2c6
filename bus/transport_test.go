package bus_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/netsim"
)

// checkExchange sends a numbered body each way and checks what arrives.
func checkExchange(t *testing.T, a, b bus.Transport) {
	t.Helper()
	ctx := ctxT(t, 30e9)
	for i, p := range [][2]bus.Transport{{a, b}, {b, a}} {
		if err := p[0].Send(ctx, p[1].Name(), map[string]any{"n": i, "s": "x"}); err != nil {
			t.Fatal(err)
		}
		m := recvMsg(t, p[1])
		if m.From != p[0].Name() || fmt.Sprint(m.Body["n"]) != fmt.Sprint(i) || m.Body["s"] != "x" {
			t.Fatalf("%s got %+v", p[1].Name(), m)
		}
	}
}

func TestMemNet(t *testing.T) {
	net := bus.NewMemNet(0)
	a, err := net.Transport("a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.Transport("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := net.Transport("b"); err == nil {
		t.Fatal("a second peer b was made")
	}
	waitPeer(t, a, "b", bus.PeerUp)
	checkExchange(t, a, b)
	// The body is serialized: the receiver's numbers are the stacks' int64.
	if err := a.Send(ctxT(t, 1e9), "b", map[string]any{"n": uint8(3)}); err != nil {
		t.Fatal(err)
	}
	if m := recvMsg(t, b); m.Body["n"] != int64(3) {
		t.Fatalf("n is %T %v", m.Body["n"], m.Body["n"])
	}
	if err := a.Send(ctxT(t, 1e9), "nobody", map[string]any{}); !errors.Is(err, bus.ErrUnknownPeer) {
		t.Fatalf("send to nobody: %v", err)
	}
	b.Close()
	waitPeer(t, a, "b", bus.PeerDown)
	if err := b.Send(ctxT(t, 1e9), "a", map[string]any{}); !errors.Is(err, bus.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	b2, err := net.Transport("b")
	if err != nil {
		t.Fatal(err)
	}
	waitPeer(t, a, "b", bus.PeerUp)
	b2.Leave()
	waitPeer(t, a, "b", bus.PeerGone)
	a.Close()
}

func TestRoadAdapter(t *testing.T) {
	rs := roadNet(t, netsim.Impairment{}, "main", "other")
	waitPeer(t, rs[0], "other", bus.PeerUp)
	checkExchange(t, rs[0], rs[1])
}

func TestLaneAdapter(t *testing.T) {
	dir := laneDir(t)
	a, _ := laneYard(t, dir, "a")
	b, bs := laneYard(t, dir, "b")
	checkExchange(t, a, b)
	waitPeer(t, b, "a", bus.PeerUp)
	waitPeer(t, a, "b", bus.PeerUp)
	b.Close()
	bs.Close()
	err := a.Send(ctxT(t, 5e9), "b", map[string]any{"x": 1})
	if !errors.Is(err, bus.ErrUnknownPeer) {
		t.Fatalf("send to a closed yard: %v", err)
	}
	waitPeer(t, a, "b", bus.PeerGone)
}
