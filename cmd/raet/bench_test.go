package main

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"
)

func TestBenchInProcess(t *testing.T) {
	for _, prof := range []string{"fast", "reference"} {
		t.Run(prof, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run([]string{"bench", "--sizes", "64,4096", "--count", "50", "--window", "4", "--profile", prof}, &out, &errb)
			if code != exitOK {
				t.Fatalf("exit %d, stderr: %s", code, errb.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if len(lines) != 2 {
				t.Fatalf("want 2 lines, got %q", out.String())
			}
			for i, want := range []int{64, 4096} {
				var m map[string]any
				if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
					t.Fatalf("line %q: %v", lines[i], err)
				}
				for _, k := range []string{"size", "profile", "head", "foot", "coat", "max_packet_size", "count", "seconds",
					"msgs_per_s", "mb_per_s", "rtt_p50_us", "rtt_p99_us", "errors"} {
					if _, ok := m[k]; !ok {
						t.Errorf("line %d: no %q in %s", i, k, lines[i])
					}
				}
				if m["size"] != float64(want) || m["profile"] != prof || m["count"] != float64(50) || m["errors"] != float64(0) {
					t.Errorf("line %d: %s", i, lines[i])
				}
				if m["msgs_per_s"].(float64) <= 0 || m["rtt_p50_us"].(float64) <= 0 || m["rtt_p99_us"].(float64) < m["rtt_p50_us"].(float64) {
					t.Errorf("line %d: implausible numbers: %s", i, lines[i])
				}
			}
		})
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--profile", "nope"},
		{"bench", "--sizes", "x"},
		{"bench", "--serve"},
		{"bench", "--serve", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:1"},
		{"bench", "--window", "0"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// TestBenchServeTo runs the two sides of the cross-process mode through
// run, in goroutines of this process.
func TestBenchServeTo(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := pc.LocalAddr().String()
	pc.Close()
	srvDone := make(chan int, 1)
	go func() {
		var out, errb bytes.Buffer
		srvDone <- run([]string{"bench", "--serve", "--listen", addr, "--for", "2s"}, &out, &errb)
	}()
	var out, errb bytes.Buffer
	var code int
	for range 20 { // until the server listens
		out.Reset()
		errb.Reset()
		if code = run([]string{"bench", "--to", addr, "--sizes", "1024", "--count", "20", "--timeout", "2s"}, &out, &errb); code == exitOK {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r benchResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || r.Size != 1024 || r.Count != 20 || r.Errors != 0 || r.Foot != "nada" || (r.Coat != "aes256gcm" && r.Coat != "chacha20poly1305") {
		t.Fatalf("%v: %s", err, out.String())
	}
	if c := <-srvDone; c != exitOK {
		t.Fatalf("serve exit %d", c)
	}
}
