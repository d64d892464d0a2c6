// Command raet-test-faulty is a plugin for the host's fault tests. The
// environment variable RAET_FAULTY picks its behaviour:
//
//	serializer  a pass-through serializer of body kind 200 (interchange
//	            json) whose items can ask it to misbehave: an item
//	            containing "HANG" never gets an answer, "CRASH" makes the
//	            process exit during the call, "SLOW" answers after 200ms,
//	            "BIG:N" answers N bytes, and "CALLS" answers the most
//	            calls the plugin has had in progress at once so far
//	queue-v1    an in-memory queue serving only protocol version 1
//	junk        writes a line to stdout before its handshake
//	v99         offers only protocol version 99
//	exit        exits before its handshake, with a message on stderr
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/sdk"
)

func main() {
	log := sdk.Logger("faulty")
	mode := os.Getenv("RAET_FAULTY")
	log.Info("faulty plugin starting", "mode", mode, "pid", os.Getpid())
	switch mode {
	case "serializer", "":
		sdk.Serve(passthrough{}, sdk.WithLogger(log))
	case "queue-v1":
		sdk.Serve(&memQueue{}, sdk.WithLogger(log), sdk.WithVersions(sdk.Version1))
	case "junk":
		fmt.Println("hello from a plugin that prints to stdout")
		sdk.Serve(passthrough{}, sdk.WithLogger(log))
	case "v99":
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  sdk.Handshake,
			VersionedPlugins: map[int]plugin.PluginSet{99: {sdk.KindSerializer: &sdk.SerializerPlugin{Impl: passthrough{}}}},
			GRPCServer:       sdk.GRPCServer,
			Logger:           log,
		})
	case "exit":
		fmt.Fprintln(os.Stderr, "faulty: giving up at once")
		os.Exit(4)
	default:
		fmt.Fprintln(os.Stderr, "faulty: unknown RAET_FAULTY", mode)
		os.Exit(2)
	}
}

// Kind is the body kind of the pass-through serializer.
const Kind codec.BodyKind = 200

type passthrough struct{}

func (passthrough) Info(context.Context) (sdk.SerializerInfo, error) {
	return sdk.SerializerInfo{Kind: Kind, Name: "faulty", Interchange: codec.BodyKindJSON, Version: "0"}, nil
}

// calls counts the calls in progress, most the most at once.
var calls, most atomic.Int64

func (passthrough) run(bodies [][]byte) []sdk.Result {
	n := calls.Add(1)
	defer calls.Add(-1)
	for {
		if m := most.Load(); n <= m || most.CompareAndSwap(m, n) {
			break
		}
	}
	out := make([]sdk.Result, len(bodies))
	for i, b := range bodies {
		if bytes.Contains(b, []byte("SLOW")) {
			time.Sleep(200 * time.Millisecond)
		}
		if _, size, ok := bytes.Cut(b, []byte("BIG:")); ok {
			n, _ := strconv.Atoi(string(bytes.TrimRight(size, `"}`)))
			out[i].Data = bytes.Repeat([]byte{'x'}, n)
			continue
		}
		if bytes.Contains(b, []byte("CALLS")) {
			out[i].Data = strconv.AppendInt(nil, most.Load(), 10)
			continue
		}
		switch {
		case bytes.Contains(b, []byte("HANG")):
			time.Sleep(time.Hour) // ignores the deadline, as a stuck plugin would
		case bytes.Contains(b, []byte("CRASH")):
			os.Exit(3)
		case bytes.Contains(b, []byte("BADITEM")):
			out[i].Err = fmt.Errorf("%w: this item is bad", sdk.ErrMalformed)
		}
		if out[i].Err == nil {
			out[i].Data = b
		}
	}
	return out
}

func (p passthrough) Encode(_ context.Context, bodies [][]byte) ([]sdk.Result, error) {
	return p.run(bodies), nil
}

func (p passthrough) Decode(_ context.Context, bodies [][]byte) ([]sdk.Result, error) {
	return p.run(bodies), nil
}

type memQueue struct {
	mu   sync.Mutex
	next uint64
	msgs []sdk.Message
}

func (q *memQueue) Info(context.Context) (sdk.QueueInfo, error) {
	return sdk.QueueInfo{Name: "faulty-v1", Version: "0"}, nil
}

func (q *memQueue) Put(_ context.Context, msgs []sdk.Message) ([]uint64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := make([]uint64, len(msgs))
	for i, m := range msgs {
		q.next++
		m.ID = q.next
		q.msgs = append(q.msgs, m)
		ids[i] = q.next
	}
	return ids, nil
}

func (q *memQueue) Done(_ context.Context, ids []uint64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, id := range ids {
		for i, m := range q.msgs {
			if m.ID == id {
				q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
				break
			}
		}
	}
	return nil
}

// Pending pages as asked; the version 1 server adapter asks for all.
func (q *memQueue) Pending(_ context.Context, after uint64, limit int) ([]sdk.Message, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []sdk.Message
	for _, m := range q.msgs {
		if m.ID > after && (limit == 0 || len(out) < limit) {
			out = append(out, m)
		}
	}
	return out, nil
}
