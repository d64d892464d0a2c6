// Package host starts, supervises and calls an estate's plugins.
//
// A Host finds plugins in a directory (its plugins.yaml, or executables
// named raet-KIND-NAME) and in Config.Plugins, and starts each one on
// first use (or all at once with Start) as a managed go-plugin subprocess
// with Pdeathsig, so that no plugin outlives its host, even one killed
// with SIGKILL. It puts a deadline on every call (a hung plugin cannot
// hang the estate), detects a plugin that exits or stops answering, starts
// it again with exponential backoff, forwards the plugins' logs into slog,
// and stops them all on Close.
//
// The plugins come out as the SDK's interfaces with those guarantees
// (SerializerPlugin, CoatPlugin, QueuePlugin), or already adapted to what
// the stacks take (Serializer is a packet.Serializer, Coat makes
// packet.Coat sessions, Queue is a road.Queue). The adapters work as well
// on an in-process implementation of the SDK interfaces (NewSerializer,
// NewCoat, NewQueue).
//
// Errors: a call that fails is a *CallError naming the plugin and the
// call; it wraps ErrCrashed (the plugin exited during the call: it is
// being started again), ErrUnavailable (it is not running and did not come
// back before the deadline), ErrClosed, context.DeadlineExceeded (no
// answer in time), or the plugin's own error, which keeps its identity
// (errors.Is(err, packet.ErrMalformedBody), sdk.ErrQueueFull, ...).
package host
