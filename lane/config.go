package lane

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/queue"
)

// Defaults used for the zero values of Config fields.
const (
	// DefaultLane is the lane name when Config.Lane is empty (the reference's).
	DefaultLane = "lane"
	// DefaultDir is the socket directory tried first when Config.Dir is
	// empty (the reference's); DefaultAltDir, under the home directory, is
	// used when DefaultDir cannot be used.
	DefaultDir    = "/var/cache/raet"
	DefaultAltDir = "~/.raet/uxd"
	// DefaultReceiveQueue is the capacity of the channel of received messages.
	DefaultReceiveQueue = 256
	// DefaultMaxMessageSize bounds a serialized body, sent or received.
	DefaultMaxMessageSize = 16 << 20
	// DefaultMaxBooks bounds the unfinished books (multi-page messages being
	// reassembled) kept at once.
	DefaultMaxBooks = 128
	// DefaultMaxBookBytes bounds the memory held by unfinished books.
	DefaultMaxBookBytes = 64 << 20
	// DefaultBookTimeout is how long a book may take from its first page to
	// its last.
	DefaultBookTimeout = 10 * time.Second
	// DefaultMaxYards bounds the remote yards the stack remembers.
	DefaultMaxYards = 4096
	// DefaultSendTimeout bounds how long Send retries a busy destination.
	DefaultSendTimeout = 10 * time.Second
	// DefaultLinger bounds how long Close waits for the Sends in progress.
	DefaultLinger = time.Second
	// DefaultRetryQueue bounds the Sends retrying busy destinations at once.
	DefaultRetryQueue = 128
	// DefaultDecodeTimeout bounds one call decoding received bodies of a
	// serializer plugin's kind (the plugin host's default call deadline).
	DefaultDecodeTimeout = 5 * time.Second
)

