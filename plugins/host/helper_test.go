package host_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/raet-go/raet/plugins/host"
)

// helperEnv makes the test binary a helper process (see runHelper).
const helperEnv = "RAET_PLUGINS_TEST_HELPER"

// runHelper is the test binary run as a helper: "host" starts a host with
// two plugins, prints their pids and waits to be killed.
func runHelper() int {
	switch os.Getenv(helperEnv) {
	case "host":
		dir := os.Getenv("RAET_PLUGINS_TEST_BIN")
		h, err := host.New(&host.Config{Plugins: []host.Spec{
			{Name: "zstdjson", Provides: "serializer", Path: dir + "/raet-serializer-zstdjson"},
			{Name: "xchacha", Provides: "coat", Path: dir + "/raet-coat-xchacha"},
		}})
		if err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Start(ctx); err != nil {
			fmt.Println("ERR", err)
			return 1
		}
		for _, n := range []string{"zstdjson", "xchacha"} {
			st, _ := h.Status(n)
			fmt.Println("PID", st.PID)
		}
		fmt.Println("READY")
		time.Sleep(60 * time.Second) // the test kills us long before
		return 0
	case "estate":
		return runEstate()
	case "laneyard":
		return runLaneYard()
	case "echo":
		return runEcho()
	}
	return 2
}

// Killing the host with SIGKILL (no Close, no cleanup) leaves no plugin
// process behind: Pdeathsig ends them.
func TestHostKilledLeavesNoPlugin(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=host", "RAET_PLUGINS_TEST_BIN="+binDir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "PID "); ok {
			pid, _ := strconv.Atoi(p)
			pids = append(pids, pid)
		}
		if strings.HasPrefix(line, "ERR") {
			t.Fatal(line)
		}
		if line == "READY" {
			break
		}
	}
	if len(pids) != 2 || pids[0] == 0 || pids[1] == 0 {
		t.Fatalf("pids %v", pids)
	}
	for _, pid := range pids {
		if !alive(pid) {
			t.Fatalf("plugin %d not running before the kill", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for _, pid := range pids {
		waitFor(t, 5*time.Second, fmt.Sprintf("plugin %d outlived its host", pid), func() bool { return !alive(pid) })
	}
}
