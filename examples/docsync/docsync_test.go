package main

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The host applies every change once; each client discards exactly its own
// echoes and applies everyone else's; all replicas converge.
func TestDocSync(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n, m = 3, 15
	rep, err := Run(ctx, n, m)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Version != n*m || !rep.Converged {
		t.Fatalf("report %+v", rep)
	}
	for name, e := range rep.Echoes {
		if e != m || rep.Applied[name] != (n-1)*m {
			t.Fatalf("%s: %d echoes discarded (want %d), %d applied (want %d)", name, e, m, rep.Applied[name], (n-1)*m)
		}
	}
}
