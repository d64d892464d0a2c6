package road_test

import (
	"context"
	"fmt"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/plugins/builtin"
	"github.com/raet-go/raet/road"
)

// A queue that holds a message from an earlier run (here put by hand; a
// durable queue plugin keeps them across a crash): the stack sends it once
// its remote is allowed, and WaitPending tells when it is done.
func ExampleStack_WaitPending() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	main, _ := road.New(&road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	main.Start()
	defer main.Close()

	q := builtin.NewMemQueue(0, 0)
	q.Put("main", codec.BodyKindJSON, []byte(`{"left":"over"}`))
	sender, _ := road.New(&road.Config{Name: "sender", Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1, Queue: q})
	sender.Start()
	defer sender.Close()
	if _, err := sender.Join(ctx, main.Addr().String()); err != nil {
		fmt.Println(err)
		return
	}
	done, failed, err := sender.WaitPending(ctx)
	fmt.Println("resent:", done, "failed:", failed, err)
	fmt.Println("main got:", (<-main.Receive()).Body)
	// Output:
	// resent: 1 failed: 0 <nil>
	// main got: map[left:over]
}
