//go:build unix

package lane

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/raet-go/raet/internal/testutil"
)

// A socket directory others can write is refused, sticky or not, unless
// Config.AllowSharedDir says the risk is accepted; then it is logged. A
// directory only its owner writes is used as before.
func TestSharedDirRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o777 | os.ModeSticky, 0o770, 0o757, 0o700, 0o755} {
		t.Run(mode.String(), func(t *testing.T) {
			testutil.CheckLeaks(t)
			dir := testutil.ShortTempDir(t, "rs")
			if err := os.Chmod(dir, mode); err != nil {
				t.Fatal(err)
			}
			shared := mode&0o022 != 0
			s, err := New(&Config{Dir: dir, Name: "alpha"})
			if err != nil {
				t.Fatal(err)
			}
			err = s.Start()
			var be *BindError
			switch {
			case shared && (!errors.Is(err, ErrSharedDir) || !errors.As(err, &be) || be.Path != dir):
				t.Fatalf("Start in a %v directory: %v; want a *BindError wrapping ErrSharedDir", mode, err)
			case !shared && err != nil:
				t.Fatalf("Start in a %v directory: %v", mode, err)
			}
			if err := s.Close(); err != nil && !errors.Is(err, ErrNotStarted) {
				t.Fatal(err)
			}
			if shared {
				if _, err := os.Stat(dir + "/lane.alpha.uxd"); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("a refused yard left its socket: %v", err)
				}
			}
			var log bytes.Buffer
			a := newStack(t, dir, "alpha", func(c *Config) {
				c.AllowSharedDir = true
				c.Logger = slog.New(slog.NewTextHandler(&log, nil))
			})
			if got := strings.Contains(log.String(), "writable by others"); got != shared {
				t.Fatalf("with AllowSharedDir in a %v directory, risk logged %v; log:\n%s", mode, got, log.String())
			}
			b := newStack(t, dir, "beta", func(c *Config) { c.AllowSharedDir = true })
			if err := a.Send(ctxT(t), "beta", map[string]any{"m": 1}); err != nil {
				t.Fatal(err)
			}
			receive(t, b)
		})
	}
}
