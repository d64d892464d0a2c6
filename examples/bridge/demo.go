package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/road"
)

// demoConfig configures demo.
type demoConfig struct {
	Workers int           // worker yards, worker1..workerN
	Pcap    string        // capture file of the bridge's traffic; "" none
	Timeout time.Duration // for the whole exchange
	Out     io.Writer     // the exchange, for people
	Log     *slog.Logger
	// StartWorker starts worker yard name in the lane directory dir and
	// returns once its socket is bound, with a function that stops it and
	// waits for it.
	StartWorker func(dir, name string) (stop func() error, err error)
}

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bridge demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	workers := fs.Int("workers", 3, "worker processes")
	pcap := fs.String("pcap", "", "write the bridge's road datagrams and lane pages to this pcapng file")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	verbose := fs.Bool("v", false, "log more (to stderr)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *workers < 1 || *workers > 64 {
		return usageError{errors.New("-workers must be 1..64")}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return demo(demoConfig{Workers: *workers, Pcap: *pcap, Timeout: *timeout, Out: stdout,
		Log: newLogger(stderr, *verbose), StartWorker: workerProcess(exe, nil, stderr)})
}

// workerProcess returns a StartWorker that runs `exe worker` as a child
// process, with env added to its environment. The child stops when its
// stdin is closed (or when the parent dies, which closes it too).
func workerProcess(exe string, env []string, stderr io.Writer) func(dir, name string) (func() error, error) {
	return func(dir, name string) (func() error, error) {
		cmd := exec.Command(exe, "worker", "-dir", dir, "-name", name, "-stdin-eof")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stdout, cmd.Stderr = stderr, stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		stop := func() error {
			stdin.Close()
			select {
			case err := <-exited:
				return err
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
				return fmt.Errorf("worker %s did not stop; killed", name)
			}
		}
		path := lane.SocketPath(dir, lane.DefaultLane, name)
		for deadline := time.Now().Add(10 * time.Second); ; {
			if _, err := os.Lstat(path); err == nil {
				return stop, nil
			}
			select {
			case err := <-exited:
				exited <- err
				return nil, fmt.Errorf("worker %s exited: %v", name, err)
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				stop()
				return nil, fmt.Errorf("worker %s did not bind %s within 10s", name, path)
			}
		}
	}
}

// demo runs a bridge, its workers and a remote estate alpha on this host,
// and prints what alpha sends and gets back.
func demo(c demoConfig) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "rb") // short: socket paths are limited
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	capt, err := openCapture(c.Pcap)
	if err != nil {
		return err
	}
	defer capt.close(&err)

	newEstate := func(name string, main bool, tap func(road.TapPacket)) (*road.Stack, error) {
		s, err := road.New(&road.Config{Name: name, Main: main, Auto: keep.AutoAlways,
			Listen: "127.0.0.1:0", AlivePeriod: -1, Logger: c.Log, Tap: tap})
		if err != nil {
			return nil, err
		}
		return s, s.Start()
	}
	rs, err := newEstate("bridge", true, capt.road())
	if err != nil {
		return err
	}
	defer rs.Close()
	ls, err := lane.New(&lane.Config{Dir: dir, Name: "bridge", Logger: c.Log, Tap: capt.lane()})
	if err != nil {
		return err
	}
	if err := ls.Start(); err != nil {
		return err
	}
	defer ls.Close()
	b, err := NewBridge(BridgeConfig{Road: rs, Lane: ls, Logger: c.Log})
	if err != nil {
		return err
	}
	if err := b.Start(); err != nil {
		return err
	}
	defer b.Close()
	fmt.Fprintf(c.Out, "bridge: estate %s on %s, yard %s\n", rs.Name(), rs.Addr(), ls.Path())

	var names []string
	for i := 1; i <= c.Workers; i++ {
		name := fmt.Sprintf("worker%d", i)
		stop, err := c.StartWorker(dir, name)
		if err != nil {
			return err
		}
		defer func() {
			if serr := stop(); serr != nil && err == nil {
				err = serr
			}
		}()
		names = append(names, name)
	}
	fmt.Fprintf(c.Out, "workers: %v\n", names)

	alpha, err := newEstate("alpha", false, nil)
	if err != nil {
		return err
	}
	defer alpha.Close()
	if _, err := alpha.Join(ctx, rs.Addr().String()); err != nil {
		return fmt.Errorf("alpha join: %w", err)
	}
	fmt.Fprintf(c.Out, "alpha (%s) joined bridge\n", alpha.Addr())

	show := func(dir string, body any) {
		js, _ := json.Marshal(body) // sorted keys
		fmt.Fprintf(c.Out, "alpha %s bridge: %s\n", dir, js)
	}
	send := func(yard string, body map[string]any) error {
		env := map[string]any{keyYard: yard, keyBody: body}
		show("->", env)
		return alpha.Send(ctx, rs.Name(), env)
	}
	for i, name := range names {
		if err := send(name, map[string]any{"task": i + 1, "text": "hello " + name}); err != nil {
			return fmt.Errorf("alpha send: %w", err)
		}
	}
	// Answers come as the workers finish; print them by yard.
	var got []map[string]any
	for len(got) < len(names) {
		select {
		case m, ok := <-alpha.Receive():
			if !ok {
				return fmt.Errorf("%d of %d answers: alpha stopped: %w", len(got), len(names), alpha.Err())
			}
			got = append(got, m.Body)
		case <-ctx.Done():
			return fmt.Errorf("%d of %d answers: %w", len(got), len(names), ctx.Err())
		}
	}
	slices.SortFunc(got, func(a, b map[string]any) int {
		return cmp.Compare(fmt.Sprint(a[keyYard]), fmt.Sprint(b[keyYard]))
	})
	for _, m := range got {
		show("<-", m)
	}
	// A yard that is not there: the bridge answers with a notice.
	if err := send("ghost", map[string]any{"task": 0}); err != nil {
		return fmt.Errorf("alpha send: %w", err)
	}
	select {
	case m, ok := <-alpha.Receive():
		if !ok {
			return fmt.Errorf("no notice for ghost: alpha stopped: %w", alpha.Err())
		}
		show("<-", m.Body)
	case <-ctx.Done():
		return fmt.Errorf("no notice for ghost: %w", ctx.Err())
	}
	if err := b.Shutdown(ctx); err != nil {
		return err
	}
	fmt.Fprintf(c.Out, "bridge counters: %+v\n", b.Counters())
	return nil
}
