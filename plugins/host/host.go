package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raet-go/raet/plugins/internal/convert"
	"github.com/raet-go/raet/plugins/sdk"
)

// Errors of the host; a failed call wraps one of them in a *CallError.
var (
	// ErrClosed: the host is closed.
	ErrClosed = errors.New("raet: plugin host closed")
	// ErrUnavailable: the plugin is not running (it exited and has not come
	// back yet) and the call's deadline passed while waiting for it.
	ErrUnavailable = errors.New("raet: plugin unavailable")
	// ErrCrashed: the plugin exited (or its connection broke) during the
	// call. The call's outcome is unknown; the plugin is started again.
	ErrCrashed = errors.New("raet: plugin exited during the call")
	// ErrUnknownPlugin: no plugin of that name is configured.
	ErrUnknownPlugin = errors.New("raet: no such plugin")
	// ErrWrongKind: the plugin provides another kind than the one asked for.
	ErrWrongKind = errors.New("raet: the plugin provides another kind")
)

// CallError reports a failed call to a plugin.
type CallError struct {
	Plugin string // the plugin's name
	Op     string // the call: "Encode", "Put", "start", ...
	Err    error
}

// Error implements error.
func (e *CallError) Error() string {
	return "raet: plugin " + e.Plugin + ": " + e.Op + ": " + strings.TrimPrefix(e.Err.Error(), "raet: ")
}

// Unwrap returns the cause.
func (e *CallError) Unwrap() error { return e.Err }

// Host owns the plugin subprocesses of an estate. Make one with New; it
// starts nothing until Start or the first use of a plugin. Close stops
// them. A Host is safe for concurrent use.
type Host struct {
	cfg     Config
	procs   []*proc
	byName  map[string]*proc
	closing chan struct{}
	once    sync.Once
	wg      sync.WaitGroup

	mu     sync.Mutex // orders wg.Add of a new supervisor before Close's Wait
	closed bool

	spawnOnce sync.Once
	spawnCh   chan func()
	spawnStop chan struct{}
	spawnDone chan struct{}
}

// New checks the configuration and finds the plugins of cfg.Dir. A nil
// cfg is the zero Config.
func New(cfg *Config) (*Host, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	c.populate()
	var specs []Spec
	if c.Dir != "" {
		found, err := Discover(c.Dir)
		if err != nil {
			return nil, err
		}
		specs = found
	}
	for _, s := range c.Plugins {
		if s.Path == "" {
			s.Path = s.Name
		}
		if !strings.ContainsRune(s.Path, os.PathSeparator) && c.Dir != "" {
			s.Path = c.Dir + string(os.PathSeparator) + s.Path
		}
		specs = append(specs, s)
	}
	if err := validate(specs); err != nil {
		return nil, err
	}
	h := &Host{cfg: c, byName: map[string]*proc{}, closing: make(chan struct{})}
	for _, s := range specs {
		p := &proc{h: h, spec: s, timeout: c.CallTimeout, up: make(chan struct{}), kick: make(chan struct{}, 1),
			budget: newBudget(c.MaxBytesInFlight)}
		if s.Timeout > 0 {
			p.timeout = s.Timeout
		}
		h.procs = append(h.procs, p)
		h.byName[s.Name] = p
	}
	return h, nil
}

// Specs lists the configured plugins.
func (h *Host) Specs() []Spec {
	out := make([]Spec, len(h.procs))
	for i, p := range h.procs {
		out[i] = p.spec
	}
	return out
}

// Start starts every configured plugin now (rather than on first use), so
// that a broken one fails the estate's start. On error the plugins started
// are left running for Close.
func (h *Host) Start(ctx context.Context) error {
	var errs []error
	for _, p := range h.procs {
		errs = append(errs, p.ensure(ctx))
	}
	return errors.Join(errs...)
}

// Close stops every plugin (gracefully, then with SIGKILL after two
// seconds) and waits for the supervisors. Calls in flight or later fail
// with ErrClosed. It is safe to call more than once.
func (h *Host) Close() error {
	h.once.Do(func() {
		h.mu.Lock()
		h.closed = true
		close(h.closing)
		h.mu.Unlock()
		h.wg.Wait()
		for _, p := range h.procs {
			p.stop()
		}
		h.spawnOnce.Do(func() {}) // no spawner after Close
		if h.spawnStop != nil {
			close(h.spawnStop)
			<-h.spawnDone
		}
	})
	return nil
}

