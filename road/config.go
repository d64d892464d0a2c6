package road

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/protocol"
	"github.com/raet-go/raet/queue"
	"github.com/raet-go/raet/road/internal/core"
)

// DefaultPort is RAET's road port (RAET_PORT of the reference), from the
// specification (package protocol).
const DefaultPort = protocol.DefaultPort

// Config configures a Stack. Its zero value works: an estate with a random
// name listening on port 7530, with the reference's timers, 1024-byte
// packets, native heads and JSON bodies, keys kept in memory only. A nil
// *Config is the zero value.
type Config struct {
	// Name is the estate's name, unique on the road. Default: the name in
	// the keep, else "estate_" and a random hex string.
	Name string
	// Role selects the key record; several estates may share one. Default:
	// the name.
	Role string
	// Kind is the application kind, 0..255, sent in join bodies.
	Kind uint8
	// Main marks the road's hub: only a main estate accepts vacuous joins
	// (joins from estates it does not know yet).
	Main bool
	// Mutable lets a remote rejoin with a changed name, address, keys, role,
	// kind or main flag, and lets a renew start a fresh join. Default false,
	// as in the reference: such a rejoin is rejected (ReasonAddressChanged,
	// ReasonNameTaken, ReasonIdentityChanged, logged with what resolves
	// it) and a renew fails with ErrRenewImmutable. The rejected estate is
	// not forgotten on either side: joining again as before works.
	Mutable bool

	// Listen is the UDP address to listen and send on, "host:port". Default
	// ":7530". One socket serves both directions, as the reference needs.
	Listen string
	// PacketConn, when set, is used instead of listening on Listen (tests
	// use in-memory or impaired connections). The stack closes it on Close.
	PacketConn net.PacketConn
	// NoOffload turns off UDP segmentation offload, which the stack uses
	// on Linux where the kernel has it: a run of equal-sized datagrams to
	// one peer (a segmented message's) goes to the kernel as one
	// (UDP_SEGMENT), and datagrams from one sender may come up together
	// (UDP_GRO). The datagrams on the wire are the same either way, but a
	// capture on the sending host (tcpdump or raetdump on lo) sees such a
	// run as one large packet; set NoOffload to see each datagram.
	NoOffload bool

	// KeepDir is the directory of the reference-compatible keep (estate and
	// role files). Empty: nothing is persisted and new keys are made at
	// every start.
	KeepDir string
	// Auto is the key acceptance policy for the keys of estates that join
	// us: keep.AutoNever (the default, as in the reference: new keys wait
	// for an operator, who runs raet keys accept), keep.AutoOnce (accept a
	// new role's keys, refuse changed ones) or keep.AutoAlways.
	//
	// The keys of an estate we join (Join) are trusted on first use, as
	// ssh trusts a host: under AutoNever and AutoOnce they are accepted the
	// first time and kept, and a later join to an estate of that role with
	// other keys fails with ReasonMainKeysChanged (an operator who knows
	// the keys changed for good runs raet keys forget); an operator's
	// rejection stays (ReasonKeysRejected). AutoAlways accepts them always.
	// So a new estate joins a main with no operator on its side, and the
	// main's operator decides.
	Auto keep.AutoMode
	// KeepQueue bounds the keep's writes not yet durable: the stack writes
	// the keep behind the goroutine that runs the protocol (keep.Writer: in
	// batches, one sync for many files), and holds back what depends on a
	// write (the answer that accepts a join, the ack of a join, the allow
	// after it) until the write is durable. A join that finds KeepQueue
	// writes waiting (half as many, for an estate we do not know yet) is
	// answered with a pend that says keep-busy (ReasonKeepBusy, counted in
	// Counters.Drops["keep_busy"]), and the joiner asks again a second
	// later. 0 means 1024.
	KeepQueue int
	// StrangerJoinRate bounds the join requests of estates we do not know
	// yet (strangers: unauthenticated, and they write the keep) that we
	// serve a second, in all, with bursts of as many; 0 means 1000. Each
	// source address also has its own budget (2 a second, bursts of 5),
	// and a known remote its own (10 a second). StrangerJoins bounds the
	// strangers' joins under way (accepted, not yet acknowledged); 0 means
	// 256. So a fleet of new estates joins as fast as this estate completes
	// their joins, and a flood of spoofed joins that never complete costs at
	// most StrangerJoins remotes per JoinentTimeout (docs/security.md). The
	// joins beyond are dropped unanswered (Counters.Drops["join_budget"])
	// and the joiners ask again.
	StrangerJoinRate float64
	StrangerJoins    int

	// HeadKind is the head kind we send (replies too); received heads of
	// every kind are understood. Default codec.HeadKindRaet.
	HeadKind codec.HeadKind
	// BodyKind serializes message and control bodies: codec.BodyKindJSON
	// (default), BodyKindMsgpack or BodyKindCBOR (the last only for raet-go
	// peers). These are mapping kinds: codec.BodyKindRaw is refused here,
	// since control bodies are mappings; a message body given to Send or
	// Go as a []byte or string is sent raw whatever BodyKind is (see Go).
	// Received messages of every kind we can read are taken, whatever
	// BodyKind is.
	BodyKind codec.BodyKind
	// MaxPacketSize is the largest datagram we send; larger messages are
	// segmented. Default 1024 (the reference's; it cannot read datagrams
	// over 2048 bytes).
	MaxPacketSize int
	// Profile selects what we offer raet-go peers: ProfileAuto (the
	// default) negotiates binary heads, an AEAD coat (or the MAC foot, see
	// AEAD) and FastMaxPacketSize with peers that offer them too;
	// ProfileReference offers nothing.
	Profile Profile
	// AEAD says whether the fast profile offers the AEAD coats
	// (AES-256-GCM where the CPU has AES instructions, else
	// ChaCha20-Poly1305; docs/aead.md). AEADPrefer (the default) seals a
	// session's packets with one when the peer offers one too, with no
	// foot; AEADRefuse offers none, so fast-profile sessions keep the NaCl
	// coat and the MAC foot. A coat plugin both ends offer (Coat) comes
	// first. The reference profile never uses either.
	AEAD AEADMode
	// FastMaxPacketSize is the largest datagram offered to raet-go peers:
	// 0 means 1400 (safe for the path MTU of real networks); loopback can
	// take far more.
	FastMaxPacketSize int
	// NoBundling stops us offering raet-go peers bundles: by default,
	// between two fast-profile estates, the small messages queued for a
	// remote at one moment go out several to a datagram, and the dones of
	// many messages in one (each message is still its own transaction).
	NoBundling bool
	// BurstSize is how many segments of a message go out before waiting
	// for an ack; 0 means 64. Negative sends all at once, the reference's
	// default, which overruns socket buffers with large messages.
	BurstSize int

	// Timers. Zero means the default given; a negative value means never
	// where that makes sense.
	JoinTimeout    time.Duration // a join we start: 5s
	JoinentTimeout time.Duration // a join we answer: 5s
	PendTimeout    time.Duration // how long a pended join waits for an operator: 10m (the reference: 5s)
	AllowTimeout   time.Duration // 4s
	AliveTimeout   time.Duration // an alive we start; then the remote is dead: 2s
	AlivePeriod    time.Duration // presence: an alive after this long of silence from a remote: 1s; negative: no presence
	AliveOffset    time.Duration // added to the first period of a non-main estate: 0.5s
	// Interim: a main estate reaps a remote this long after presence
	// found it dead, or silent this long: 1h; negative: never. It reaps
	// none silent for less than presence takes to find it dead (its
	// period with the remote, which grows with its remotes, see AliveRate,
	// plus twice AliveTimeout), so that a remote between its alives is not
	// reaped however short Interim is.
	Interim        time.Duration
	MessageTimeout time.Duration // a message not done by then fails with ErrTimeout: 1m; negative: never (the reference)
	// AliveRate bounds the presence of a stack with many remotes: its
	// period is max(AlivePeriod, remotes/AliveRate seconds), in whole
	// AlivePeriods, so that raet-go remotes make about AliveRate alive
	// exchanges a second in all, and the stack asks reference remotes
	// (which keep their own timer) at most about AliveRate alives a second
	// (see Presence in the package doc). 0 means 200; negative:
	// AlivePeriod however many remotes.
	AliveRate int
	// ForgetAfter is how long a remote a main estate reaped (silent for
	// Interim) stays in memory before it is forgotten (EventForgotten,
	// ReasonSilent): 24h; negative: never. Its keep files stay, and it
	// rejoins from them when it comes back.
	ForgetAfter time.Duration
	// MaxRemotes bounds the remotes held in memory: beyond it the longest
	// silent is forgotten (EventForgotten, ReasonTooMany), as ForgetAfter
	// forgets. 0 means 65536; negative: no bound.
	MaxRemotes int
	// StaleTimeout is ignored: a remote's finished transaction ids are
	// remembered for as long as its session lives (a replay window), not
	// for a time after which a replay would be taken again.
	//
	// Deprecated: nothing to set.
	StaleTimeout time.Duration
	// Linger bounds how long Close waits to write what is queued (the done
	// of every message delivered, acks): 1s; negative: not at all.
	Linger time.Duration

	// SendQueue bounds the messages sent (Send, Go) whose outcome is not
	// handed over yet; 0 means 1024. When it is full Send and Go block
	// until there is room or their ctx ends, or fail at once with
	// ErrQueueFull when FailFast is set.
	SendQueue int
	FailFast  bool
	// ReceiveQueue bounds delivered messages not yet read from Receive:
	// those waiting in the stack for room in the Receive channel, which
	// holds up to 128 more (or ReceiveQueue, when smaller); 0 means 1024.
	// While it is full, completed messages are held (and not acknowledged)
	// instead of dropped, so senders slow down; as Receive is read they are
	// delivered into the room it frees at once, in the order they
	// completed, counted once each as "receive_queue_full". One held past
	// MessageTimeout from its last new packet (10 minutes at most) is
	// refused: its sender's Send fails with ErrRejected. At most as many
	// as the queue holds (64 at least) wait so, and a quarter of them (16
	// at least) from one remote; what comes beyond is dropped unanswered
	// ("receive_waits_full") and its sender sends it again.
	ReceiveQueue int
	// Reassembly bounds unfinished segmented messages, per remote and in
	// all (defaults: 64 MiB per message as the reference; per remote 32
	// messages and room for one message of the largest size; 65536
	// messages and 256 MiB in all). Drops for want of room are counted as
	// "reassembly_remote_full" (the remote's own quota), "reassembly_full"
	// (the total, while the remote holds the most) and "reassembly_evicted"
	// (a heavier remote's message made room for a lighter one's). An
	// unfinished message waits MessageTimeout for a new segment (repeats
	// do not count) and 10 minutes in all. A sender takes its own room per
	// remote for its peers': its Sends to one remote keep at most
	// MaxPerRemote segmented messages under way, charged within
	// MaxBufferedPerRemote (one always goes), and none more than 4096
	// transaction ids after the oldest under way; the others wait in order
	// (their MessageTimeout running) and start as earlier ones end.
	Reassembly packet.ReassemblyConfig

	// KeyLog, when set, receives one line per short-term key pair made by
	// an allow: "RAET_SESSION <our short public hex> <our short private hex>
	// <their short public hex>", so that captures can be decrypted later
	// (raetdump -keylog). KeyLogFile names a file to append to instead
	// (created 0600); the environment variable RAET_KEYLOGFILE is used when
	// both are unset.
	KeyLog     io.Writer
	KeyLogFile string

	// Logger receives the stack's logs; nil is silent. Nothing is logged
	// per packet.
	Logger *slog.Logger

	// Serializer, when set, serializes the messages we send instead of the
	// built-in serializer of BodyKind: a plugin, or an extension that
	// receivers find by its kind in their Serializers.
	Serializer packet.Serializer
	// Serializers finds the serializer of each message body kind received
	// (the built-in kinds, and plugins registered with it); nil is the
	// process-wide packet.DefaultRegistry. Control bodies (join, resend)
	// are decoded by the built-in serializers only.
	Serializers *packet.Registry
	// Coat, when set, offers another coat kind (a coat plugin) to raet-go
	// peers; a session whose two ends both offer it uses it instead of the
	// NaCl coat (see Profile). The reference never gets it.
	Coat CoatMaker
	// Queue, when set, holds every message from Send until its remote says
	// done; a durable queue (a plugin) keeps them across a crash, and Start
	// sends the messages it finds pending once their remotes are allowed.
	// Nil keeps messages in memory only.
	Queue Queue

	// Tap, when set, sees every datagram the stack sends and receives (for
	// example a pcapng writer from package dissect). It is called from the
	// socket goroutines and must not keep Data after it returns.
	Tap func(TapPacket)
}

