package host

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/raet-go/raet/plugins/sdk"
)

// ConfigFile is the name of the plugins config in a plugin directory.
const ConfigFile = "plugins.yaml"

// Config configures a Host. The zero value has no plugins.
type Config struct {
	// Dir is the plugin directory: plugin binaries are found there, and it
	// is each plugin's working directory (relative paths in its args are
	// relative to it). Its plugins.yaml, if any, names the plugins;
	// without one, each executable named raet-serializer-NAME,
	// raet-coat-NAME or raet-queue-NAME in Dir is a plugin NAME providing
	// that kind. Empty: no directory.
	Dir string
	// Plugins are more plugins, besides those found in Dir (a name in both
	// is an error).
	Plugins []Spec

	// Logger receives the host's logs and the plugins' (each line with
	// plugin=NAME); nil is silent.
	Logger *slog.Logger
	// CallTimeout is the default deadline of one call to a plugin: 5s. A
	// hung plugin fails the call with context.DeadlineExceeded when it
	// passes.
	CallTimeout time.Duration
	// StartTimeout bounds a plugin's start up to its handshake: 10s.
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a crashed plugin is
	// started again; it doubles from MinBackoff (100ms) after each failed
	// start, up to MaxBackoff (10s), and is reset by a start that works.
	MinBackoff, MaxBackoff time.Duration
	// HungRestarts is how many calls in a row may miss their deadline
	// before the plugin is killed and started again: 3; negative never.
	HungRestarts int
	// MaxBytesInFlight bounds, per serializer or coat plugin, the bytes of
	// its calls in flight: each call reserves its request and the largest
	// answer a call may carry (sdk.MaxCallSize) and keeps its answer's
	// actual size until its batch returns to the caller. A call that finds
	// no room waits, up to its call deadline, then fails with
	// ErrOverBudget (waiting, since the room comes back as soon as the
	// calls in flight return; a deadline, so that a plugin that answers
	// too much slows its own callers and fails them, never grows the
	// host). A call goes when nothing is in flight, whatever its size.
	// 0 means DefaultMaxBytesInFlight; negative, no bound (a call is then
	// bounded, the sum of calls is not). Queue plugins are not under it:
	// their answers are ids, and the messages Pending asks for.
	MaxBytesInFlight int64
}

// Spec names one plugin: a line of plugins.yaml.
//
//	plugins:
//	  - name: zstdjson                    # how --serializer plugin:zstdjson finds it
//	    provides: serializer              # serializer, coat or queue
//	    path: raet-serializer-zstdjson    # relative to the directory, or absolute
//	    args: []
//	    env: [ZSTD_LEVEL=3]
//	    timeout: 2s                       # the call deadline (default: Config.CallTimeout)
type Spec struct {
	Name     string        `yaml:"name"`
	Provides string        `yaml:"provides"`
	Path     string        `yaml:"path"`
	Args     []string      `yaml:"args"`
	Env      []string      `yaml:"env"`
	Timeout  time.Duration `yaml:"timeout"`
}

type configFile struct {
	Plugins []Spec `yaml:"plugins"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// Discover lists the plugins of a directory: those its plugins.yaml names,
// or without one the executables named raet-KIND-NAME. Paths in the result
// are absolute.
func Discover(dir string) ([]Spec, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(filepath.Join(abs, ConfigFile))
	var specs []Spec
	switch {
	case err == nil:
		var cf configFile
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		dec.KnownFields(true)
		if err := dec.Decode(&cf); err != nil {
			return nil, fmt.Errorf("raet: plugins: %s: %w", filepath.Join(abs, ConfigFile), err)
		}
		specs = cf.Plugins
	case errors.Is(err, os.ErrNotExist):
		entries, err := os.ReadDir(abs)
		if err != nil {
			return nil, fmt.Errorf("raet: plugins: %w", err)
		}
		for _, e := range entries {
			kind, name, ok := splitBinaryName(e.Name())
			if !ok || e.IsDir() {
				continue
			}
			if fi, err := e.Info(); err != nil || fi.Mode()&0o111 == 0 {
				continue
			}
			specs = append(specs, Spec{Name: name, Provides: kind, Path: e.Name()})
		}
	default:
		return nil, fmt.Errorf("raet: plugins: %w", err)
	}
	for i := range specs {
		if specs[i].Path == "" {
			specs[i].Path = specs[i].Name
		}
		if !filepath.IsAbs(specs[i].Path) {
			specs[i].Path = filepath.Join(abs, specs[i].Path)
		}
	}
	return specs, nil
}

// splitBinaryName splits raet-KIND-NAME.
func splitBinaryName(file string) (kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(file, "raet-")
	if !ok {
		return "", "", false
	}
	kind, name, ok = strings.Cut(rest, "-")
	if !ok || !validKind(kind) || !nameRE.MatchString(name) {
		return "", "", false
	}
	return kind, name, true
}

func validKind(k string) bool {
	return k == sdk.KindSerializer || k == sdk.KindCoat || k == sdk.KindQueue
}

// validate checks the specs: names unique and well-formed, a known kind,
// an executable binary.
func validate(specs []Spec) error {
	var names []string
	for _, s := range specs {
		if !nameRE.MatchString(s.Name) {
			return fmt.Errorf("raet: plugins: bad plugin name %q (lower-case letters, digits, '_', '-', '.')", s.Name)
		}
		if slices.Contains(names, s.Name) {
			return fmt.Errorf("raet: plugins: plugin %q named twice", s.Name)
		}
		names = append(names, s.Name)
		if !validKind(s.Provides) {
			return fmt.Errorf("raet: plugins: plugin %q provides %q; want serializer, coat or queue", s.Name, s.Provides)
		}
		fi, err := os.Stat(s.Path)
		if err != nil {
			return fmt.Errorf("raet: plugins: plugin %q: %w", s.Name, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("raet: plugins: plugin %q: %s is not an executable file", s.Name, s.Path)
		}
		for _, e := range s.Env {
			if !strings.Contains(e, "=") {
				return fmt.Errorf("raet: plugins: plugin %q: env %q is not KEY=VALUE", s.Name, e)
			}
		}
		if s.Timeout < 0 {
			return fmt.Errorf("raet: plugins: plugin %q: negative timeout", s.Name)
		}
	}
	return nil
}

func (c *Config) populate() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 5 * time.Second
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = 10 * time.Second
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = 100 * time.Millisecond
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Second
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = c.MinBackoff
	}
	if c.HungRestarts == 0 {
		c.HungRestarts = 3
	}
	if c.MaxBytesInFlight == 0 {
		c.MaxBytesInFlight = DefaultMaxBytesInFlight
	}
}
