// Command docsync shows the messaging patterns of package bus in the shape
// of a collaborative editor: a host estate keeps a document, pulls the
// clients' changes as jobs (push/pull, each change acknowledged once
// applied) and publishes every applied change as a delta (pub/sub) to all
// clients, tagged with the client it came from. Each client applies its own
// edits at once and discards their echoes by that origin; it applies the
// others' deltas. All estates run on loopback; at the end every replica
// equals the host's document.
//
//	go run ./examples/docsync -clients 3 -changes 20
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	n := flag.Int("clients", 3, "client estates")
	m := flag.Int("changes", 20, "changes each client makes")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rep, err := Run(ctx, *n, *m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docsync:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(rep)
	if !rep.Converged {
		os.Exit(1)
	}
}