// onSpawner runs fn on the spawner: one goroutine locked to its OS thread
// for the host's life. Pdeathsig fires when the *thread* that started a
// plugin exits, not the process; Go ends a thread when a goroutine that
// locked it exits, so a plugin started from an ordinary goroutine could
// be killed when some unrelated code later locks and leaves that thread.
// Starting every plugin from one thread that lives until Close avoids it.
func (h *Host) onSpawner(fn func()) error {
	h.spawnOnce.Do(func() {
		h.spawnCh = make(chan func())
		h.spawnStop = make(chan struct{})
		h.spawnDone = make(chan struct{})
		go h.spawner()
	})
	if h.spawnCh == nil {
		return ErrClosed
	}
	done := make(chan struct{})
	select {
	case h.spawnCh <- func() { defer close(done); fn() }:
	case <-h.spawnDone:
		return ErrClosed
	}
	<-done
	return nil
}

func (h *Host) spawner() {
	runtime.LockOSThread() // never unlocked: the thread ends with the host
	defer close(h.spawnDone)
	for {
		select {
		case fn := <-h.spawnCh:
			fn()
		case <-h.spawnStop:
			return
		}
	}
}

// Status is a plugin's state, for operators and tests.
type Status struct {
	Spec
	Running  bool
	PID      int   // the running process, 0 if none
	Version  int   // the negotiated protocol version
	Restarts int   // starts after the first
	LastErr  error // the last crash or failed start
	// BytesInFlight is what its calls reserve or hold now
	// (Config.MaxBytesInFlight); 0 for a queue plugin.
	BytesInFlight int64
}

