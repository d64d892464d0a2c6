//go:build pcap

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

// TestLiveLoopback captures two stacks talking on 127.0.0.1 live on lo:
// every datagram the stacks sent shows exactly once (loopback shows each
// frame on the way out and in), decoded, and their transactions complete.
func TestLiveLoopback(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("live capture on lo needs root (CAP_NET_RAW): run go test -tags pcap as root")
	}
	// lo gives Ethernet frames; Linux's "any" gives cooked (SLL) ones.
	for _, iface := range []string{"lo", "any"} {
		t.Run(iface, func(t *testing.T) { liveLoopback(t, iface) })
	}
}

// txnLine is a transaction as raetdump's JSON lines show it.
type txnLine struct {
	Kind    string `json:"kind"`
	Outcome string `json:"outcome"`
}

func liveLoopback(t *testing.T, iface string) {
	var sent atomic.Int64
	mk := func(name string, main bool, tap bool) *road.Stack {
		// NoOffload: a capture on the sending host sees a UDP_SEGMENT run
		// as one packet.
		// AEADRefuse: the NaCl coat, whose answers packets raetdump reads
		// without keys (an AEAD coat seals which transactions they answer).
		cfg := &road.Config{Name: name, Main: main, Listen: "127.0.0.1:0", Auto: keep.AutoAlways, AlivePeriod: -1, NoOffload: true,
			AEAD: road.AEADRefuse}
		if tap {
			cfg.Tap = func(p road.TapPacket) {
				if p.Out {
					sent.Add(1)
				}
			}
		}
		return roadtest.Start(t, *cfg)
	}
	main := mk("main", true, true)
	other := mk("other", false, true)
	pa, pb := main.Addr().Port(), other.Addr().Port()
	// Only the two stacks' traffic: other programs on the machine may use
	// the same ports on other loopback addresses.

	var out, errb bytes.Buffer
	ready := make(chan struct{})
	stop := make(chan os.Signal, 1)
	o := &options{iface: iface, snaplen: 262144, dedup: true, json: true,
		filter: fmt.Sprintf("udp and src host 127.0.0.1 and dst host 127.0.0.1 and ((src port %d and dst port %d) or (src port %d and dst port %d))", pa, pb, pb, pa), ports: []uint16{7530, pa, pb},
		stdout: &out, stderr: &errb, interrupt: stop, liveReadyForTestHook: func() { close(ready) }}
	done := make(chan int)
	go func() { done <- o.run() }()
	select {
	case <-ready:
	case code := <-done:
		t.Fatalf("raetdump ended at once (%d): %s", code, errb.String())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := other.Join(ctx, main.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := other.Send(ctx, "main", map[string]any{"subject": "live", "blob": strings.Repeat("x", 5000)}); err != nil {
		t.Fatal(err)
	}
	<-main.Receive()
	time.Sleep(time.Second) // libpcap hands frames over when its buffer timeout ends
	stop <- os.Interrupt
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if int64(len(lines)) != sent.Load() {
		t.Fatalf("%d packets shown, the stacks sent %d\n%s\n%s", len(lines), sent.Load(), out.String(), errb.String())
	}
	seen := map[string]bool{}
	for _, l := range lines {
		var p struct {
			Head     map[string]any `json:"head"`
			Error    string         `json:"error"`
			Txn      txnLine        `json:"txn"`
			Answered []txnLine      `json:"answered"`
		}
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		if p.Error != "" {
			t.Fatalf("error: %s", l)
		}
		for _, tx := range append(p.Answered, p.Txn) {
			if tx.Outcome == "done" {
				seen[tx.Kind] = true
			}
		}
	}
	for _, k := range []string{"join", "allow", "message"} {
		if !seen[k] {
			t.Errorf("no %s transaction done in the capture:\n%s", k, out.String())
		}
	}
	if !strings.Contains(errb.String(), "summary:") {
		t.Fatalf("no summary: %s", errb.String())
	}
}
