package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/builtin"
	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/queue"
	"github.com/raet-go/raet/road"
)

// pluginFlags are the flags of serve and send (road), and of lane serve
// and send, that pick a serializer, a queue or (road only) a coat, built
// in or a plugin:
//
//	--plugins DIR            the plugin directory (plugins.yaml, or raet-KIND-NAME executables)
//	--serializer NAME        json, msgpack, cbor (built in), or plugin:NAME
//	--queue NAME             memory or memory:N (built in), or plugin:NAME (a durable queue)
//	--coat NAME              nacl (built in), or plugin:NAME: offered to raet-go peers, used when both offer it
//	--plugin-timeout D       the deadline of one plugin call
type pluginFlags struct {
	dir, serializer, queue, coat string
	timeout                      time.Duration
}

// register adds the flags of the road commands.
func (f *pluginFlags) register(fs *flag.FlagSet) {
	f.registerCommon(fs, "--body")
	fs.StringVar(&f.coat, "coat", "", "coat: nacl (the default), or plugin:NAME, offered to raet-go peers and used when they offer it too")
}

// registerLane adds the flags of the lane commands: no coat (a lane has
// none).
func (f *pluginFlags) registerLane(fs *flag.FlagSet) { f.registerCommon(fs, "--body") }

func (f *pluginFlags) registerCommon(fs *flag.FlagSet, defaultFlag string) {
	fs.StringVar(&f.dir, "plugins", "", "plugin directory: its plugins.yaml, or executables named raet-KIND-NAME")
	fs.StringVar(&f.serializer, "serializer", "", "serializer of the messages sent: json, msgpack, cbor or plugin:NAME (default: "+defaultFlag+")")
	fs.StringVar(&f.queue, "queue", "", "keep messages until done: memory[:N] or plugin:NAME (a durable queue plugin keeps them across restarts)")
	fs.DurationVar(&f.timeout, "plugin-timeout", 0, "deadline of one plugin call (default 5s)")
}

// pluginName splits "plugin:NAME".
func pluginName(v string) (string, bool) { return strings.CutPrefix(v, "plugin:") }

// apply sets cfg's Serializer, Queue and Coat from the flags, starting the
// plugins they name under one host. The returned stop, never nil, closes
// the host; call it after the stack is closed.
func (f *pluginFlags) apply(ctx context.Context, cfg *road.Config) (stop func(), err error) {
	p, stop, err := f.load(ctx, cfg.Logger)
	if err != nil {
		return stop, err
	}
	if p.serializer != nil {
		cfg.Serializer = p.serializer
	}
	if p.queue != nil {
		cfg.Queue = p.queue
	}
	if p.coat != nil {
		cfg.Coat = p.coat
	}
	return stop, nil
}

// applyLane sets a lane cfg's Serializer and Queue from the flags, as
// apply does for the road.
func (f *pluginFlags) applyLane(ctx context.Context, cfg *lane.Config) (stop func(), err error) {
	p, stop, err := f.load(ctx, cfg.Logger)
	if err != nil {
		return stop, err
	}
	if p.serializer != nil {
		cfg.Serializer = p.serializer
	}
	if p.queue != nil {
		cfg.Queue = p.queue
	}
	return stop, nil
}

// picked is what the plugin flags pick; nil fields were not asked for.
type picked struct {
	serializer packet.Serializer
	queue      queue.Queue
	coat       road.CoatMaker
}

// load starts the plugins the flags name under one host, logging to
// logger (nil: nowhere), and registers a serializer plugin so that
// received bodies of its kind are decoded by it. The returned stop,
// never nil, unregisters it and closes the host.
func (f *pluginFlags) load(ctx context.Context, logger *slog.Logger) (p picked, stop func(), err error) {
	stop = func() {}
	var h *host.Host
	getHost := func() (*host.Host, error) {
		if h != nil {
			return h, nil
		}
		if f.dir == "" {
			return nil, errors.New("a plugin needs --plugins DIR")
		}
		if logger == nil {
			logger = slog.New(slog.DiscardHandler)
		}
		var err error
		h, err = host.New(&host.Config{Dir: f.dir, Logger: logger, CallTimeout: f.timeout})
		return h, err
	}
	var cleanups []func()
	stop = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		if h != nil {
			h.Close()
		}
	}
	defer func() {
		if err != nil {
			stop()
			stop = func() {}
		}
	}()

	// fromPlugin calls get with the host and the plugin a "plugin:NAME"
	// value names; errors name the flag.
	fromPlugin := func(flag, v string, get func(h *host.Host, name string) error) error {
		name, _ := pluginName(v)
		h, err := getHost()
		if err == nil {
			err = get(h, name)
		}
		if err != nil {
			return fmt.Errorf("--%s %s: %w", flag, v, err)
		}
		return nil
	}

	switch v := f.serializer; {
	case v == "":
	case strings.HasPrefix(v, "plugin:"):
		if err := fromPlugin("serializer", v, func(h *host.Host, name string) error {
			s, err := h.Serializer(ctx, name)
			if err == nil {
				err = s.Register(nil)
			}
			if err != nil {
				return err
			}
			cleanups = append(cleanups, s.Unregister)
			p.serializer = s
			return nil
		}); err != nil {
			return p, stop, err
		}
	default:
		s, err := builtin.Serializer(v)
		if err != nil {
			return p, stop, fmt.Errorf("--serializer: %w", err)
		}
		p.serializer = s
	}

	switch v := f.queue; {
	case v == "":
	case strings.HasPrefix(v, "plugin:"):
		if err := fromPlugin("queue", v, func(h *host.Host, name string) error {
			q, err := h.Queue(ctx, name)
			if err == nil {
				p.queue = q
			}
			return err
		}); err != nil {
			return p, stop, err
		}
	case v == "memory" || strings.HasPrefix(v, "memory:"):
		n := 0
		if s, ok := strings.CutPrefix(v, "memory:"); ok {
			if n, err = strconv.Atoi(s); err != nil || n < 1 {
				return p, stop, fmt.Errorf("--queue %s: want memory:N with N >= 1", v)
			}
		}
		p.queue = builtin.NewMemQueue(n, 0)
	default:
		return p, stop, fmt.Errorf("--queue %q: want memory, memory:N or plugin:NAME", v)
	}

	switch v := f.coat; {
	case v == "" || v == "nacl":
	case strings.HasPrefix(v, "plugin:"):
		// Offered to raet-go peers; used for a session only when the
		// peer offers the same coat kind (road.Config.Coat).
		if err := fromPlugin("coat", v, func(h *host.Host, name string) error {
			c, err := h.Coat(ctx, name)
			if err == nil {
				p.coat = coatMaker{c}
			}
			return err
		}); err != nil {
			return p, stop, err
		}
	default:
		return p, stop, fmt.Errorf("--coat %q: want nacl or plugin:NAME", v)
	}
	return p, stop, nil
}