// Status reports a plugin's state.
func (h *Host) Status(name string) (Status, error) {
	p := h.byName[name]
	if p == nil {
		return Status{}, fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st := Status{Spec: p.spec, Running: p.state == stateRunning, Version: p.version,
		Restarts: p.restarts, LastErr: p.lastErr, BytesInFlight: p.budget.inFlight()}
	if st.Running && p.client != nil {
		if rc := p.client.ReattachConfig(); rc != nil {
			st.PID = rc.Pid
		}
	}
	return st, nil
}

// plugin returns the named plugin, started, checking its kind.
func (h *Host) plugin(ctx context.Context, name, kind string) (*proc, error) {
	p := h.byName[name]
	if p == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownPlugin, name)
	}
	if p.spec.Provides != kind {
		return nil, fmt.Errorf("%w: %q provides %s, not %s", ErrWrongKind, name, p.spec.Provides, kind)
	}
	if err := p.ensure(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// SerializerPlugin returns the named serializer plugin (started) as an
// sdk.Serializer whose calls have deadlines, survive restarts and split
// batches larger than sdk.MaxBatchBytes.
func (h *Host) SerializerPlugin(ctx context.Context, name string) (sdk.Serializer, error) {
	p, err := h.plugin(ctx, name, sdk.KindSerializer)
	if err != nil {
		return nil, err
	}
	return guardedSerializer{p}, nil
}

// CoatPlugin returns the named coat plugin as a guarded sdk.Coat.
func (h *Host) CoatPlugin(ctx context.Context, name string) (sdk.Coat, error) {
	p, err := h.plugin(ctx, name, sdk.KindCoat)
	if err != nil {
		return nil, err
	}
	return guardedCoat{p}, nil
}

// QueuePlugin returns the named queue plugin as a guarded sdk.Queue.
func (h *Host) QueuePlugin(ctx context.Context, name string) (sdk.Queue, error) {
	p, err := h.plugin(ctx, name, sdk.KindQueue)
	if err != nil {
		return nil, err
	}
	return guardedQueue{p}, nil
}

// Serializer returns the named serializer plugin as a packet.Serializer
// (see NewSerializer).
func (h *Host) Serializer(ctx context.Context, name string) (*Serializer, error) {
	s, err := h.SerializerPlugin(ctx, name)
	if err != nil {
		return nil, err
	}
	return NewSerializer(ctx, s, h.byName[name].timeout)
}

// Coat returns the named coat plugin, ready to make packet.Coat sessions
// (see NewCoat).
func (h *Host) Coat(ctx context.Context, name string) (*Coat, error) {
	c, err := h.CoatPlugin(ctx, name)
	if err != nil {
		return nil, err
	}
	return NewCoat(ctx, c, h.byName[name].timeout)
}

// Queue returns the named queue plugin as a road.Queue (see NewQueue).
func (h *Host) Queue(ctx context.Context, name string) (*Queue, error) {
	q, err := h.QueuePlugin(ctx, name)
	if err != nil {
		return nil, err
	}
	return NewQueue(ctx, q, h.byName[name].timeout)
}

// ---------------------------------------------------------------------------
// One plugin process and its supervisor.
//
//	stopped ──ensure──▶ running ──exit/hang──▶ down ──start (backoff)──▶ running
//	   any ──Close──▶ closed

type procState int

const (
	stateStopped procState = iota // never started, or the first start failed
	stateRunning
	stateDown // exited; the supervisor is starting it again
	stateClosed
)

type proc struct {
	h       *Host
	spec    Spec
	timeout time.Duration

	startMu sync.Mutex // serializes the first start

	mu       sync.Mutex
	state    procState
	client   *plugin.Client
	impl     any
	info     any // the Info of the first start: SerializerInfo, CoatInfo or QueueInfo
	gen      uint64
	up       chan struct{} // closed when the plugin runs; a new one when it goes down
	version  int
	restarts int
	lastErr  error
	hung     int    // calls in a row that missed their deadline
	kill     uint64 // a generation to kill and start again (hung, broken)
	why      string // why kill was set
	kick     chan struct{}
	budget   *budget // bytes of serializer and coat calls in flight
}

// ensure starts the plugin if it never ran.
func (p *proc) ensure(ctx context.Context) error {
	p.mu.Lock()
	st := p.state
	p.mu.Unlock()
	if st != stateStopped {
		if st == stateClosed {
			return &CallError{Plugin: p.spec.Name, Op: "start", Err: ErrClosed}
		}
		return nil
	}
	p.startMu.Lock()
	defer p.startMu.Unlock()
	p.mu.Lock()
	st = p.state
	p.mu.Unlock()
	if st != stateStopped {
		return nil
	}
	select {
	case <-p.h.closing:
		return &CallError{Plugin: p.spec.Name, Op: "start", Err: ErrClosed}
	default:
	}
	l, err := p.launch(ctx)
	if err != nil {
		return &CallError{Plugin: p.spec.Name, Op: "start", Err: err}
	}
	p.h.mu.Lock()
	if p.h.closed { // Close ran meanwhile
		p.h.mu.Unlock()
		l.client.Kill()
		return &CallError{Plugin: p.spec.Name, Op: "start", Err: ErrClosed}
	}
	p.h.wg.Add(1)
	p.mu.Lock()
	p.info = l.info
	p.setRunning(l)
	p.mu.Unlock()
	p.h.mu.Unlock()
	go p.supervise()
	p.h.cfg.Logger.Info("raet: plugin started", "plugin", p.spec.Name, "provides", p.spec.Provides,
		"version", l.version, "path", p.spec.Path)
	return nil
}

// setRunning installs a launched process; p.mu is held.
func (p *proc) setRunning(l launched) {
	p.client, p.impl, p.version = l.client, l.impl, l.version
	p.gen++
	p.hung = 0
	p.state = stateRunning
	close(p.up)
}

type launched struct {
	client  *plugin.Client
	impl    any
	version int
	info    any
}

// launch starts one process: handshake, dispense, Info.
func (p *proc) launch(ctx context.Context) (launched, error) {
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Dir = p.h.cfg.Dir
	cmd.Env = append(os.Environ(), p.spec.Env...)
	cmd.SysProcAttr = sysProcAttr()
	sets, _ := sdk.PluginSets(nil)
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sets,
		Cmd:              cmd,
		SkipHostEnv:      true, // cmd.Env has it already, with the plugin's env taking precedence
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           newSlogLogger(p.h.cfg.Logger.With("plugin", p.spec.Name)),
		StartTimeout:     p.h.cfg.StartTimeout,
		GRPCDialOptions:  sdk.GRPCDialOptions(),
	})
	var err error
	fail := func(err error) (launched, error) {
		client.Kill()
		return launched{}, err
	}
	var rpc plugin.ClientProtocol
	if serr := p.h.onSpawner(func() { rpc, err = client.Client() }); serr != nil {
		return fail(serr)
	}
	if err != nil {
		return fail(explainStart(err))
	}
	raw, err := rpc.Dispense(p.spec.Provides)
	if err != nil {
		return fail(fmt.Errorf("the plugin does not provide %s: %w", p.spec.Provides, err))
	}
	ictx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var info any
	switch impl := raw.(type) {
	case sdk.Serializer:
		info, err = impl.Info(ictx)
	case sdk.Coat:
		info, err = impl.Info(ictx)
	case sdk.Queue:
		info, err = impl.Info(ictx)
	default:
		err = fmt.Errorf("dispensed %T", raw)
	}
	if err != nil {
		return fail(fmt.Errorf("info: %w", convert.FromStatus(err)))
	}
	p.mu.Lock()
	first := p.info
	p.mu.Unlock()
	if first != nil && !sameContract(first, info) {
		return fail(fmt.Errorf("the plugin changed its kind across a restart: %+v, was %+v", info, first))
	}
	return launched{client: client, impl: raw, version: client.NegotiatedVersion(), info: info}, nil
}