// Config configures a Stack. The zero value works: every field documents
// its default. A nil *Config is the same as a zero Config.
type Config struct {
	// Dir is the directory of the socket files. Empty means DefaultDir if
	// it exists and is writable or can be created, else DefaultAltDir (the
	// reference's choice). Start creates a missing directory with mode
	// 0700; an existing one is used as it is, unless others can write in
	// it (see AllowSharedDir).
	Dir string
	// AllowSharedDir lets Start use a socket directory that its group or
	// other users can write (mode bits 0o022), with or without the sticky
	// bit. Without it Start refuses such a directory (ErrSharedDir): a
	// yard is known by its socket's path alone, so whoever can create
	// files there can bind a yard's name while that yard is not running
	// (before it starts, between two runs) and receive the pages sent to
	// it, or send as it; without the sticky bit they can also remove a
	// live yard's socket and bind their own in its place. The sticky bit
	// only stops the removal, so it is refused too. Set it only where
	// every user who can write the directory is trusted as much as the
	// yards (the risk is logged at start).
	AllowSharedDir bool
	// Lane is the lane name. Empty means DefaultLane. It may not contain
	// '/', spaces or control characters.
	Lane string
	// Name is the name of this yard. Empty means "lane_" and 18 random hex
	// characters (the reference's default). It may not contain '.', '/',
	// spaces or control characters. The socket is <Dir>/<Lane>.<Name>.uxd.
	Name string
	// PackKind is the serialization of the bodies this stack sends:
	// codec.PackKindJSON (the zero value, compact JSON as the reference
	// writes it), codec.PackKindPack (msgpack), codec.PackKindCBOR (a
	// raet-go extension the reference cannot read), or the pack kind of a
	// serializer plugin (see BodyKindOf), whose packet.Serializer must then
	// be registered (in Serializers) when New is called; set
	// Serializer instead to use a plugin without registering it. Received
	// pages may use any of the three built-in kinds, and the kind of any
	// serializer the stack finds (see Serializer).
	PackKind codec.PackKind
	// Serializer, when set, serializes the bodies this stack sends instead
	// of the built-in serializer of PackKind: a serializer plugin
	// (plugins/host.Serializer) or any packet.Serializer of a body kind a
	// lane can carry (PackKindOf). Pages carry its pack kind, which
	// Config.PackKind then reports; a non-zero PackKind must agree. Nil
	// means the built-in serializer of PackKind.
	//
	// Received bodies of a plugin's kind are decoded by Serializer when it
	// has that kind, else by Serializers.Lookup(kind), so that a
	// registered plugin (host.Serializer.Register) decodes its own kind.
	// They are decoded off the socket reader, in batches of up to 64
	// messages per call when the serializer is a packet.BatchSerializer
	// (as host.Serializer is), each call bounded by
	// DecodeTimeout; messages stay in order, and up to ReceiveQueue more
	// of them wait for the decoder beside the Receive channel. A body that
	// does not decode, or whose kind no serializer decodes, is dropped,
	// counted (DropBadBody, DropNotMapping, DropPackKind) and logged at
	// slog.LevelWarn (at most once a second, with the count since).
	// Bodies of the built-in kinds are decoded as without a Serializer.
	Serializer packet.Serializer
	// Serializers finds the serializer of received bodies of the kinds
	// that are not built in (and of PackKind without a Serializer); nil is
	// the process-wide packet.DefaultRegistry.
	Serializers *packet.Registry
	// DecodeTimeout bounds one call decoding received bodies of a plugin's
	// kind; the bodies of a call that fails are dropped as bad. Zero means
	// DefaultDecodeTimeout. (A plugin run by plugins/host also has the
	// host's call deadline.)
	DecodeTimeout time.Duration
	// Queue, when set, keeps each message from Send until the kernel has
	// taken all its pages: Send puts the serialized body (with the body
	// kind of its pack kind, BodyKindOf) before writing the first page and
	// marks it done after the last. A message whose Send fails after the
	// put stays queued (SendError.Queued). Start sends, in a goroutine
	// that Close stops, the messages the queue holds from an earlier run
	// (a durable queue plugin, plugins/host.Queue, keeps them across a
	// restart), to their yards, oldest first, and marks each done when
	// sent; one that cannot be sent stays queued for the next Start, with
	// the later messages to the same yard, and the failure is logged.
	// Those may arrive after messages sent meanwhile by Send. A Queue is
	// called once per message, never per page. Nil means no queue.
	Queue queue.Queue
	// ReceiveQueue is the capacity of the Receive channel. Zero means
	// DefaultReceiveQueue. When it is full the stack stops reading its
	// socket, and senders see back-pressure; nothing is dropped.
	ReceiveQueue int
	// MaxMessageSize bounds a serialized body in bytes, on send and on
	// receive. Zero means DefaultMaxMessageSize. (The reference refuses
	// bodies over 67107840 bytes.)
	MaxMessageSize int
	// MaxBooks bounds the unfinished books kept at once; when a new book
	// would exceed it the oldest is dropped. Zero means DefaultMaxBooks.
	MaxBooks int
	// MaxBookBytes bounds the bytes held by unfinished books; when a page
	// would exceed it the oldest books are dropped. Zero means
	// DefaultMaxBookBytes.
	MaxBookBytes int
	// BookTimeout is how long a book may take from its first page to its
	// last before it is dropped. Zero means DefaultBookTimeout.
	BookTimeout time.Duration
	// MaxYards bounds the remote yards the stack remembers (made by Send
	// and by pages from new yards); beyond it the least recently used is
	// forgotten, and gets a new session when used again. Zero means
	// DefaultMaxYards.
	MaxYards int
	// SendTimeout bounds how long a Send retries a destination whose socket
	// is full (EAGAIN, ENOBUFS), in addition to the context's deadline.
	// Zero means DefaultSendTimeout.
	SendTimeout time.Duration
	// RetryQueue bounds the Sends that may be retrying busy destinations at
	// once; a further one fails at once with ErrBusy. Zero means
	// DefaultRetryQueue.
	RetryQueue int
	// Linger bounds how long Close lets the Sends in progress finish
	// writing their pages (a book cut short is lost at the receiver).
	// Zero means DefaultLinger; negative: Close cuts them short at once.
	Linger time.Duration
	// Logger receives the stack's logs. Nil means no logging. Nothing is
	// logged per page except at slog.LevelDebug for dropped pages.
	Logger *slog.Logger
	// Tap, when set, sees every page the stack sends and receives, for
	// example to write a capture with package dissect (see TapPacket). A
	// page sent is tapped once the kernel has taken it, from the goroutine
	// calling Send, with the time its sending began (so that its answer,
	// which another goroutine may tap first, never has an earlier time); a
	// page received is tapped as it is read, before it is
	// checked (dropped pages too), from the reader goroutine. Calls may be
	// concurrent. Tap must not keep Data after it returns, and should be
	// quick: it holds up the Send or the reading. Nil means no tap, at no
	// cost (no allocation, no clock read).
	Tap func(TapPacket)
}

