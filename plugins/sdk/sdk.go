package sdk

import (
	"context"
	"os"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"

	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/internal/convert"
)

// Handshake is the go-plugin handshake between an estate and its plugins.
// The magic cookie is a UX feature, not a security feature: it only makes
// a plugin binary started by hand (not by an estate) say so and exit,
// instead of printing a handshake line nobody reads. It protects nothing.
// ProtocolVersion is unused because both sides use VersionedPlugins.
var Handshake = plugin.HandshakeConfig{
	MagicCookieKey:   "RAET_PLUGIN",
	MagicCookieValue: "3f1c5b2a-raet-go-plugin",
}

// Protocol versions. The host offers every version in Versions and
// go-plugin picks the highest one the plugin also serves, so a plugin
// built against an older SDK keeps working with a newer estate.
//
//   - Version 1: the Serializer, Coat and Queue services; Queue.Pending
//     returns every pending message in one response.
//   - Version 2: Queue.Pending is paged (after an id, up to a count and a
//     byte budget), so a durable queue holding more than one gRPC message
//     can carry is still read whole.
const (
	Version1 = 1
	Version2 = 2
	// LatestVersion is what Serve offers besides the older versions.
	LatestVersion = Version2
)

// Versions lists every protocol version this SDK speaks.
var Versions = []int{Version1, Version2}

// Names of the plugins in a plugin set: what a plugin provides.
const (
	KindSerializer = "serializer"
	KindCoat       = "coat"
	KindQueue      = "queue"
)

// Size limits, set explicitly on both ends of the gRPC connection (the
// gRPC default of 4 MiB would refuse a large message).
const (
	// MaxCallSize bounds one request or response, in bytes.
	MaxCallSize = 96 << 20
	// MaxItemSize bounds one item of a batch: room for the largest message
	// an estate reassembles by default (64 MiB) and a coat or compression
	// overhead. Larger items fail with ErrTooLarge before any call.
	MaxItemSize = 80 << 20
	// MaxBatchBytes bounds the items of one call added up; the host splits
	// larger batches (an item larger than this goes alone).
	MaxBatchBytes = 64 << 20
)

// Errors that keep their identity across the process boundary: a plugin
// returns them (wrapped or not) and the host's errors.Is finds them. Any
// other error crosses as its text only.
var (
	// ErrMalformed: bytes not valid for the body kind, or a coat whose
	// inside is not a body (packet.ErrMalformedBody).
	ErrMalformed = packet.ErrMalformedBody
	// ErrNotMapping: a body that is not a mapping (packet.ErrNotMapping).
	ErrNotMapping = packet.ErrNotMapping
	// ErrUnsupported: a value the serializer cannot handle
	// (packet.ErrUnsupportedValue).
	ErrUnsupported = packet.ErrUnsupportedValue
	// ErrCoatOpen: a coat that does not authenticate (packet.ErrCoatOpen).
	ErrCoatOpen = packet.ErrCoatOpen
	// ErrCoatShort: a coat shorter than its overhead (packet.ErrCoatShort).
	ErrCoatShort = packet.ErrCoatShort
	// ErrWeakKey: a missing or weak session key (packet.ErrWeakKey).
	ErrWeakKey = packet.ErrWeakKey
	// ErrQueueFull: the queue refuses more messages.
	ErrQueueFull = convert.ErrQueueFull
	// ErrTooLarge: an item over MaxItemSize or the plugin's own limit.
	ErrTooLarge = convert.ErrTooLarge
	// ErrInvalid: a malformed request (a wrong key size, a result count
	// that does not match the batch).
	ErrInvalid = convert.ErrInvalid
)

// Result is the outcome of one item of a batch: its bytes, or its error.
// One bad item does not fail the others.
type Result = convert.Result

// Logger returns the logger a plugin should use: hclog writing JSON lines
// to stderr, which the host parses and forwards into its slog logger with
// the plugin's name. Stdout is reserved for the handshake.
func Logger(name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Output:     os.Stderr,
		JSONFormat: true,
		Level:      hclog.Debug,
	})
}

// canceled reports ctx's error, if any: the adapters check it before
// working on a batch whose caller already gave up.
func canceled(ctx context.Context) error { return ctx.Err() }