// sameContract reports whether a restarted plugin still implements what
// its first start did (its own version may change: an upgrade in place).
func sameContract(a, b any) bool {
	switch a := a.(type) {
	case sdk.SerializerInfo:
		b, ok := b.(sdk.SerializerInfo)
		return ok && a.Kind == b.Kind && a.Interchange == b.Interchange
	case sdk.CoatInfo:
		b, ok := b.(sdk.CoatInfo)
		return ok && a.Kind == b.Kind && a.Overhead == b.Overhead
	case sdk.QueueInfo:
		b, ok := b.(sdk.QueueInfo)
		return ok && a.Instance == b.Instance // ids of another store would clash
	}
	return false
}

// explainStart adds what to do to go-plugin's start errors.
func explainStart(err error) error {
	msg := err.Error()
	switch lower := strings.ToLower(msg); {
	case strings.Contains(msg, "Failed to read any lines from plugin's stdout"),
		strings.Contains(msg, "exited before we could connect"):
		return fmt.Errorf("the plugin exited before its handshake (see its log lines): %w", err)
	case strings.Contains(msg, "Unrecognized remote plugin message"):
		return fmt.Errorf("handshake failed: the plugin wrote something other than its handshake line to stdout "+
			"(plugins must log to stderr, and print nothing before sdk.Serve): %w", err)
	case strings.Contains(lower, "incompatible api version"):
		return fmt.Errorf("incompatible plugin protocol version (this host speaks %v; rebuild the plugin with a "+
			"matching plugins/sdk): %w", sdk.Versions, err)
	}
	return err
}

// supervise restarts the plugin when it exits or hangs, until Close.
func (p *proc) supervise() {
	defer p.h.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		kicked := false
		select {
		case <-p.h.closing:
			return
		case <-tick.C:
		case <-p.kick:
			kicked = true
		}
		p.mu.Lock()
		client, gen, kill, why := p.client, p.gen, p.kill == p.gen, p.why
		p.mu.Unlock()
		reason := ""
		switch {
		case kill:
			reason = why
		case client.Exited():
			reason = "the plugin exited"
		case kicked:
			if err := ping(client); err != nil {
				reason = "the plugin stopped answering: " + err.Error()
			}
		}
		if reason == "" || !p.markDown(gen, reason, false) {
			continue
		}
		p.h.cfg.Logger.Warn("raet: plugin down; starting it again", "plugin", p.spec.Name, "reason", reason)
		client.Kill()
		if !p.restart() {
			return
		}
	}
}

func ping(c *plugin.Client) error {
	rpc, err := c.Client()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- rpc.Ping() }()
	select {
	case err := <-done:
		return err
	case <-time.After(2 * time.Second):
		return errors.New("ping timed out")
	}
}

// restart starts the plugin again with backoff; false when the host closed.
func (p *proc) restart() bool {
	backoff := p.h.cfg.MinBackoff
	for {
		select {
		case <-p.h.closing:
			return false
		case <-time.After(backoff):
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.h.cfg.StartTimeout+p.timeout)
		l, err := p.launch(ctx)
		cancel()
		if err == nil {
			p.mu.Lock()
			if p.state == stateClosed {
				p.mu.Unlock()
				l.client.Kill()
				return false
			}
			p.restarts++
			p.setRunning(l)
			p.mu.Unlock()
			p.h.cfg.Logger.Info("raet: plugin started again", "plugin", p.spec.Name, "restarts", p.restarts)
			return true
		}
		p.mu.Lock()
		p.lastErr = err
		p.mu.Unlock()
		p.h.cfg.Logger.Warn("raet: plugin failed to start", "plugin", p.spec.Name, "err", err, "retry_in", 2*backoff)
		backoff = min(2*backoff, p.h.cfg.MaxBackoff)
	}
}

