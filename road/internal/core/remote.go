package core

import (
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

func (r *remote) orderLinks() *links[*remote] { return &r.heardLinks }

// coatKind is the coat kind of the session: NaCl unless another was
// negotiated.
func (r *remote) coatKind() codec.CoatKind {
	if a := r.aead(); a != nil {
		return a.Kind()
	}
	if r.coat != nil {
		return r.coat.Kind()
	}
	return codec.CoatKindNaCl
}

// aead is the session's AEAD coat; nil when it has none (aead.go).
func (r *remote) aead() *packet.AEADCoat {
	if r.prof == nil {
		return nil
	}
	return r.prof.aead
}

// save holds m in r.saved, to start later (startHeld).
func (r *remote) save(m *messenger) {
	r.saved = append(r.saved, m)
	r.savedDue = expiry(earliest(time.Time(r.savedDue), time.Time(m.timeout)))
}

// dropSaved empties r.saved, whose messages have been ended.
func (r *remote) dropSaved() { r.saved, r.savedDue = nil, expiry{} }

func (r *remote) nextTid() uint32 {
	r.tid++
	if r.tid == 0 {
		r.tid = 1
	}
	return r.tid
}

func (r *remote) nextSid() { r.sid = sidAfter(r.sid) }

// sidAfter is the session after sid: 0xffffffff rolls over to 1 (§9.2).
func sidAfter(sid uint32) uint32 {
	if sid++; sid == 0 {
		sid = 1
	}
	return sid
}

// validSid reports whether session new is not older than old (§9.2).
func validSid(new, old uint32) bool {
	if new == 0 || old == 0 {
		return true
	}
	return new-old < 1<<31
}

func (r *remote) inProcess(k codec.TransactionKind) []txn {
	var out []txn
	for t := range r.eachTxn {
		if t.kind() == k {
			out = append(out, t)
		}
	}
	return out
}

// estate is the remote as the keep writes it.
func (r *remote) estate() keep.RemoteEstate {
	joined := r.joined
	sid := r.sid
	if r.keptSid != sid && validSid(r.keptSid, sid) && r.keptSid != 0 {
		sid = r.keptSid // reserved ahead of the session in use
	}
	return keep.RemoteEstate{
		Name: r.name, UID: r.nuid, FUID: r.fuid,
		HA:   keep.HostPort{Host: r.ha.Addr().String(), Port: r.ha.Port()},
		FQDN: r.fqdn, SID: sid, Main: r.main, Kind: r.kind, Joined: &joined, Role: r.role,
	}
}

// Message retransmission timer bounds: the most an estimate may make it,
// the least its backing off reaches (silentRedo: a remote that answers
// nothing is asked no more often than the reference asks, every 500 ms),
// and the timer of a remote that no message of ours has timed yet (RFC
// 6298 §2.1's 1 s: firstMessageRedo).
const (
	maxMessageRedo   = 5 * time.Second
	silentRedo       = 500 * time.Millisecond
	firstMessageRedo = time.Second
)

// The round trips of the allow seed the estimate, as TCP's SYN seeds its
// timer (RFC 6298 §2): a first message's timer then fits a path slower
// than its 1 s floor (firstMessageRedo), whose copies sent again would
// each cost the receiver a signature check and a done. Timed are the signed requests that the
// other side answers at once: the allower's initiate (to its ack), the
// allowent's cookie (to the initiate) and its ack (to the final ack), and
// a message's last packet (to its ack, resend or done). Not timed are a
// request sent again (Karn's rule: the answer may be to either copy), one
// held for the keep (transmit: it leaves later than it was made), the
// allower's hello (the allowent's cookie waits for its keep to hold the
// join: joined), and the join, whose packets are not authenticated (an
// unauthenticated packet changes nothing of a remote, docs/security.md).

// observeRTT takes a sample of the time from a request to its answer
// (never of a request sent again: Karn's rule). The handshake's samples
// (seed) only seed it: the first message's sample starts it afresh, as the
// first sample does (RFC 6298 §2.2). A handshake's small packets, answered
// at once, may come back much sooner than the messages that follow, which
// queue behind each other: smoothed from such a seed, the estimate would
// take many answers to reach theirs, while its timer sent each of them
// again first (and a message sent again gives no sample).
//
// Every message's done is a sample, so that n messages under way give n
// samples a round trip where TCP's estimator expects one: each weighs 1/n
// of one (RFC 7323 Appendix G), else the variation of a round trip's
// samples, answered together, decays to nothing in one round trip and the
// probe (messageRedo) falls to the bare smoothed round trip.
func (r *remote) observeRTT(d time.Duration, seed bool) {
	us := max(1, int64(min(d, maxMessageRedo)/time.Microsecond))
	if !seed { // rack.go's figures are of messages
		r.rttLast = int32(us)
		if r.rttMin == 0 || int32(us) < r.rttMin {
			r.rttMin = int32(us)
		}
	}
	if r.srtt == 0 || (r.rttSeeded && !seed) {
		r.srtt, r.rttvar, r.rttSeeded = int32(us), int32(us/2), seed
		return
	}
	n := int64(1)
	if !seed {
		n = max(1, int64(len(r.ours)))
	}
	srtt := int64(r.srtt)
	r.rttvar = int32(((4*n-1)*int64(r.rttvar) + max(srtt-us, us-srtt)) / (4 * n))
	r.srtt = int32(((8*n-1)*srtt + us) / (8 * n))
}

// messageRedo is the retransmission timer of a new message of ours to r,
// the probe of a message that nothing later shows lost (rack.go): the
// estimate srtt + max(4·rttvar, timerGranularity) + maxAnswerDelay, as
// RFC 9002's probe timeout, at most maxMessageRedo, and no floor of its
// own (a floor of 200 ms made a lost message take the round trip and
// 200 ms); each expiry doubles it up to 2.5 times that, or silentRedo
// when that is longer. Until a message of ours to r has been timed (no
// sample, or only the handshake's seed) it is firstMessageRedo, RFC 6298's
// timer before a sample: the handshake's requests are answered at once and
// say nothing of how long a message waits in a loaded receiver's queue. A
// main that ten thousand remotes send their first message to at once
// answers each later than 200 ms, so that with a shorter first timer
// nearly every one went twice, each copy a verification and a done more
// for the main (bench/fleet, reference fan-in, N=10000). A seed beyond it
// still lengthens it (a slow path: TestAllowSeedsRTT). Messages started on
// it take the estimate once it is timed, when their timer next runs
// (messenger.backoff). A message r sends us times our asks again with it
// too (messengent).
func (r *remote) messageRedo() redo {
	est := time.Duration(r.srtt)*time.Microsecond +
		max(4*time.Duration(r.rttvar)*time.Microsecond, timerGranularity) + maxAnswerDelay
	rto := est
	if r.srtt == 0 || r.rttSeeded {
		rto = firstMessageRedo
		if r.srtt > 0 {
			rto = max(est, firstMessageRedo)
		}
	}
	rto = min(rto, maxMessageRedo)
	return newRedo(rto, min(max(rto*5/2, silentRedo), maxMessageRedo))
}

// minSegmentedRedo is the least timer of a segmented message, ours (the
// probe after its burst) or r's (asking again for what it misses): its
// answer waits for the receiver to take in the whole burst (a signature
// check and a copy a segment), which the round trips of small messages do
// not measure, and asking again before the segments asked for arrived
// has them sent twice (with the probe of a one-packet message, bursts of
// large messages over loopback went several times over). The receiver's
// resend lists, at each burst's last packet, recover its
// losses within the round trip.
const minSegmentedRedo = 200 * time.Millisecond

// segmentedRedo is messageRedo for a message of more than one packet:
// never shorter than minSegmentedRedo.
func (r *remote) segmentedRedo() redo {
	d := r.messageRedo()
	if d.min < minSegmentedRedo {
		d = newRedo(minSegmentedRedo, max(d.max, minSegmentedRedo*5/2))
	}
	return d
}

const (
	// packetThreshold is how many datagrams after a message's, one of
	// them answered, make it lost (RFC 9002 §6.1.1's kPacketThreshold).
	packetThreshold = 3
	// timerGranularity is the least a timer's margin is (RFC 9002's
	// kGranularity).
	timerGranularity = time.Millisecond
	// maxAnswerDelay is the longest a raet-go receiver waits to answer a
	// message it has whole: it answers in the moment it completes it (the
	// done, or the answers of that moment to a session that bundles), so
	// the bound is its owner's turn; the probe waits for it on top of the
	// round trip. A message still missing segments is answered with a
	// resend as soon as its burst's last packet (wf) comes.
	maxAnswerDelay = 10 * time.Millisecond
)
