package host_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/codec/native"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/road"
)

// helperZstdJSON starts, in a helper process, a host of its own running
// the zstdjson plugin from RAET_PLUGINS_TEST_BIN, and returns its
// serializer.
func helperZstdJSON() (*host.Host, *host.Serializer, error) {
	h, err := host.New(&host.Config{Plugins: []host.Spec{{Name: "zstdjson", Provides: "serializer",
		Path: filepath.Join(os.Getenv("RAET_PLUGINS_TEST_BIN"), "raet-serializer-zstdjson")}}})
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ser, err := h.Serializer(ctx, "zstdjson")
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return h, ser, nil
}

// runEstate is the helper estate of TestRoadSerializerPlugin: a main
// estate whose own host runs the zstdjson plugin, sending with it and
// decoding with it, which echoes every message back. It prints its
// address and ends when its stdin closes (or after a minute).
func runEstate() int {
	h, ser, err := helperZstdJSON()
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := ser.Register(nil); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	keepDir, _ := os.MkdirTemp("", "raet-estate-")
	defer os.RemoveAll(keepDir)
	s, err := road.New(&road.Config{Name: "echo", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0",
		AlivePeriod: -1, KeepDir: keepDir, Serializer: ser})
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	if err := s.Start(); err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	defer s.Close()
	fmt.Println("ADDR", s.Addr())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	for {
		select {
		case <-ctx.Done():
			return 0
		case m := <-s.Receive():
			if m.Kind != codec.BodyKindZstdJSON {
				m.Body = map[string]any{"error": "received body kind " + m.Kind.String()}
			}
			go s.Send(ctx, m.From, m.Body)
		}
	}
}

