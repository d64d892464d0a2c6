//go:build unix

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/raet-go/raet/internal/testutil"
)

// raet lane serve and send with --serializer plugin:zstdjson: each process
// runs the plugin; 150 kB bodies of one letter go in one page each instead
// of three, and come back whole.
func TestLaneSerializerPluginFlag(t *testing.T) {
	pdir := buildPlugins(t)
	dir := testutil.ShortTempDir(t, "rl")
	plugin := []string{"--plugins", pdir, "--serializer", "plugin:zstdjson"}
	srv := serve(t, dir, "beta", append([]string{"--echo"}, plugin...)...)
	out, code := raet(t, append([]string{"lane", "send", "--dir", dir, "--name", "alpha", "--to", "beta",
		"--size", "150000", "--count", "3", "--expect-echo", "--timeout", "60s"}, plugin...)...)
	if code != exitOK {
		t.Fatalf("send exited %d: %s", code, out)
	}
	if s := sendSummary(t, out); s.Done != 3 || s.Echoed != 3 || s.Pages != 3 {
		t.Fatalf("summary %+v", s)
	}
	for range 3 {
		var got struct {
			From string
			Body struct{ Data string }
		}
		if err := json.Unmarshal([]byte(srv.line(t)), &got); err != nil || got.From != "alpha" || len(got.Body.Data) != 150000 {
			t.Fatalf("serve printed from %q %d bytes: %v", got.From, len(got.Body.Data), err)
		}
	}
}

// raet lane send --queue plugin:bolt to a yard that is not there: the
// send fails and the message stays in the durable queue; a yard started
// later with the same name and queue sends it.
func TestLaneQueuePluginFlag(t *testing.T) {
	pdir := buildPlugins(t)
	dir := testutil.ShortTempDir(t, "rl")
	queue := []string{"--plugins", pdir, "--queue", "plugin:bolt"}
	out, code := raet(t, append([]string{"lane", "send", "--dir", dir, "--name", "gamma", "--to", "delta",
		"--body-json", `{"queued":1}`}, queue...)...)
	if s := sendSummary(t, out); code != exitFailure || s.Failed != 1 || !strings.Contains(s.Error, "gone") {
		t.Fatalf("send to a missing yard: exit %d, %+v", code, s)
	}
	delta := serve(t, dir, "delta")
	serve(t, dir, "gamma", queue...)
	if l := delta.line(t); l != `{"from":"gamma","body":{"queued":1}}` {
		t.Fatalf("delta printed %s", l)
	}
}
