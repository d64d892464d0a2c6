package road_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// wantRaw checks that msg is a raw message from "other" carrying want.
func wantRaw(t *testing.T, msg road.Message, want []byte) {
	t.Helper()
	if msg.From != "other" || msg.Kind != codec.BodyKindRaw || msg.Body != nil || !bytes.Equal(msg.Raw, want) {
		t.Fatalf("got %s %v body %v raw %d bytes %.16x, want raw %d bytes %.16x", msg.From, msg.Kind, msg.Body, len(msg.Raw), msg.Raw, len(want), want)
	}
}

// A []byte or string body given to Send or Go goes raw and arrives as it
// was sent, in Raw with Body nil, at a receiver whose own body kind is
// another; Go copies the bytes, so the caller may reuse them at once; a
// mapping sent next is still a mapping.
func TestSendRaw(t *testing.T) {
	for _, prof := range []road.Profile{road.ProfileAuto, road.ProfileReference} {
		t.Run(fmt.Sprint("profile ", int(prof)), func(t *testing.T) {
			m, o := joined(t, road.Config{BodyKind: codec.BodyKindMsgpack, Profile: prof}, road.Config{Profile: prof})
			ctx := ctxT(t, 20*time.Second)
			if err := o.Send(ctx, "main", []byte("bytes as they are")); err != nil {
				t.Fatal(err)
			}
			wantRaw(t, recvOne(t, m, 5*time.Second), []byte("bytes as they are"))
			if err := o.Send(ctx, "main", "a string, too"); err != nil {
				t.Fatal(err)
			}
			wantRaw(t, recvOne(t, m, 5*time.Second), []byte("a string, too"))
			if err := o.Send(ctx, "main", []byte{}); err != nil {
				t.Fatal(err)
			}
			wantRaw(t, recvOne(t, m, 5*time.Second), nil)

			buf := []byte{0, 1, 2, 0xff}
			c, err := o.Go(ctx, "main", buf, nil)
			if err != nil {
				t.Fatal(err)
			}
			copy(buf, "gone") // Go has taken its copy
			if c = <-c.Done; c.Err != nil {
				t.Fatal(c.Err)
			}
			wantRaw(t, recvOne(t, m, 5*time.Second), []byte{0, 1, 2, 0xff})

			if err := o.Send(ctx, "main", map[string]any{"k": "v"}); err != nil {
				t.Fatal(err)
			}
			if msg := recvOne(t, m, 5*time.Second); msg.Kind != codec.BodyKindJSON || msg.Body["k"] != "v" {
				t.Fatalf("a mapping after raw bodies: %v %v", msg.Kind, msg.Body)
			}
		})
	}
}

// A body that is neither a mapping nor exactly []byte or string is
// ErrNotMapping, wrapping the serializer's *packet.BodyError, and nothing
// is sent; a named []byte type (json.RawMessage) is a mapping to
// serialize, not bytes. The raw kind is no Config.BodyKind: control
// bodies are mappings.
func TestSendRawWrongBody(t *testing.T) {
	m, o := joined(t, road.Config{}, road.Config{})
	ctx := ctxT(t, 20*time.Second)
	for _, body := range []any{42, []int{1, 2}, [3]byte{1, 2, 3}, &[]byte{1}} {
		err := o.Send(ctx, "main", body)
		var be *packet.BodyError
		if !errors.Is(err, road.ErrNotMapping) || !errors.As(err, &be) || be.Op != "marshal" {
			t.Errorf("Send %T: %v", body, err)
		}
		if c, err := o.Go(ctx, "main", body, nil); c != nil || !errors.Is(err, road.ErrNotMapping) {
			t.Errorf("Go %T: %v %v", body, c, err)
		}
	}
	if err := o.Send(ctx, "main", json.RawMessage(`{"pre":"encoded"}`)); err != nil {
		t.Fatal(err)
	}
	if msg := recvOne(t, m, 5*time.Second); msg.Kind != codec.BodyKindJSON || msg.Body["pre"] != "encoded" {
		t.Fatalf("json.RawMessage arrived as %v %v", msg.Kind, msg.Body)
	}
	co, _ := o.Counters(ctx)
	if co.MessagesOut != 1 {
		t.Errorf("%d messages done, want only the json.RawMessage", co.MessagesOut)
	}
	if _, err := road.New(&road.Config{Name: "x", Auto: keep.AutoAlways, Listen: "127.0.0.1:0", BodyKind: codec.BodyKindRaw}); err == nil {
		t.Error("Config.BodyKind raw accepted")
	}
}