// CoatMaker makes the coat of one session from its short-term keys: how a
// coat plugin joins the stack.
type CoatMaker = core.CoatMaker

// Queue holds messages until their remote has them (see package queue).
type Queue = queue.Queue

// QueuedMessage is a message a Queue holds.
type QueuedMessage = queue.Message

// TapPacket is one datagram seen by Config.Tap.
type TapPacket struct {
	Out    bool // sent by us
	Local  netip.AddrPort
	Remote netip.AddrPort
	Time   time.Time
	Data   []byte
}

// PresencePeriod is the presence period a stack of config c (nil: the
// defaults) takes with that many remotes: max(AlivePeriod,
// remotes/AliveRate seconds) in whole AlivePeriods, at most an hour;
// negative (no presence) when c.AlivePeriod is. Its raet-go remotes learn
// it from the stack; remotes of ProfileReference (and the reference) keep
// their own AlivePeriod, which for a big main their operator sets to about
// this, so that the main answers about AliveRate alives a second (see
// Presence in the package doc).
func PresencePeriod(c *Config, remotes int) time.Duration {
	cc := core.Config{}
	if c != nil {
		cc.AlivePeriod, cc.AliveRate = c.AlivePeriod, c.AliveRate
	}
	if cc.AlivePeriod == 0 {
		cc.AlivePeriod = core.DefaultAlivePeriod
	}
	if cc.AliveRate == 0 {
		cc.AliveRate = core.DefaultAliveRate
	}
	return cc.PresencePeriod(remotes)
}

