package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/raet-go/raet/dissect"
)

func freeTCP(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get fetches a URL of a serve started a moment ago: the server may not
// listen yet, so it tries for a bounded while.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	var err error
	for range 100 {
		var resp *http.Response
		if resp, err = http.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, b
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET %s: %v", url, err)
	return 0, nil
}

// raet serve --metrics --txlog with raet send's messages: /healthz is ok,
// /metrics parses and counts the messages, raet status prints the sender
// as an alive remote, and the transaction log has the join and the allow.
func TestServeMetricsStatusTxLog(t *testing.T) {
	addr, maddr := freePort(t), freeTCP(t)
	txlog := filepath.Join(t.TempDir(), "txlog.jsonl")
	srv := startServe(t, "--listen", addr, "--main", "--metrics", maddr, "--txlog", txlog, "--for", "60s")
	if code, body := get(t, "http://"+maddr+"/healthz"); code != 200 || string(body) != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	const n = 20
	out, code := raet(t, "send", "--name", "beta", "--listen", "127.0.0.1:0", "--to", addr, "--size", "3000", "--count", "20")
	if code != exitOK {
		t.Fatalf("send: %d %s", code, out)
	}

	_, body := get(t, "http://"+maddr+"/metrics")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	if f := fams["raet_road_messages_received_total"]; f == nil || f.Metric[0].Counter.GetValue() != n {
		t.Fatalf("raet_road_messages_received_total: %v", f)
	}
	if f := fams["raet_road_remote_srtt_seconds"]; f == nil || f.Metric[0].Label[1].GetValue() != "beta" {
		t.Fatalf("raet_road_remote_srtt_seconds: %v", f)
	}

	stdout, stderr, code := runIn("status", "http://"+maddr)
	if code != exitOK {
		t.Fatalf("status: %d %s", code, stderr)
	}
	var row []string
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "beta" {
			row = f
		}
	}
	if !strings.Contains(stdout, "REMOTE") || len(row) < 3 || row[1] != "alive" {
		t.Fatalf("status:\n%s", stdout)
	}
	stdout, _, _ = runIn("status", "--json", maddr)
	var st statusDoc
	if err := json.Unmarshal([]byte(stdout), &st); err != nil || len(st.Remotes) != 1 || st.Remotes[0].Name != "beta" || st.Road.MessagesIn != n {
		t.Fatalf("status --json: %v %+v", err, st)
	}
	if _, errOut, code := runIn("status", freeTCP(t)); code != exitFailure || errOut == "" {
		t.Fatalf("status of nothing: %d %q", code, errOut)
	}

	if _, code := srv.stop(); code != exitOK {
		t.Fatalf("serve exited %d: %s", code, srv.stderr.String())
	}
	f, err := os.Open(txlog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l dissect.TxLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		if l.Ev == "done" {
			done[l.Kind]++
		}
	}
	if done["join"] != 1 || done["allow"] != 1 {
		t.Fatalf("transactions done in the log: %v", done)
	}
}
