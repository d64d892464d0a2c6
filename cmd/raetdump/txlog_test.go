package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

// lossyTraffic runs a join and messages (segmented and not) between two
// stacks over an in-memory network that loses a fifth of the datagrams
// each way, with other's Tap writing both a capture and the live
// transaction log; it returns the two.
func lossyTraffic(t *testing.T, messages int) (capture, live []byte) {
	var pcap, txlog bytes.Buffer
	synctest.Test(t, func(t *testing.T) {
		pw, err := dissect.NewPcapngWriter(&pcap, nil)
		if err != nil {
			t.Fatal(err)
		}
		tl := dissect.NewTxLogTap(&txlog, nil)
		var mu sync.Mutex // one order for the capture and the log
		tap := func(p road.TapPacket) {
			mu.Lock()
			defer mu.Unlock()
			pw.Tap(dissect.RoadPacket(p))
			tl.Tap(dissect.RoadPacket(p))
		}
		m, o := roadtest.LossyPair(t, 3, netsim.Impairment{Loss: 0.2, Delay: time.Millisecond}, road.Config{Name: "main"},
			road.Config{Name: "other", MessageTimeout: time.Minute, NoBundling: true, Tap: tap})
		errs := make(chan error, messages)
		for i := range messages {
			body := map[string]any{"n": i, "pad": strings.Repeat("x", (i%3)*2000)}
			go func() { errs <- o.Send(t.Context(), "main", body) }()
		}
		for range messages {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		o.Close()
		m.Close()
		if err := tl.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pw.Err(); err != nil {
			t.Fatal(err)
		}
	})
	return pcap.Bytes(), txlog.Bytes()
}

// The live transaction log of a stack and raetdump's log of the capture of
// the same traffic (lossy: resends, resend requests) agree transaction by
// transaction, line by line.
func TestTxLogLiveEqualsCapture(t *testing.T) {
	const n = 24
	capture, live := lossyTraffic(t, n)
	dir := t.TempDir()
	file, out := filepath.Join(dir, "road.pcapng"), filepath.Join(dir, "txlog.jsonl")
	if err := os.WriteFile(file, capture, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := raetdump(t, nil, "-r", file, "-q", "-txlog", out); code != exitOK {
		t.Fatalf("raetdump: %d %s", code, stderr)
	}
	dumped, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	liveTx, dumpTx := byTxn(t, live), byTxn(t, dumped)
	if len(liveTx) != len(dumpTx) {
		t.Errorf("%d transactions live, %d from the capture", len(liveTx), len(dumpTx))
	}
	for id, lines := range liveTx {
		if got, want := strings.Join(dumpTx[id], "\n"), strings.Join(lines, "\n"); got != want {
			t.Errorf("transaction %d differs:\n--- capture\n%s\n--- live\n%s", id, got, want)
		}
	}
	if !bytes.Equal(live, dumped) {
		t.Error("the logs differ outside transactions")
	}

	// What the log says of the traffic.
	var done, resends, starts int
	kinds := map[string]int{}
	for _, l := range parseLines(t, live) {
		switch l.Ev {
		case "start":
			starts++
			kinds[l.Kind]++
		case "resend":
			resends++
		case "done":
			if l.Kind == "message" {
				done++
			}
		}
	}
	if kinds["join"] == 0 || kinds["allow"] == 0 || kinds["message"] < n {
		t.Errorf("transactions by kind: %v", kinds)
	}
	if done != n || resends == 0 {
		t.Errorf("%d messages done of %d, %d resends", done, n, resends)
	}
}

func parseLines(t *testing.T, b []byte) []dissect.TxLine {
	t.Helper()
	var out []dissect.TxLine
	for _, s := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		var l dissect.TxLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		out = append(out, l)
	}
	return out
}

// byTxn groups a log's lines by transaction number.
func byTxn(t *testing.T, b []byte) map[int][]string {
	t.Helper()
	m := map[int][]string{}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, l := range parseLines(t, b) {
		m[l.Txn] = append(m[l.Txn], lines[i])
	}
	return m
}