// populate returns a copy of cfg with every default filled in, and the
// core's configuration from it (core.Config.Populate has the protocol's
// defaults).
func populate(cfg *Config) (*Config, *core.Config, error) {
	c := Config{}
	if cfg != nil {
		c = *cfg
	}
	if c.Linger == 0 {
		c.Linger = time.Second
	}
	c.Linger = max(c.Linger, 0)
	if c.Listen == "" {
		c.Listen = fmt.Sprintf(":%d", DefaultPort)
	}
	if c.SendQueue <= 0 {
		c.SendQueue = 1024
	}
	if !c.Auto.Valid() {
		return nil, nil, fmt.Errorf("raet: config: unknown auto mode %v", c.Auto)
	}
	cc := &core.Config{
		Name: c.Name, Role: c.Role, Kind: c.Kind, Main: c.Main, Mutable: c.Mutable, Auto: c.Auto, KeepDir: c.KeepDir,
		HeadKind: c.HeadKind, BodyKind: c.BodyKind, MaxPacketSize: c.MaxPacketSize, Profile: c.Profile,
		AEAD: c.AEAD, FastMaxPacketSize: c.FastMaxPacketSize, NoBundling: c.NoBundling, BurstSize: c.BurstSize,
		JoinTimeout: c.JoinTimeout, JoinentTimeout: c.JoinentTimeout, PendTimeout: c.PendTimeout,
		AllowTimeout: c.AllowTimeout, AliveTimeout: c.AliveTimeout, AlivePeriod: c.AlivePeriod,
		AliveOffset: c.AliveOffset, Interim: c.Interim, MessageTimeout: c.MessageTimeout,
		AliveRate: c.AliveRate, ForgetAfter: c.ForgetAfter, MaxRemotes: c.MaxRemotes,
		ReceiveQueue: c.ReceiveQueue, Reassembly: c.Reassembly, KeepQueue: c.KeepQueue,
		StrangerJoinRate: c.StrangerJoinRate, StrangerJoins: c.StrangerJoins, KeyLog: c.KeyLog, Logger: c.Logger, Coat: c.Coat,
		Serializers: c.Serializers,
		DecodeLater: true, SignLater: true,
	}
	if err := cc.Populate(); err != nil {
		return nil, nil, err
	}
	c.ReceiveQueue, c.Logger, c.KeepQueue = cc.ReceiveQueue, cc.Logger, cc.KeepQueue // the shell's too
	return &c, cc, nil
}
