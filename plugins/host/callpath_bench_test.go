package host_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/plugins/internal/plugintest"
	"github.com/raet-go/raet/plugins/sdk"
	"github.com/raet-go/raet/plugins/serializer/zstdjson"
)

// BenchmarkCallPath takes one 1 KiB item per call through three paths, in
// one run, to show where a plugin call's round trip goes:
//
//   - unix-echo-subprocess: the floor of the process boundary, a Go helper
//     process echoing length-prefixed frames over a unix socket;
//   - grpc-inprocess: the SDK's gRPC client and server in this process
//     (go-plugin's test connection, a unix socket), zstdjson encoding;
//   - plugin-subprocess: the real thing, the host's guarded call to the
//     zstdjson plugin process (which runs with the SDK's GOMAXPROCS, 1);
//   - plugin-subprocess-maxprocs-all: the same with the plugin given every
//     core (GOMAXPROCS=NumCPU in its environment), as before the SDK's
//     default.
//
// Besides ns/op it reports the CPU each process spent per call
// (host-cpu-µs/op: this process; peer-cpu-µs/op: the other one).
func BenchmarkCallPath(b *testing.B) {
	ctx := context.Background()
	item, _ := packet.JSONBody{}.Marshal(nil, body1K(1))
	items := [][]byte{item}
	b.Run("unix-echo-subprocess", func(b *testing.B) {
		conn, pid := startEcho(b)
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(item)))
		frame = append(frame, item...)
		in := make([]byte, len(frame))
		measureCPU(b, pid, func() {
			if _, err := conn.Write(frame); err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadFull(conn, in); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("grpc-inprocess", func(b *testing.B) {
		impl, err := zstdjson.New(zstd.SpeedFastest)
		if err != nil {
			b.Fatal(err)
		}
		defer impl.Close()
		s := plugintest.GRPC[sdk.Serializer](b, sdk.KindSerializer, &sdk.SerializerPlugin{Impl: impl, Version: sdk.Versions[len(sdk.Versions)-1]})
		measureCPU(b, 0, func() {
			if _, err := s.Encode(ctx, items); err != nil {
				b.Fatal(err)
			}
		})
	})
	plugin := func(b *testing.B, h *host.Host) {
		s, err := h.SerializerPlugin(ctx, "zstdjson")
		if err != nil {
			b.Fatal(err)
		}
		st, _ := h.Status("zstdjson")
		measureCPU(b, st.PID, func() {
			if _, err := s.Encode(ctx, items); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.Run("plugin-subprocess", func(b *testing.B) { plugin(b, benchHost(b)) })
	b.Run("plugin-subprocess-maxprocs-all", func(b *testing.B) {
		spec := zstdSpec()
		spec.Env = []string{fmt.Sprintf("GOMAXPROCS=%d", runtime.NumCPU())}
		h, err := host.New(&host.Config{Plugins: []host.Spec{spec}})
		if err != nil {
			b.Fatal(err)
		}
		defer h.Close()
		if err := h.Start(ctx); err != nil {
			b.Fatal(err)
		}
		plugin(b, h)
	})
}

// measureCPU runs call b.N times and reports the CPU time this process,
// and process pid when not 0, spent per call.
func measureCPU(b *testing.B, pid int, call func()) {
	call() // connections up, buffers warm
	self0, peer0 := procCPU(b, os.Getpid()), procCPU(b, pid)
	b.ResetTimer()
	for range b.N {
		call()
	}
	b.StopTimer()
	self, peer := procCPU(b, os.Getpid())-self0, procCPU(b, pid)-peer0
	b.ReportMetric(float64(self.Microseconds())/float64(b.N), "host-cpu-µs/op")
	if pid != 0 {
		b.ReportMetric(float64(peer.Microseconds())/float64(b.N), "peer-cpu-µs/op")
	}
}

// procCPU is a process's user and system time from /proc (clock ticks of
// 10 ms: enough over a benchmark's second).
func procCPU(b *testing.B, pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command (which may hold spaces) start after ')'.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// startEcho starts the test binary as an echo helper on a unix socket and
// connects to it; the helper ends when the benchmark does.
func startEcho(b *testing.B) (net.Conn, int) {
	sock := filepath.Join(b.TempDir(), "echo.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=echo", "RAET_PLUGINS_TEST_SOCK="+sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "READY\n" {
		b.Fatalf("echo helper: %q", line)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn, cmd.Process.Pid
}

// runEcho is the echo helper: it serves one connection, writing back each
// length-prefixed frame, and ends with it.
func runEcho() int {
	ln, err := net.Listen("unix", os.Getenv("RAET_PLUGINS_TEST_SOCK"))
	if err != nil {
		fmt.Println("ERR", err)
		return 1
	}
	fmt.Println("READY")
	c, err := ln.Accept()
	if err != nil {
		return 1
	}
	buf := make([]byte, 4+1<<16)
	for {
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			return 0
		}
		n := 4 + int(binary.BigEndian.Uint32(buf))
		if n > len(buf) {
			return 1
		}
		if _, err := io.ReadFull(c, buf[4:n]); err != nil {
			return 0
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return 0
		}
	}
}
