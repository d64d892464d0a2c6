// Command demo is `make demo`: two estates on loopback join, allow and
// exchange messages (a small one each way, a 100 KB one, and a burst of
// small ones sent at once, which go out bundled), and print what each side
// received. With -pcap FILE it also writes their traffic as a
// capture for raetdump.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

func main() {
	pcap := flag.String("pcap", "", "write the estates' traffic to this pcapng file (as alpha's socket sees it)")
	keylog := flag.String("keylog", "", "write the session keys here (for raetdump -keylog)")
	keeps := flag.String("keeps", "", "keep the estates in DIR/alpha and DIR/beta (for raetdump -keep); empty: memory")
	host := flag.String("host", "127.0.0.1", "the loopback address the estates listen on")
	flag.Parse()
	if err := run(*pcap, *keylog, *keeps, *host); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(pcapPath, keylogPath, keeps, host string) (err error) {
	tap, closeTap, err := openTap(pcapPath)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeTap(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := func(name string, main bool) (*road.Stack, error) {
		// The default profile: between two raet-go estates an AEAD coat,
		// which raetdump opens with the key log.
		cfg := &road.Config{Name: name, Main: main, Auto: keep.AutoAlways, Listen: net.JoinHostPort(host, "0"),
			AlivePeriod: -1, Logger: logger, KeyLogFile: keylogPath}
		if main {
			cfg.Tap = tap // one socket sees every datagram between the two
		}
		if keeps != "" {
			cfg.KeepDir = filepath.Join(keeps, name)
		}
		s, err := road.New(cfg)
		if err != nil {
			return nil, err
		}
		return s, s.Start()
	}
	alpha, err := start("alpha", true)
	if err != nil {
		return err
	}
	defer alpha.Close()
	beta, err := start("beta", false)
	if err != nil {
		return err
	}
	defer beta.Close() // closed before the capture file: no datagram is written after it
	fmt.Printf("alpha (main) listens on %s; beta on %s\n", alpha.Addr(), beta.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	r, err := beta.Join(ctx, alpha.Addr().String())
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	fmt.Printf("beta joined and allowed %s (uid %d, session %d) in %v\n", r.Name, r.UID, r.SID, time.Since(t0).Round(time.Microsecond))

	var wg sync.WaitGroup
	show := func(s *road.Stack, n int) {
		defer wg.Done()
		for range n {
			select {
			case m, ok := <-s.Receive():
				if !ok {
					return
				}
				desc := fmt.Sprint(m.Body)
				if len(desc) > 70 {
					desc = desc[:70] + "…"
				}
				fmt.Printf("  %s received from %s: %d bytes %v %s\n", s.Name(), m.From, len(m.Raw), m.Kind, desc)
			case <-ctx.Done():
				return
			}
		}
	}
	const burst = 16
	wg.Add(2)
	go show(alpha, 2+burst)
	go show(beta, 1)
	sends := []struct {
		from *road.Stack
		to   string
		body map[string]any
	}{
		{beta, "alpha", map[string]any{"subject": "hello alpha", "n": 1}},
		{alpha, "beta", map[string]any{"subject": "hello beta", "n": 2}},
		{beta, "alpha", map[string]any{"subject": "a big one", "blob": strings.Repeat("raet ", 20_000)}},
	}
	for _, s := range sends {
		t := time.Now()
		if err := s.from.Send(ctx, s.to, s.body); err != nil {
			return fmt.Errorf("%s -> %s: %w", s.from.Name(), s.to, err)
		}
		fmt.Printf("%s -> %s: done in %v\n", s.from.Name(), s.to, time.Since(t).Round(time.Microsecond))
	}
	// A burst: started at once, the small messages share datagrams
	// (bundles), and alpha answers them all in one (answers).
	t := time.Now()
	errs := make(chan error, burst)
	for i := range burst {
		go func() { errs <- beta.Send(ctx, "alpha", map[string]any{"subject": "burst", "n": 10 + i}) }()
	}
	for range burst {
		if err := <-errs; err != nil {
			return fmt.Errorf("beta -> alpha (burst): %w", err)
		}
	}
	fmt.Printf("beta -> alpha: a burst of %d done in %v\n", burst, time.Since(t).Round(time.Microsecond))
	wg.Wait()
	c, err := beta.Counters(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("beta sent %v\n", c.PacketsOut)
	return nil
}
