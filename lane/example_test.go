//go:build unix

package lane_test

import (
	"context"
	"fmt"
	"os"

	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/packet"
)

// Two yards of one lane: alpha sends a message to beta, which answers the
// yard it came from.
func Example() {
	dir, err := os.MkdirTemp("", "rl") // short: socket paths are limited
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	start := func(name string) *lane.Stack {
		st, err := lane.New(&lane.Config{Dir: dir, Name: name})
		if err != nil {
			panic(err)
		}
		if err := st.Start(); err != nil {
			panic(err)
		}
		return st
	}
	alpha, beta := start("alpha"), start("beta")
	defer alpha.Close()
	defer beta.Close()

	ctx := context.Background()
	// OrderedMap keeps the key order on the wire, as the reference does.
	body := packet.OrderedMap{{Key: "subject", Value: "lane hello"}, {Key: "n", Value: 1}}
	if err := alpha.Send(ctx, "beta", body); err != nil {
		panic(err)
	}
	m := <-beta.Receive()
	fmt.Printf("beta got %s from %s\n", m.Raw, m.From)

	if err := beta.Send(ctx, m.From, map[string]any{"re": m.Body["subject"]}); err != nil {
		panic(err)
	}
	r := <-alpha.Receive()
	fmt.Printf("alpha got %v from %s\n", r.Body, r.From)
	// Output:
	// beta got {"subject":"lane hello","n":1} from alpha
	// alpha got map[re:lane hello] from beta
}