// populate returns a copy of cfg with the defaults filled in, or an error
// wrapping ErrInvalidConfig or ErrBadName.
func populate(cfg *Config) (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Lane == "" {
		c.Lane = DefaultLane
	}
	if err := checkLaneName(c.Lane); err != nil {
		return c, fmt.Errorf("raet: lane config: Lane %q: %w", c.Lane, err)
	}
	if c.Name == "" {
		c.Name = "lane_" + newSessionID()
	}
	if err := checkYardName(c.Name); err != nil {
		return c, fmt.Errorf("raet: lane config: Name %q: %w", c.Name, err)
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"ReceiveQueue", &c.ReceiveQueue, DefaultReceiveQueue},
		{"MaxMessageSize", &c.MaxMessageSize, DefaultMaxMessageSize},
		{"MaxBooks", &c.MaxBooks, DefaultMaxBooks},
		{"MaxBookBytes", &c.MaxBookBytes, DefaultMaxBookBytes},
		{"MaxYards", &c.MaxYards, DefaultMaxYards},
		{"RetryQueue", &c.RetryQueue, DefaultRetryQueue},
	}
	for _, f := range ints {
		switch {
		case *f.v < 0:
			return c, fmt.Errorf("%w: %s is negative (%d)", ErrInvalidConfig, f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	durs := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"BookTimeout", &c.BookTimeout, DefaultBookTimeout},
		{"SendTimeout", &c.SendTimeout, DefaultSendTimeout},
		{"DecodeTimeout", &c.DecodeTimeout, DefaultDecodeTimeout},
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	c.Linger = max(c.Linger, 0)
	for _, f := range durs {
		switch {
		case *f.v < 0:
			return c, fmt.Errorf("%w: %s is negative (%v)", ErrInvalidConfig, f.name, *f.v)
		case *f.v == 0:
			*f.v = f.def
		}
	}
	if c.Dir == "" {
		c.Dir = defaultDir()
	}
	dir, err := expandHome(c.Dir)
	if err != nil {
		return c, fmt.Errorf("%w: Dir %q: %w", ErrInvalidConfig, c.Dir, err)
	}
	if c.Dir, err = filepath.Abs(dir); err != nil {
		return c, fmt.Errorf("%w: Dir %q: %w", ErrInvalidConfig, dir, err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// sendSerializer returns the serializer of the bodies c sends, and sets
// c.PackKind to its pack kind; errors wrap ErrInvalidConfig.
func sendSerializer(c *Config) (packet.Serializer, error) {
	if ser := c.Serializer; ser != nil {
		pk, ok := PackKindOf(ser.Kind())
		if !ok {
			return nil, fmt.Errorf("%w: Serializer of body kind %v, which a lane cannot carry", ErrInvalidConfig, ser.Kind())
		}
		if c.PackKind != 0 && c.PackKind != pk {
			return nil, fmt.Errorf("%w: PackKind %v, Serializer of pack kind %v", ErrInvalidConfig, c.PackKind, pk)
		}
		c.PackKind = pk
		return ser, nil
	}
	if ser := serializer(c.PackKind); ser != nil {
		return ser, nil
	}
	bk, ok := BodyKindOf(c.PackKind)
	if !ok {
		return nil, fmt.Errorf("%w: PackKind %v", ErrInvalidConfig, c.PackKind)
	}
	ser, err := c.Serializers.Lookup(bk)
	if err != nil {
		return nil, fmt.Errorf("%w: PackKind %v: %w", ErrInvalidConfig, c.PackKind, err)
	}
	return ser, nil
}

// defaultDir picks DefaultDir when it is usable, else DefaultAltDir. It
// only looks; Start creates the directory.
func defaultDir() string {
	if fi, err := os.Stat(DefaultDir); err == nil {
		if fi.IsDir() && writable(DefaultDir) {
			return DefaultDir
		}
	} else if os.IsNotExist(err) && writable(filepath.Dir(DefaultDir)) {
		return DefaultDir
	}
	return DefaultAltDir
}

func expandHome(p string) (string, error) {
	if p != "~" && (len(p) < 2 || p[:2] != "~/") {
		return p, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, p[1:]), nil
}
