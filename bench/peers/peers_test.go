package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs every peer briefly at two sizes and checks each got its
// messages acked without errors, and that the table names every peer.
func TestSmoke(t *testing.T) {
	ps := peers(8192)
	res := run(ps, []int{64, 16 << 10}, 4, 1, 50*time.Millisecond, nil)
	if len(res) != 2*len(ps) {
		t.Fatalf("%d results, want %d", len(res), 2*len(ps))
	}
	for _, r := range res {
		if r.Count == 0 || r.Errors != 0 || r.MsgsPerS <= 0 || r.RTTP50us <= 0 || r.IdleP50us <= 0 {
			t.Errorf("%s %d: %+v", r.Peer, r.Size, r)
		}
	}
	var b bytes.Buffer
	printTable(&b, res, 4, 1, 50*time.Millisecond)
	for _, p := range ps {
		if !strings.Contains(b.String(), p.name) {
			t.Errorf("table lacks %q:\n%s", p.name, b.String())
		}
	}
	t.Log("\n" + b.String())
}
