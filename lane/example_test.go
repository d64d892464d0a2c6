//go:build unix

package lane_test

import (
	"context"
	"errors"
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

// A socket directory other users can write is refused: any of them could
// bind a yard's name and receive its pages. AllowSharedDir accepts the risk.
func ExampleConfig_allowSharedDir() {
	dir, err := os.MkdirTemp("", "rl")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		panic(err)
	}

	st, _ := lane.New(&lane.Config{Dir: dir, Name: "alpha"})
	err = st.Start()
	fmt.Println("refused:", errors.Is(err, lane.ErrSharedDir))

	st, _ = lane.New(&lane.Config{Dir: dir, Name: "alpha", AllowSharedDir: true})
	err = st.Start()
	fmt.Println("allowed:", err == nil)
	st.Close()
	// Output:
	// refused: true
	// allowed: true
}
