// Package road is RAET's road: reliable, signed and encrypted messages
// between estates over UDP, wire-compatible with the Python reference
// (raet 0.6.9, RoadStack).
//
// An estate is a Stack: a name, long-term keys (Ed25519 to sign, Curve25519
// for boxes), one UDP socket for both directions, and the remotes it knows.
// A main estate (Config.Main) is the road's hub: the only kind that accepts
// joins from estates it does not know yet. Between two estates:
//
//	join   names, long-term keys and uids are exchanged; the main applies
//	       its key acceptance policy (Config.Auto): accepted, or pending
//	       until an operator decides (raet keys accept), or rejected
//	allow  a CurveCP-style handshake makes the session's short-term keys
//	       (and, between raet-go estates, settles the fast profile)
//	alive  presence: a remote silent for a period is asked (see Presence)
//	message  one Send: segmented, sent in bursts, acked, resent where
//	       lost, and done when the receiver has it all; between raet-go
//	       estates the small messages of Sends made at one moment share
//	       datagrams (bundles) and their dones come back together, each
//	       message still acked, resent and done on its own (Config.NoBundling)
//
// Join(ctx, addr) runs join and allow and returns when the session is up;
// Send(ctx, name, body) returns when the remote says done; Go(ctx, name,
// body, done) returns once the message is queued and reports its outcome
// on done, so one goroutine keeps many messages in flight. A body is a
// mapping, serialized with Config.BodyKind, or bytes ([]byte or string),
// sent as they are (body kind raw) and received in Message.Raw. Receive()
// delivers what remotes send; Events() reports what happens to remotes
// (joined, pending, allowed, alive, dead, reaped, rejected, removed), with a
// Reason where there is one.
//
// # Profiles
//
// Between raet-go estates the allow settles the fast profile: binary heads,
// packets of up to Config.FastMaxPacketSize, and an AEAD coat (AES-256-GCM,
// or ChaCha20-Poly1305 where the CPU lacks AES instructions) that encrypts
// and authenticates every packet after the allow, keyed per direction from
// the session's short-term keys, with a replay window (docs/aead.md);
// Config.AEAD = AEADRefuse keeps the NaCl coat with a MAC foot instead. A
// reference estate, or Config.Profile = ProfileReference, gets the
// reference profile: native heads, the NaCl coat, Ed25519 on every packet.
//
// # Presence
//
// Any signed packet from a remote that is no replay says it is there: an
// alive goes only after a period of silence, never while traffic flows.
// Of two estates one drives presence and the other answers: the estate
// that is not main (of two mains or two others, the one whose name sorts
// first) sends an alive after each period of silence; the other sends none
// while those come, and asks only after a silence of the period and
// AliveTimeout. So a pair makes at most one alive exchange (2 packets) per
// period. The reference keeps its own timer (its period, 1 s by default)
// whichever end it is, and nothing on the wire tells it ours; toward it a
// raet-go estate keeps its own period (below), so a main with 10000
// reference remotes asks each at most once per 50 s of silence (plus
// AliveTimeout) and answers whatever they send. For a big fleet of
// reference-profile remotes set their AlivePeriod to about what the
// main's period would be (remotes/AliveRate seconds): a main answers
// every alive they send, AliveRate a second then, 10000 a second with
// their default 1 s (road.PresencePeriod tells the period). A stack whose
// readers cannot keep up (a full batch in one read) sheds presence first:
// the alive requests of that batch go unchecked and unanswered (drop
// reason presence_shed), so that joins, allows and messages keep their
// share; their senders ask again, and other traffic counts as alive.
//
// Between two raet-go estates the period also adapts: the answering end
// tells its period in each ack, the pair uses the larger of the two
// estates' periods, and an estate's period grows with its remotes,
// max(AlivePeriod, remotes/AliveRate seconds) in whole AlivePeriods. So a
// main's presence costs about AliveRate exchanges (default 200, 400
// packets) a second whatever the number of its raet-go remotes: with 1000
// remotes the period is 5 s (0.4 packets per remote per second), with
// 10000, 50 s (0.04).
//
// A main restarted from its keep has no session with its kept remotes: it
// spreads their first presence over a period and then mends the sessions
// (an allow, or a join where the keys need one) once per its period, so at
// most about AliveRate a second however many remotes it kept, while its
// remotes, which drive presence, allow again from their end.
//
// Detection: a remote is found dead (EventDead) within period +
// AliveTimeout of its last packet by the end that drives, within period +
// 2·AliveTimeout by the end that answers: with the defaults (1 s, 2 s) 3 s
// and 5 s; for a main with 10000 raet-go remotes, 52 s and 54 s. A main
// reaps a remote Interim after it found it dead (EventReaped, 1 h), and
// none sooner than that detection time however short Interim is, so a
// remote between its alives stays; it forgets a reaped remote
// (EventForgotten, ReasonSilent) still silent ForgetAfter later
// (24 h); beyond MaxRemotes (65536) the longest silent remote is forgotten
// (ReasonTooMany). A forgotten remote leaves the stack's memory, all of
// it, but not its keep: when it comes back, naming the uid it was given,
// it is found by that uid in the keep (its uid index, keep.LoadRemoteUID;
// with no KeepDir, in the stack's memory store), loaded and allows again.
// A main whose remotes all left and were forgotten holds what it held
// before they came.
//
// # When a join fails
//
// The joiner's error holds a *JoinError (see ReasonOf) naming the reason
// (a name taken by other keys, an address changed on an immutable road,
// keys waiting for an operator and whose, an unknown body kind, no answer
// from the address after so many tries, ...) and what resolves it; the
// estate that refused logs the same at slog.LevelInfo with the command
// that resolves it, and both report it in their events. Between raet-go
// estates the reject carries the reason; with the reference the joiner
// infers it. A rejection never makes either side forget the other, so an
// estate that joined from another address by mistake joins again from its
// own.
//
// # Keys and the keep
//
// With Config.KeepDir the estate's keys, its remotes and their keys'
// acceptance are kept on disk in the reference's layout (package keep), and
// a restarted estate rejoins its remotes; the keep is locked while the
// stack runs. Without it everything is in memory and the keys are new at
// every start. The keys of a main an estate joins are trusted on first use
// (see Config.Auto). The keep is written behind the protocol's goroutine
// (keep.Writer: batches, one sync for many files), and what depends on a
// write, such as the answer that accepts a join, goes out only once the
// write is durable; joins that find the writes backed up wait (see
// Config.KeepQueue). An operator's raet keys accept or reject takes effect
// while the stack runs: the stack reads a role's file again for the joins
// that wait for the operator, for a role it holds pending or rejected, and
// at each allow.
//
// # Goroutines
//
// Start starts these, and Close stops and joins every one:
//
//	owner    1 (owner.go): holds all protocol state (the core,
//	         road/internal/core: no I/O, no clock) and is the only one to
//	         call it; the calls (Join, Send, Remotes, ...) reach it through
//	         channels. It writes a small flush itself, or one segmented
//	         message's run, when nothing in it waits to be signed and the
//	         writer has nothing left.
//	readers  one per GOMAXPROCS, up to 4 (reader.go): read the socket in
//	         turns round a ring (recvmmsg on Linux, up to 32 datagrams),
//	         parse and check the Ed25519 signatures off the owner, and hand
//	         the datagrams on in the order read; while traffic is light one
//	         reader keeps both turns and reads alone.
//	writer   1 (writer.go): signs the Ed25519 feet the owner left and
//	         writes the owner's flushes (sendmmsg, and UDP GSO for runs to
//	         one peer where Linux has it; Config.NoOffload).
//	decoder  1 (batch.go): decodes in batches the received bodies of a
//	         packet.BatchSerializer's kind (the owner decodes the others).
//	encoder  1 with a packet.BatchSerializer (batch.go): serializes the
//	         bodies of Go and Send in batches.
//	queue    1 with Config.Queue (queue.go): tells the Queue which
//	         messages are done; and, while the messages it held at Start
//	         are sent again, 2 more (resendPending and its watch on Close).
//	keep     1 with Config.KeepDir (keep.Writer): writes the keep behind
//	         the owner and reports what is durable.
//
// Besides, short-lived: a host-name lookup per address not known yet
// (fqdn.go, at most one per address and bounded in time), and one that
// stops the stack when its socket fails for good.
//
// # Stopping
//
// Close (or Shutdown with a deadline of your own) first writes what is
// queued, such as the done of every message delivered, so no peer is left
// resending, then stops every goroutine; it also waits, as long as it
// lingers, for the keep's writes, and sends what they held back. A socket
// that fails for good stops the stack too: Done is closed, and Err says
// why (and, after Close, whether a keep write failed).
package road