// coatMaker adapts a coat plugin to road.CoatMaker.
type coatMaker struct{ c *host.Coat }

func (m coatMaker) Kind() codec.CoatKind { return m.c.Info().Kind }

func (m coatMaker) Session(ourShortPriv, theirShortPub *[32]byte) (packet.Coat, error) {
	return m.c.Session(ourShortPriv, theirShortPub)
}

// pluginLine is one line of `raet plugins list`.
type pluginLine struct {
	Name     string `json:"name"`
	Provides string `json:"provides"`
	Path     string `json:"path"`
	Running  bool   `json:"running,omitempty"`
	Protocol int    `json:"protocol,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Version  string `json:"version,omitempty"`
	Error    string `json:"error,omitempty"`
}

// runPlugins is `raet plugins list --plugins DIR [--check]`: the plugins a
// directory holds, one JSON line each; --check starts each one and reports
// what it says it is.
var pluginsHelp = help{
	usage: `raet plugins list --plugins DIR [--check] [-v]`,
	about: `List the plugins of DIR (its plugins.yaml, or executables named
raet-KIND-NAME), one line each {"name":..,"provides":..,"path":..}. With
--check each is started and asked for its kind and version; a plugin that
fails makes the exit status 1. make plugins builds the example plugins into
bin/plugins.`,
	example: `make plugins && raet plugins list --plugins bin/plugins --check`,
}

func runPlugins(args []string, stdout, stderr io.Writer) int {
	const prog = "raet plugins list"
	fs := newFlags(prog, stderr)
	dir := fs.String("plugins", "", "plugin `dir`ectory")
	check := fs.Bool("check", false, "start each plugin and report its kind and version")
	verbose := fs.Bool("v", false, "log the plugins' start (to stderr)")
	if len(args) > 0 && args[0] == "list" {
		args = args[1:]
	} else if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return usageError(stderr, "raet plugins", "the operation is list")
	}
	if code, ok := parseFlags(fs, pluginsHelp, args, 0, stdout, stderr); !ok {
		return code
	}
	if *dir == "" {
		return usageError(stderr, prog, "need --plugins DIR")
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	h, err := host.New(&host.Config{Dir: *dir, Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))})
	if err != nil {
		fmt.Fprintln(stderr, "raet plugins list:", err)
		return exitSetup
	}
	defer h.Close()
	enc := json.NewEncoder(stdout)
	code := exitOK
	for _, s := range h.Specs() {
		line := pluginLine{Name: s.Name, Provides: s.Provides, Path: s.Path}
		if *check {
			if err := describe(h, s, &line); err != nil {
				line.Error = err.Error()
				code = exitFailure
			}
		}
		if err := enc.Encode(line); err != nil {
			return exitFailure
		}
	}
	return code
}

func describe(h *host.Host, s host.Spec, line *pluginLine) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	switch s.Provides {
	case "serializer":
		p, err := h.Serializer(ctx, s.Name)
		if err != nil {
			return err
		}
		line.Kind, line.Version = "body kind "+p.Kind().String(), p.Info().Version
	case "coat":
		p, err := h.Coat(ctx, s.Name)
		if err != nil {
			return err
		}
		line.Kind, line.Version = "coat kind "+p.Info().Kind.String(), p.Info().Version
	case "queue":
		p, err := h.Queue(ctx, s.Name)
		if err != nil {
			return err
		}
		line.Kind, line.Version = "queue", p.Info().Version
		if p.Info().Durable {
			line.Kind = "durable queue"
		}
	}
	st, err := h.Status(s.Name)
	if err != nil {
		return err
	}
	line.Running, line.Protocol = st.Running, st.Version
	return nil
}
