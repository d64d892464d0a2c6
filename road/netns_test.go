package road_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNetnsLossyHosts runs two raet processes on two hosts of their own
// (network namespaces joined by a veth pair), with nftables dropping 10% of
// the RAET datagrams on each host's ingress (tc netem does not exist on
// these kernels). 1000 messages go one way and are echoed back; none may be
// lost. It needs root (CI runs as root); elsewhere it skips and says why.
func TestNetnsLossyHosts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for ip netns and nftables (CI runs it as root)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: make test installs it (scripts/deps.sh)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "raet")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/raet").CombinedOutput(); err != nil {
		t.Fatalf("build raet: %v\n%s", err, out)
	}

	id := fmt.Sprintf("%d", os.Getpid()%10000)
	nsA, nsB := "raet-a-"+id, "raet-b-"+id
	vethA, vethB := "ra"+id, "rb"+id
	// 10.213.0.0/24 exists only inside these two namespaces.
	ipA, ipB := "10.213.0.1", "10.213.0.2"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", nsA).Run()
		exec.Command("ip", "netns", "del", nsB).Run()
	})
	run("ip", "netns", "add", nsA)
	run("ip", "netns", "add", nsB)
	run("ip", "link", "add", vethA, "netns", nsA, "type", "veth", "peer", "name", vethB, "netns", nsB)
	for _, h := range []struct{ ns, dev, ip string }{{nsA, vethA, ipA}, {nsB, vethB, ipB}} {
		run("ip", "-n", h.ns, "addr", "add", h.ip+"/24", "dev", h.dev)
		run("ip", "-n", h.ns, "link", "set", h.dev, "up")
		run("ip", "-n", h.ns, "link", "set", "lo", "up")
		ruleset := "table inet raetloss {\n chain input {\n  type filter hook input priority 0; policy accept;\n" +
			"  udp dport 7530 numgen random mod 100 < 10 counter drop\n }\n}\n"
		cmd := exec.CommandContext(ctx, "ip", "netns", "exec", h.ns, "nft", "-f", "-")
		cmd.Stdin = strings.NewReader(ruleset)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft in %s: %v\n%s", h.ns, err, out)
		}
	}

	// Both fast-profile coats: an AEAD coat (each retransmission sealed
	// anew) and the NaCl coat with the MAC foot.
	for _, aead := range []string{"prefer", "refuse"} {
		t.Run("aead-"+aead, func(t *testing.T) { netnsRun(ctx, t, bin, nsA, nsB, ipA, ipB, aead) })
	}
	drops, _ := exec.Command("ip", "netns", "exec", nsA, "nft", "list", "ruleset").Output()
	t.Logf("nftables at alpha: %s", strings.Join(strings.Fields(string(drops)), " "))
}

// netnsRun serves alpha in nsA and has beta in nsB send it 1000 messages
// to echo, both with --aead aead.
func netnsRun(ctx context.Context, t *testing.T, bin, nsA, nsB, ipA, ipB, aead string) {
	serve := exec.CommandContext(ctx, "ip", "netns", "exec", nsA, bin, "serve", "--name", "alpha", "--main", "--echo",
		"--auto", "always", "--listen", ipA+":7530", "--for", "4m", "--aead", aead)
	var serveErr bytes.Buffer
	serve.Stdout, serve.Stderr = nil, &serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		serve.Process.Kill()
		serve.Wait()
	}()
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	send := exec.CommandContext(ctx, "ip", "netns", "exec", nsB, bin, "send", "--name", "beta", "--auto", "always",
		"--listen", ipB+":7530", "--to", ipA+":7530", "--size", "500", "--count", "1000", "--window", "32",
		"--expect-echo", "--timeout", "4m", "--aead", aead)
	out, err := send.Output()
	if err != nil {
		t.Fatalf("raet send: %v\nstdout: %s\nserve stderr: %s", err, out, serveErr.String())
	}
	var sum struct{ Sent, Done, Echoed, Failed int }
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if sum.Done != 1000 || sum.Echoed != 1000 || sum.Failed != 0 {
		t.Fatalf("summary %+v", sum)
	}
	t.Logf("--aead %s: 1000 messages and their echoes across 10%% loss each way in %v", aead, time.Since(start).Round(time.Millisecond))
}
