package core

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// Config is what the core needs of a road.Config: each field is the field
// of road.Config of the same name, documented there, with the same zero
// value. Populate fills in the defaults.
type Config struct {
	Name, Role string
	Kind       uint8
	Main       bool
	Mutable    bool
	// Auto is the keep's acceptance policy, KeepDir the keep's directory
	// (named in the hints for an operator; empty: in memory).
	Auto    keep.AutoMode
	KeepDir string

	HeadKind          codec.HeadKind
	BodyKind          codec.BodyKind
	MaxPacketSize     int
	Profile           Profile
	AEAD              AEADMode
	FastMaxPacketSize int
	NoBundling        bool
	BurstSize         int

	JoinTimeout    time.Duration
	JoinentTimeout time.Duration
	PendTimeout    time.Duration
	AllowTimeout   time.Duration
	AliveTimeout   time.Duration
	AlivePeriod    time.Duration
	AliveOffset    time.Duration
	Interim        time.Duration
	MessageTimeout time.Duration
	AliveRate      int
	ForgetAfter    time.Duration
	MaxRemotes     int

	ReceiveQueue int
	Reassembly   packet.ReassemblyConfig
	KeepQueue    int
	// StrangerJoinRate and StrangerJoins bound the joins of estates not
	// known yet (see budgets.go).
	StrangerJoinRate float64
	StrangerJoins    int

	KeyLog io.Writer
	// FQDN gives the name the reference's socket.getfqdn gives an address
	// (its host's fully qualified domain name), which an allower sends in
	// its initiate; it must not block ("" while not known). Nil: none.
	FQDN        func(netip.Addr) string
	Logger      *slog.Logger
	Coat        CoatMaker
	Serializers *packet.Registry

	// DecodeLater leaves the bodies of a packet.BatchSerializer's kind to a
	// decoder off the owner goroutine (Decodes) instead of decoding them in
	// Receive.
	DecodeLater bool

	// SignLater leaves the Ed25519 feet of the datagrams the core does not
	// keep (every message segment, ack, resend, done and nack) unsigned in
	// Out, for the caller to sign off the owner goroutine with
	// Datagram.Sign before it sends them. Join, allow and alive packets,
	// which the core keeps to send again unchanged, are signed at once.
	SignLater bool
}

// Populate fills in every default and checks the values; it is the one
// home of the road's protocol defaults.
func (c *Config) Populate() error {
	c.defaults()
	return c.check()
}

// defaults fills in every field left zero (or, for the queues and stranger
// bounds, below one).
func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.JoinTimeout, 5*time.Second)
	def(&c.JoinentTimeout, 5*time.Second)
	def(&c.PendTimeout, 10*time.Minute)
	def(&c.AllowTimeout, 4*time.Second)
	def(&c.AliveTimeout, 2*time.Second)
	def(&c.AlivePeriod, DefaultAlivePeriod)
	def(&c.AliveOffset, 500*time.Millisecond)
	def(&c.Interim, time.Hour)
	def(&c.MessageTimeout, time.Minute)
	def(&c.ForgetAfter, 24*time.Hour)
	if c.AliveRate == 0 {
		c.AliveRate = DefaultAliveRate
	}
	if c.MaxRemotes == 0 {
		c.MaxRemotes = DefaultMaxRemotes
	}
	if c.MaxPacketSize == 0 {
		c.MaxPacketSize = codec.MaxPacketSize
	}
	if c.FastMaxPacketSize == 0 {
		c.FastMaxPacketSize = 1400
	}
	if c.BodyKind == codec.BodyKindNada {
		c.BodyKind = codec.BodyKindJSON
	}
	if c.BurstSize == 0 {
		c.BurstSize = 64
	}
	if c.ReceiveQueue <= 0 {
		c.ReceiveQueue = 1024
	}
	if c.KeepQueue <= 0 {
		c.KeepQueue = DefaultKeepQueue
	}
	if c.StrangerJoinRate <= 0 {
		c.StrangerJoinRate = DefaultStrangerJoinRate
	}
	if c.StrangerJoins <= 0 {
		c.StrangerJoins = DefaultStrangerJoins
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// check refuses the values the core cannot work with.
func (c *Config) check() error {
	if _, err := codec.Lookup(c.HeadKind); err != nil {
		return fmt.Errorf("raet: config: head kind %v: %w", c.HeadKind, err)
	}
	switch c.BodyKind {
	case codec.BodyKindJSON, codec.BodyKindMsgpack, codec.BodyKindCBOR:
	default:
		return fmt.Errorf("raet: config: body kind %v cannot carry mappings", c.BodyKind)
	}
	if c.AEAD > AEADRefuse {
		return fmt.Errorf("raet: config: unknown AEAD mode %d", c.AEAD)
	}
	if c.MaxPacketSize < 256 || c.MaxPacketSize > 65507 {
		return fmt.Errorf("raet: config: MaxPacketSize %d is not within 256..65507", c.MaxPacketSize)
	}
	if c.FastMaxPacketSize < 256 || c.FastMaxPacketSize > 65507 {
		return fmt.Errorf("raet: config: FastMaxPacketSize %d is not within 256..65507", c.FastMaxPacketSize)
	}
	return nil
}

// The defaults of Config.AlivePeriod, AliveRate and MaxRemotes.
const (
	DefaultAlivePeriod = time.Second
	DefaultAliveRate   = 200
	DefaultMaxRemotes  = 1 << 16
)

// The defaults of Config.KeepQueue, StrangerJoinRate and StrangerJoins.
const (
	DefaultKeepQueue        = 1024
	DefaultStrangerJoinRate = 1000
	DefaultStrangerJoins    = 256
)

// CoatMaker makes the coat of one session from its short-term keys: how a
// coat plugin joins the stack.
type CoatMaker interface {
	Kind() codec.CoatKind
	Session(ourShortPriv, theirShortPub *[32]byte) (packet.Coat, error)
}

// PresencePeriod is the presence period of an estate of the populated
// config c with that many remotes: max(AlivePeriod, remotes/AliveRate
// seconds) in whole AlivePeriods, at most an hour; AlivePeriod itself when
// it is not positive (no presence) or AliveRate is negative.
func (c *Config) PresencePeriod(remotes int) time.Duration {
	p := c.AlivePeriod
	if p <= 0 {
		return p
	}
	if c.AliveRate > 0 {
		need := time.Duration(remotes) * time.Second / time.Duration(c.AliveRate)
		if need > p {
			p *= (need + p - 1) / p
		}
	}
	return min(p, maxAlivePeriod)
}
