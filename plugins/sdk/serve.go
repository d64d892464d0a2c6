package sdk

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// ServeOpt configures Serve.
type ServeOpt func(*serveConfig)

type serveConfig struct {
	logger   hclog.Logger
	versions []int
	maxProcs int
}

// WithLogger sets the logger of the go-plugin server (default: Logger with
// the plugin's name "raet-plugin").
func WithLogger(l hclog.Logger) ServeOpt { return func(c *serveConfig) { c.logger = l } }

// WithMaxProcs sets how many threads may run the plugin's Go code at once
// (runtime.GOMAXPROCS). The default is 1, unless the GOMAXPROCS environment
// variable is set (a host gives it with Spec.Env): a plugin answers one
// host's calls, and with a single P a call's hand-offs between gRPC's
// reader, handler and writer goroutines stay on one thread instead of
// waking idle ones. On a loaded 2-core machine a one-item round trip then
// takes ~135 µs against 160-250 µs with every core, and the plugin's CPU
// per call ~80 µs against 90-100 (plugins/host BenchmarkCallPath). A
// plugin that does heavy work in parallel within a call asks for more.
func WithMaxProcs(n int) ServeOpt { return func(c *serveConfig) { c.maxProcs = n } }

// WithVersions limits the protocol versions served (default: Versions).
// Tests use it to play an older plugin.
func WithVersions(v ...int) ServeOpt { return func(c *serveConfig) { c.versions = v } }

// Serve serves impl, a Serializer, a Coat or a Queue (or a type that is
// several of them), to the estate that started this process, and returns
// when the estate ends the plugin. It is all a plugin's main calls. Run by
// hand (without the handshake's magic cookie), it prints a short note to
// stderr and exits with status 1.
func Serve(impl any, opts ...ServeOpt) {
	cfg := serveConfig{versions: Versions}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = Logger("raet-plugin")
	}
	if n := maxProcs(cfg.maxProcs, os.Getenv("GOMAXPROCS")); n > 0 {
		runtime.GOMAXPROCS(n)
	}
	sets, err := PluginSets(impl, cfg.versions...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "raet plugin:", err)
		os.Exit(1)
	}
	go watchParent(os.Getppid())
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: sets,
		GRPCServer:       GRPCServer,
		Logger:           cfg.logger,
	})
}

// maxProcs is the GOMAXPROCS a plugin runs with: the one asked for, else 1
// unless the environment sets it (0: leave the runtime's own).
func maxProcs(asked int, env string) int {
	switch {
	case asked > 0:
		return asked
	case env != "":
		return 0
	}
	return 1
}

// watchParent ends the plugin when its estate is gone (the process is
// reparented). On Linux the host's Pdeathsig does it first; this covers
// the other systems.
func watchParent(ppid int) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for range t.C {
		if os.Getppid() != ppid {
			os.Exit(3)
		}
	}
}

// GRPCServer makes the plugin's gRPC server with the SDK's message-size
// limits (go-plugin's ServeConfig.GRPCServer).
func GRPCServer(opts []grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.MaxRecvMsgSize(MaxCallSize), grpc.MaxSendMsgSize(MaxCallSize),
		grpc.InitialWindowSize(windowSize), grpc.InitialConnWindowSize(windowSize))
	return grpc.NewServer(opts...)
}

// GRPCDialOptions are the host's gRPC options with the SDK's message-size
// limits (go-plugin's ClientConfig.GRPCDialOptions).
func GRPCDialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxCallSize), grpc.MaxCallSendMsgSize(MaxCallSize)),
		grpc.WithInitialWindowSize(windowSize), grpc.WithInitialConnWindowSize(windowSize),
	}
}

// windowSize is the HTTP/2 flow-control window of each side. gRPC's
// default (64 KiB, grown by estimating the bandwidth-delay product) makes
// a batch over 64 KiB wait a round trip for a window update; between two
// processes on one machine memory, not bandwidth, is the limit.
const windowSize = 16 << 20

// PluginSets returns the versioned plugin sets that serve impl: for each
// version, one plugin for each kind impl implements. With impl nil it
// returns the host's sets: every kind, in every version of this SDK.
func PluginSets(impl any, versions ...int) (map[int]plugin.PluginSet, error) {
	if len(versions) == 0 {
		versions = Versions
	}
	sets := map[int]plugin.PluginSet{}
	for _, v := range versions {
		if !slices.Contains(Versions, v) {
			return nil, fmt.Errorf("protocol version %d unknown to this SDK (it speaks %v)", v, Versions)
		}
		set := plugin.PluginSet{}
		s, isS := impl.(Serializer)
		c, isC := impl.(Coat)
		q, isQ := impl.(Queue)
		if impl == nil || isS {
			set[KindSerializer] = &SerializerPlugin{Impl: s, Version: v}
		}
		if impl == nil || isC {
			set[KindCoat] = &CoatPlugin{Impl: c, Version: v}
		}
		if impl == nil || isQ {
			set[KindQueue] = &QueuePlugin{Impl: q, Version: v}
		}
		if len(set) == 0 {
			return nil, fmt.Errorf("%T implements none of sdk.Serializer, sdk.Coat, sdk.Queue", impl)
		}
		sets[v] = set
	}
	return sets, nil
}
