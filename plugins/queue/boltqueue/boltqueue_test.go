package boltqueue_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/internal/plugintest"
	"github.com/raet-go/raet/plugins/queue/boltqueue"
	"github.com/raet-go/raet/plugins/sdk"
	"github.com/raet-go/raet/plugins/sdk/sdktest"
)

func open(t *testing.T, path string, o boltqueue.Options) *boltqueue.Queue {
	q, err := boltqueue.Open(path, o)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestContract(t *testing.T) {
	q := open(t, filepath.Join(t.TempDir(), "q.db"), boltqueue.Options{})
	defer q.Close()
	sdktest.Queue(t, q)
}

func TestContractGRPC(t *testing.T) {
	for _, v := range sdk.Versions {
		q := open(t, filepath.Join(t.TempDir(), "q.db"), boltqueue.Options{})
		defer q.Close()
		sdktest.Queue(t, plugintest.GRPC[sdk.Queue](t, sdk.KindQueue, &sdk.QueuePlugin{Impl: q, Version: v}))
	}
}

// Messages survive closing and reopening the database, ids keep growing,
// and the bound holds across the reopen.
func TestDurableAndBounded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	q := open(t, path, boltqueue.Options{MaxMessages: 3})
	ids, err := q.Put(ctx, []sdk.Message{{Remote: "a", Kind: codec.BodyKindJSON, Body: []byte("1")}, {Remote: "b", Body: []byte("2")}})
	if err != nil {
		t.Fatal(err)
	}
	q.Close()
	q = open(t, path, boltqueue.Options{MaxMessages: 3})
	defer q.Close()
	ms, err := q.Pending(ctx, 0, 0)
	if err != nil || len(ms) != 2 || ms[1].Remote != "b" {
		t.Fatalf("%+v %v", ms, err)
	}
	if _, err := q.Put(ctx, make([]sdk.Message, 2)); !errors.Is(err, sdk.ErrQueueFull) {
		t.Fatalf("over the bound: %v", err)
	}
	more, err := q.Put(ctx, make([]sdk.Message, 1))
	if err != nil || more[0] <= ids[1] {
		t.Fatalf("%v %v", more, err)
	}
	q.Done(ctx, []uint64{ids[0], ids[0]})
	if _, err := q.Put(ctx, make([]sdk.Message, 1)); err != nil {
		t.Fatalf("room after done: %v", err)
	}
}

// A database keeps its instance across reopens; another database has
// another; the instance reaches the host through the plugin protocol.
func TestInstance(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	info := func(q sdk.Queue) sdk.QueueInfo {
		in, err := q.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	q := open(t, filepath.Join(dir, "q.db"), boltqueue.Options{})
	first := info(q).Instance
	q.Close()
	q = open(t, filepath.Join(dir, "q.db"), boltqueue.Options{})
	defer q.Close()
	other := open(t, filepath.Join(dir, "other.db"), boltqueue.Options{})
	defer other.Close()
	if first == 0 || info(q).Instance != first || info(other).Instance == first {
		t.Fatalf("instances: %x, after reopen %x, another database %x", first, info(q).Instance, info(other).Instance)
	}
	overGRPC := plugintest.GRPC[sdk.Queue](t, sdk.KindQueue, &sdk.QueuePlugin{Impl: q, Version: sdk.Versions[len(sdk.Versions)-1]})
	if got := info(overGRPC); got.Instance != first || !got.Durable {
		t.Fatalf("over gRPC: %+v", got)
	}
}