// A raw body larger than a packet goes segmented and arrives whole, in
// both profiles.
func TestSendRawSegmented(t *testing.T) {
	body := make([]byte, 20000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	for _, prof := range []road.Profile{road.ProfileAuto, road.ProfileReference} {
		t.Run(fmt.Sprint("profile ", int(prof)), func(t *testing.T) {
			m, o := joined(t, road.Config{Profile: prof}, road.Config{Profile: prof})
			ctx := ctxT(t, 20*time.Second)
			before, _ := o.Counters(ctx)
			if err := o.Send(ctx, "main", body); err != nil {
				t.Fatal(err)
			}
			wantRaw(t, recvOne(t, m, 5*time.Second), body)
			after, _ := o.Counters(ctx)
			if n := after.PacketsOut["message/message"] - before.PacketsOut["message/message"]; n < 2 {
				t.Errorf("%d bytes in %d packets: not segmented", len(body), n)
			}
		})
	}
}

// Small raw messages sent at once go out in bundles; each arrives once,
// intact.
func TestGoRawBundled(t *testing.T) {
	m, o := joined(t, road.Config{}, road.Config{})
	ctx := ctxT(t, 20*time.Second)
	const n = 64
	done := make(chan *road.Call, n)
	buf := make([]byte, 40)
	for i := range n {
		binary.BigEndian.PutUint64(buf, uint64(i))
		copy(buf[8:], fmt.Sprintf("message %d", i))
		if _, err := o.Go(ctx, "main", buf, done); err != nil {
			t.Fatal(err)
		}
	}
	for range n {
		if c := <-done; c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	seen := map[uint64]bool{}
	for range n {
		msg := recvOne(t, m, 5*time.Second)
		if msg.Kind != codec.BodyKindRaw || len(msg.Raw) != len(buf) {
			t.Fatalf("got %v, %d bytes", msg.Kind, len(msg.Raw))
		}
		id := binary.BigEndian.Uint64(msg.Raw)
		want := make([]byte, len(buf))
		binary.BigEndian.PutUint64(want, id)
		copy(want[8:], fmt.Sprintf("message %d", id))
		if id >= n || seen[id] || !bytes.Equal(msg.Raw, want) {
			t.Fatalf("message %d: again (%v) or not intact: %q", id, seen[id], msg.Raw)
		}
		seen[id] = true
	}
	co, _ := o.Counters(ctx)
	if co.PacketsOut["message/bundle"] == 0 {
		t.Errorf("%d raw messages sent at once in no bundle (%d lone)", n, co.PacketsOut["message/message"])
	}
}

// A mapping whose value its body kind cannot carry (an integer beyond 64
// bits in msgpack) is refused with the serializer's error, which says so,
// not ErrNotMapping: the body is a mapping.
func TestSendValueNotCarried(t *testing.T) {
	_, o := joined(t, road.Config{}, road.Config{BodyKind: codec.BodyKindMsgpack})
	ctx := ctxT(t, 20*time.Second)
	big70, _ := new(big.Int).SetString("1180591620717411303424", 10)
	err := o.Send(ctx, "main", map[string]any{"n": big70})
	if err == nil || errors.Is(err, road.ErrNotMapping) || !errors.Is(err, packet.ErrCannotCarry) ||
		!strings.HasPrefix(err.Error(), "raet: message body: ") || !strings.Contains(err.Error(), "integer beyond 64 bits") {
		t.Fatalf("Send of 2^70 in msgpack: %v", err)
	}
}
