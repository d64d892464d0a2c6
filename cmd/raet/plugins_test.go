package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/plugins/builtin"
	"github.com/raet-go/raet/road"
)

func TestPluginFlagsBuiltins(t *testing.T) {
	ctx := context.Background()
	f := pluginFlags{serializer: "cbor", queue: "memory:5", coat: "nacl"}
	var cfg road.Config
	stop, err := f.apply(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if cfg.Serializer.Kind() != codec.BodyKindCBOR {
		t.Fatalf("serializer %v", cfg.Serializer.Kind())
	}
	if _, ok := cfg.Queue.(*builtin.MemQueue); !ok {
		t.Fatalf("queue %T", cfg.Queue)
	}
	for _, bad := range []struct {
		f    pluginFlags
		want string
	}{
		{pluginFlags{serializer: "yaml"}, "no built-in serializer"},
		{pluginFlags{queue: "disk"}, "want memory"},
		{pluginFlags{queue: "memory:0"}, "N >= 1"},
		{pluginFlags{serializer: "plugin:zstdjson"}, "needs --plugins DIR"},
		{pluginFlags{coat: "plugin:xchacha"}, "needs --plugins DIR"},
		{pluginFlags{dir: t.TempDir(), queue: "plugin:bolt"}, "no such plugin"},
	} {
		var cfg road.Config
		if _, err := bad.f.apply(ctx, &cfg); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Fatalf("%+v: %v, want %q", bad.f, err, bad.want)
		}
	}
}

// buildPlugins builds the zstdjson and bolt plugins into a new directory.
func buildPlugins(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator),
		"./plugins/serializer/zstdjson/cmd/raet-serializer-zstdjson", "./plugins/queue/boltqueue/cmd/raet-queue-bolt")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// --serializer plugin:zstdjson and --queue plugin:bolt start the plugins
// of --plugins DIR; a stack so configured sends zstdjson bodies that
// another estate decodes, and queues them in the plugin until done.
func TestPluginFlagsStartPlugins(t *testing.T) {
	dir := buildPlugins(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := pluginFlags{dir: dir, serializer: "plugin:zstdjson", queue: "plugin:bolt"}
	cfg := road.Config{Name: "sender", Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1}
	stop, err := f.apply(ctx, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if cfg.Serializer.Kind() != codec.BodyKindZstdJSON || cfg.Queue == nil {
		t.Fatalf("%+v", cfg)
	}
	recvr, err := startStack(&road.Config{Name: "receiver", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer recvr.Close()
	sender, err := startStack(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	r, err := sender.Join(ctx, recvr.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.Send(ctx, r.Name, map[string]any{"hello": strings.Repeat("plugin ", 100)}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-recvr.Receive():
		if m.Kind != codec.BodyKindZstdJSON || !strings.HasPrefix(m.Body["hello"].(string), "plugin plugin") {
			t.Fatalf("%v %v", m.Kind, m.Body)
		}
	case <-ctx.Done():
		t.Fatal("nothing received")
	}
	if p, err := cfg.Queue.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending %d %v", len(p), err)
	}
	if _, err := os.Stat(filepath.Join(dir, "raet-queue.db")); err != nil {
		t.Fatalf("the bolt database: %v", err)
	}
}

func TestPluginsList(t *testing.T) {
	dir := buildPlugins(t)
	out, code := raet(t, "plugins", "list", "--plugins", dir, "--check")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%q", out)
	}
	var l pluginLine
	if err := json.Unmarshal([]byte(lines[0]), &l); err != nil || l.Name != "bolt" || l.Kind != "durable queue" || l.Protocol != 2 || !l.Running {
		t.Fatalf("%q %v", lines[0], err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &l); err != nil || l.Name != "zstdjson" || l.Kind != "body kind zstdjson" {
		t.Fatalf("%q %v", lines[1], err)
	}
	if _, code := raet(t, "plugins", "list"); code != exitUsage {
		t.Fatalf("no args: exit %d", code)
	}
	os.WriteFile(filepath.Join(dir, "plugins.yaml"), []byte("plugins:\n  - name: x\n    provides: serializer\n    path: missing\n"), 0o644)
	if _, code := raet(t, "plugins", "list", "--plugins", dir); code != exitSetup {
		t.Fatalf("a bad config: exit %d", code)
	}
}