// Two estates in two processes, each with its own zstdjson plugin
// subprocess, exchange messages: each sends with the plugin's body kind
// and decodes what it receives with its plugin.
func TestRoadSerializerPlugin(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=estate", "RAET_PLUGINS_TEST_BIN="+binDir)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}()
	var addr string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if a, ok := strings.CutPrefix(line, "ADDR "); ok {
			addr = a
			break
		}
		t.Fatalf("estate: %s", line)
	}
	if addr == "" {
		t.Fatal("the estate printed no address")
	}

	h, _ := newHost(t, host.Config{}, zstdSpec())
	ctx := ctxT(t, time.Minute)
	ser, err := h.Serializer(ctx, "zstdjson")
	if err != nil {
		t.Fatal(err)
	}
	if err := ser.Register(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ser.Unregister)
	s, err := road.New(&road.Config{Name: "asker", Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1,
		KeepDir: t.TempDir(), Serializer: ser})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Join(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	sent := map[int64]map[string]any{}
	for i := range int64(n) {
		body := map[string]any{"seq": i, "text": strings.Repeat(fmt.Sprintf("message %d ", i), 100), "nested": map[string]any{"ok": true}}
		sent[i] = body
		if err := s.Send(ctx, r.Name, body); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for range n {
		select {
		case m := <-s.Receive():
			if m.Kind != codec.BodyKindZstdJSON {
				t.Fatalf("echo of kind %v: %v", m.Kind, m.Body)
			}
			seq, _ := m.Body["seq"].(int64)
			if !reflect.DeepEqual(m.Body, sent[seq]) {
				t.Fatalf("echo %d differs: %v", seq, m.Body)
			}
			if len(m.Raw) > 200 { // ~1.1 KiB of JSON, compressed on the wire
				t.Fatalf("a body of %d bytes on the wire: not compressed", len(m.Raw))
			}
			delete(sent, seq)
		case <-ctx.Done():
			t.Fatalf("%d echoes missing", len(sent))
		}
	}
}

// A packet whose body is serialized by the zstdjson plugin and coated by
// the xchacha plugin in one pair of processes is parsed, opened and
// decoded by another pair, with the other end's keys.
func TestPacketWithCoatAndSerializerPlugins(t *testing.T) {
	ctx := ctxT(t, time.Minute)
	ends := make([]struct {
		ser  *host.Serializer
		coat *host.Coat
	}, 2)
	for i := range ends {
		h, _ := newHost(t, host.Config{}, zstdSpec(), xchachaSpec())
		var err error
		if ends[i].ser, err = h.Serializer(ctx, "zstdjson"); err != nil {
			t.Fatal(err)
		}
		if ends[i].coat, err = h.Coat(ctx, "xchacha"); err != nil {
			t.Fatal(err)
		}
	}
	aPriv, aPub := keyPair(t)
	bPriv, bPub := keyPair(t)
	sealer, err := ends[0].coat.Session(aPriv, bPub)
	if err != nil {
		t.Fatal(err)
	}
	opener, err := ends[1].coat.Session(bPriv, aPub)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"route": "a→b", "data": strings.Repeat("x", 500)}
	plain, err := ends[0].ser.Marshal(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	coat, err := sealer.Seal(nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	h := codec.Head{SegmentCount: 1, PacketKind: codec.PacketKindMessage, TransactionKind: codec.TransactionKindMessage,
		SourceID: 2, DestinationID: 3, BodyKind: ends[0].ser.Kind(), CoatKind: sealer.Kind()}
	pk := packet.Packer{Codec: native.Codec{}, Foot: packet.NadaFoot{}}
	pkt, err := pk.Pack(nil, &h, coat)
	if err != nil {
		t.Fatal(err)
	}

	var p packet.Packet
	if err := packet.Parse(pkt, &p); err != nil {
		t.Fatal(err)
	}
	if p.Head.BodyKind != codec.BodyKindZstdJSON || p.Head.CoatKind != codec.CoatKindXChaCha {
		t.Fatalf("head %+v", p.Head)
	}
	opened, err := p.Open(nil, opener)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := ends[1].ser.Unmarshal(opened, &got); err != nil || !reflect.DeepEqual(got, body) {
		t.Fatalf("%v %v", got, err)
	}
	pkt[len(pkt)-5] ^= 1
	if err := packet.Parse(pkt, &p); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Open(nil, opener); !errors.Is(err, packet.ErrCoatOpen) {
		t.Fatalf("tampered: %v", err)
	}
}

// The durable queue plugin is killed (SIGKILL) while messages stream into
// it: the calls in flight fail clearly, it is started again, and no
// message whose Put succeeded is lost.
func TestDurableQueueKilledMidStream(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	h, _ := newHost(t, host.Config{MinBackoff: 20 * time.Millisecond}, boltSpec(db))
	ctx := ctxT(t, 2*time.Minute)
	q, err := h.Queue(ctx, "bolt")
	if err != nil {
		t.Fatal(err)
	}
	pid := pidOf(t, h, "bolt")
	var acked []uint64
	var failed []error
	killed := false
	for i := 0; i < 5000 && len(acked) < 600; i++ {
		if len(acked) == 200 && !killed {
			go syscall.Kill(pid, syscall.SIGKILL) // lands during one of the next calls
			killed = true
		}
		id, err := q.Put("remote", codec.BodyKindJSON, fmt.Appendf(nil, `{"i":%d}`, i))
		if err != nil {
			failed = append(failed, err)
			continue
		}
		acked = append(acked, id)
	}
	if len(acked) < 600 {
		t.Fatalf("only %d puts succeeded; errors: %v", len(acked), failed)
	}
	for _, err := range failed {
		var ce *host.CallError
		if !errors.As(err, &ce) || !(errors.Is(err, host.ErrCrashed) || errors.Is(err, host.ErrUnavailable)) {
			t.Fatalf("an unclear error: %v", err)
		}
	}
	st, _ := h.Status("bolt")
	if st.Restarts != 1 || st.PID == pid {
		t.Fatalf("not restarted: %+v", st)
	}
	pending, err := q.Pending()
	if err != nil {
		t.Fatal(err)
	}
	have := map[uint64]bool{}
	for _, m := range pending {
		have[m.ID] = true
	}
	for _, id := range acked {
		if !have[id] {
			t.Fatalf("message %d was put and is lost", id)
		}
	}
	t.Logf("%d puts acknowledged, %d failed around the kill (%v), %d pending", len(acked), len(failed), firstErr(failed), len(pending))
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// A real stack restart with the durable queue plugin: a message sent while
// its remote is down stays in the queue; the sender crashes (its stack and
// its plugin die); a new sender process state (new host, new plugin, same
// database) sends it once the remote is back.
func TestRoadDurableQueueAcrossRestart(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.db")
	ctx := ctxT(t, 2*time.Minute)
	mcfg := road.Config{Name: "main", Main: true, KeepDir: t.TempDir(), Auto: keep.AutoAlways, Listen: "127.0.0.1:0",
		AlivePeriod: 100 * time.Millisecond}
	m := startStack(t, mcfg)

	h1, _ := newHost(t, host.Config{}, boltSpec(db))
	q1, err := h1.Queue(ctx, "bolt")
	if err != nil {
		t.Fatal(err)
	}
	ocfg := road.Config{Name: "other", KeepDir: t.TempDir(), Auto: keep.AutoAlways, Listen: "127.0.0.1:0", Queue: q1,
		MessageTimeout: 300 * time.Millisecond, AlivePeriod: 100 * time.Millisecond}
	o := startStack(t, ocfg)
	if _, err := o.Join(ctx, m.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := o.Send(ctx, "main", map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	recv(t, m, 5*time.Second)
	if p, _ := q1.Pending(); len(p) != 0 {
		t.Fatalf("%d messages left after done", len(p))
	}
	mcfg.Listen = m.Addr().String()
	m.Close()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err = o.Send(sctx, "main", map[string]any{"n": 2, "while": "down"})
	cancel()
	if err == nil {
		t.Fatal("a send to a closed estate succeeded")
	}
	if p, _ := q1.Pending(); len(p) != 1 {
		t.Fatalf("the queue holds %d messages", len(p))
	}
	// The sender crashes: its plugin is SIGKILLed, nothing is closed cleanly.
	syscall.Kill(pidOf(t, h1, "bolt"), syscall.SIGKILL)
	ocfg.Listen = o.Addr().String()
	o.Close()
	h1.Close()

	m2 := startStack(t, mcfg)
	h2, _ := newHost(t, host.Config{}, boltSpec(db))
	q2, err := h2.Queue(ctx, "bolt")
	if err != nil {
		t.Fatal(err)
	}
	ocfg.Queue = q2
	startStack(t, ocfg)
	got := recv(t, m2, 20*time.Second)
	if got.Body["while"] != "down" {
		t.Fatalf("got %+v", got.Body)
	}
	waitFor(t, 5*time.Second, "the queue emptied", func() bool {
		p, err := q2.Pending()
		return err == nil && len(p) == 0
	})
}

// startable is what a road and a lane stack share for these tests.
type startable interface {
	Start() error
	Close() error
}

// started starts s (made with err), closed when the test ends.
func started[S startable](t testing.TB, s S, err error) S {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// received is the next message on ch, or a failure after d.
func received[M any](t *testing.T, who string, ch <-chan M, d time.Duration) M {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(d):
		t.Fatalf("%s received nothing in %v", who, d)
	}
	var zero M
	return zero
}

func startStack(t *testing.T, cfg road.Config) *road.Stack {
	t.Helper()
	s, err := road.New(&cfg)
	return started(t, s, err)
}

func recv(t *testing.T, s *road.Stack, d time.Duration) road.Message {
	t.Helper()
	return received(t, s.Name(), s.Receive(), d)
}
