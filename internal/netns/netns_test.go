//go:build linux

package netns_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/raet-go/raet/internal/netns"
)

// A namespace that does not exist is an error, and f does not run.
func TestDoMissingNamespace(t *testing.T) {
	ran := false
	err := netns.Do("raet-netns-test-missing", func() error { ran = true; return nil })
	if err == nil || ran || !strings.Contains(err.Error(), "raet-netns-test-missing") {
		t.Fatalf("Do on a missing namespace: %v (f ran: %v)", err, ran)
	}
}

// f runs inside the namespace: its interfaces are the namespace's (only
// lo in a new one), its error comes back, and the thread comes back out.
// It needs root (CI runs as root); elsewhere it skips and says why.
func TestDoInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns (CI runs it as root)")
	}
	name := "raet-netns-test"
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
	self, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	want := errors.New("from f")
	err = netns.Do(name, func() error {
		inside, _ = os.Readlink("/proc/thread-self/ns/net")
		return want
	})
	if !errors.Is(err, want) {
		t.Fatalf("Do returned %v, want f's error", err)
	}
	if inside == "" || inside == self {
		t.Fatalf("f ran in namespace %q, the caller's is %q", inside, self)
	}
	if again, _ := os.Readlink("/proc/thread-self/ns/net"); again != self {
		t.Fatalf("the caller is in %q after Do, was in %q", again, self)
	}
}
