package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := format("raet", bi), "raet v1.2.3 (go1.26.0, commit 0123456789ab, modified)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, want := format("raetdump", &debug.BuildInfo{GoVersion: "go1.26.0"}), "raetdump (devel) (go1.26.0)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestVersionOfThisBinary(t *testing.T) {
	if v := Version("x"); !strings.HasPrefix(v, "x ") || !strings.Contains(v, "go1.") {
		t.Fatalf("Version = %q", v)
	}
}