// markDown takes generation gen out of service: calls wait for the
// restart from now on. With kill, the supervisor is asked to kill and
// restart it. It reports whether gen was the one running.
func (p *proc) markDown(gen uint64, reason string, kill bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen || p.state == stateClosed || p.state == stateStopped {
		return false
	}
	if p.state == stateRunning {
		p.state = stateDown
		p.up = make(chan struct{})
	}
	p.lastErr = errors.New(reason)
	if kill {
		p.kill, p.why = gen, reason
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	return true
}

// stop kills the process (after the supervisor ended).
func (p *proc) stop() {
	p.mu.Lock()
	client := p.client
	p.state = stateClosed
	p.client, p.impl = nil, nil
	p.mu.Unlock()
	if client != nil {
		client.Kill()
	}
}

// get waits until the plugin runs, or ctx ends.
func (p *proc) get(ctx context.Context) (any, uint64, error) {
	for {
		p.mu.Lock()
		st, impl, gen, up, last := p.state, p.impl, p.gen, p.up, p.lastErr
		p.mu.Unlock()
		switch st {
		case stateClosed:
			return nil, 0, ErrClosed
		case stateRunning:
			return impl, gen, nil
		case stateStopped:
			return nil, 0, fmt.Errorf("%w: not started", ErrUnavailable)
		}
		select {
		case <-up:
		case <-p.h.closing:
			return nil, 0, ErrClosed
		case <-ctx.Done():
			return nil, 0, fmt.Errorf("%w (down: %v): %w", ErrUnavailable, last, ctx.Err())
		}
	}
}

// call runs fn against the running plugin with the call deadline, and
// classifies its failure.
func (p *proc) call(ctx context.Context, op string, fn func(ctx context.Context, impl any) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	impl, gen, err := p.get(ctx)
	if err != nil {
		return &CallError{Plugin: p.spec.Name, Op: op, Err: err}
	}
	err = fn(ctx, impl)
	if err == nil {
		p.mu.Lock()
		if p.gen == gen {
			p.hung = 0
		}
		p.mu.Unlock()
		return nil
	}
	var re *convert.RemoteError
	code := status.Code(err)
	switch {
	case errors.As(err, &re):
		// the plugin's own answer
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || code == codes.DeadlineExceeded:
		p.noteHung(gen)
		err = fmt.Errorf("%w: no answer within %v", context.DeadlineExceeded, p.timeout)
	case errors.Is(ctx.Err(), context.Canceled):
		err = ctx.Err()
	case code == codes.Unavailable || code == codes.Canceled || code == codes.Internal:
		p.markDown(gen, "the connection broke during "+op+": "+err.Error(), true)
		err = fmt.Errorf("%w: %w", ErrCrashed, err)
	}
	return &CallError{Plugin: p.spec.Name, Op: op, Err: err}
}

func (p *proc) noteHung(gen uint64) {
	p.mu.Lock()
	if p.gen != gen || p.h.cfg.HungRestarts < 0 {
		p.mu.Unlock()
		return
	}
	p.hung++
	hung := p.hung >= p.h.cfg.HungRestarts
	p.mu.Unlock()
	if hung {
		p.markDown(gen, fmt.Sprintf("%d calls in a row missed their deadline", p.h.cfg.HungRestarts), true)
	}
}

// ---------------------------------------------------------------------------
// Batches larger than one call may carry.

// batched runs fn on slices of items that each stay under MaxBatchBytes,
// and fails the items over MaxItemSize without a call.
func batched(items [][]byte, fn func(sub [][]byte, idx []int) ([]sdk.Result, error)) ([]sdk.Result, error) {
	out := make([]sdk.Result, len(items))
	var sub [][]byte
	var idx []int
	size := 0
	flush := func() error {
		if len(sub) == 0 {
			return nil
		}
		rs, err := fn(sub, idx)
		if err != nil {
			return err
		}
		if len(rs) != len(sub) {
			return fmt.Errorf("%w: %d results for %d items", sdk.ErrInvalid, len(rs), len(sub))
		}
		for i, r := range rs {
			out[idx[i]] = r
		}
		sub, idx, size = sub[:0], idx[:0], 0
		return nil
	}
	for i, it := range items {
		if len(it) > sdk.MaxItemSize {
			out[i].Err = fmt.Errorf("%w: %d bytes (at most %d)", sdk.ErrTooLarge, len(it), sdk.MaxItemSize)
			continue
		}
		if size+len(it) > sdk.MaxBatchBytes && len(sub) > 0 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		sub, idx = append(sub, it), append(idx, i)
		size += len(it)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return out, nil
}

type guardedSerializer struct{ p *proc }

func (g guardedSerializer) Info(context.Context) (sdk.SerializerInfo, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.p.info.(sdk.SerializerInfo), nil
}

func (g guardedSerializer) run(ctx context.Context, op string, items [][]byte,
	fn func(sdk.Serializer, context.Context, [][]byte) ([]sdk.Result, error)) ([]sdk.Result, error) {
	return g.p.budgeted(ctx, op, items, func(sub [][]byte) (rs []sdk.Result, err error) {
		err = g.p.call(ctx, op, func(ctx context.Context, impl any) error {
			rs, err = fn(impl.(sdk.Serializer), ctx, sub)
			return err
		})
		return rs, err
	})
}

func (g guardedSerializer) Encode(ctx context.Context, bodies [][]byte) ([]sdk.Result, error) {
	return g.run(ctx, "Encode", bodies, sdk.Serializer.Encode)
}

func (g guardedSerializer) Decode(ctx context.Context, bodies [][]byte) ([]sdk.Result, error) {
	return g.run(ctx, "Decode", bodies, sdk.Serializer.Decode)
}

type guardedCoat struct{ p *proc }

func (g guardedCoat) Info(context.Context) (sdk.CoatInfo, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.p.info.(sdk.CoatInfo), nil
}

func (g guardedCoat) run(ctx context.Context, op string, key *sdk.SessionKey, items [][]byte,
	fn func(sdk.Coat, context.Context, *sdk.SessionKey, [][]byte) ([]sdk.Result, error)) ([]sdk.Result, error) {
	return g.p.budgeted(ctx, op, items, func(sub [][]byte) (rs []sdk.Result, err error) {
		err = g.p.call(ctx, op, func(ctx context.Context, impl any) error {
			rs, err = fn(impl.(sdk.Coat), ctx, key, sub)
			return err
		})
		return rs, err
	})
}

func (g guardedCoat) Seal(ctx context.Context, key *sdk.SessionKey, bodies [][]byte) ([]sdk.Result, error) {
	return g.run(ctx, "Seal", key, bodies, sdk.Coat.Seal)
}

func (g guardedCoat) Open(ctx context.Context, key *sdk.SessionKey, coats [][]byte) ([]sdk.Result, error) {
	return g.run(ctx, "Open", key, coats, sdk.Coat.Open)
}

type guardedQueue struct{ p *proc }

func (g guardedQueue) Info(context.Context) (sdk.QueueInfo, error) {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.p.info.(sdk.QueueInfo), nil
}

func (g guardedQueue) Put(ctx context.Context, msgs []sdk.Message) ([]uint64, error) {
	size := 0
	for _, m := range msgs {
		size += len(m.Body)
	}
	if size > sdk.MaxBatchBytes && len(msgs) > 1 {
		// Split; each part is atomic, the whole is not (documented on Queue).
		half := len(msgs) / 2
		a, err := g.Put(ctx, msgs[:half])
		if err != nil {
			return nil, err
		}
		b, err := g.Put(ctx, msgs[half:])
		if err != nil {
			return nil, err
		}
		return append(a, b...), nil
	}
	if size > sdk.MaxItemSize {
		return nil, &CallError{Plugin: g.p.spec.Name, Op: "Put", Err: fmt.Errorf("%w: a message of %d bytes", sdk.ErrTooLarge, size)}
	}
	var ids []uint64
	err := g.p.call(ctx, "Put", func(ctx context.Context, impl any) (err error) {
		ids, err = impl.(sdk.Queue).Put(ctx, msgs)
		return err
	})
	return ids, err
}

func (g guardedQueue) Done(ctx context.Context, ids []uint64) error {
	for chunk := range slices.Chunk(ids, 1<<16) {
		if err := g.p.call(ctx, "Done", func(ctx context.Context, impl any) error {
			return impl.(sdk.Queue).Done(ctx, chunk)
		}); err != nil {
			return err
		}
	}
	return nil
}

func (g guardedQueue) Pending(ctx context.Context, after uint64, limit int) ([]sdk.Message, error) {
	var msgs []sdk.Message
	err := g.p.call(ctx, "Pending", func(ctx context.Context, impl any) (err error) {
		msgs, err = impl.(sdk.Queue).Pending(ctx, after, limit)
		return err
	})
	return msgs, err
}

// Version returns the negotiated protocol version of the plugin.
func (p *proc) Version() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version
}
