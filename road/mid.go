package road

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/raet-go/raet/packet"
)

// Message ids (raet-go only; negotiated as "mid" in the join caps).
//
// A transaction id names a message only within a session, and a session
// ends with a crash: a sender restarted on its durable queue sends the
// messages it holds again in a new session, where the receiver cannot tell
// them from new ones. So between two estates that both advertised "mid",
// every message carries a stable id inside its coat (encrypted and
// authenticated with the body), before the serialized body:
//
//	0x01 uvarint(stream) uvarint(seq) uvarint(floor) body…   an id
//	0x00 body…                                                no id
//
// stream names the sender's id space: the Instance of a durable queue that
// is queue.Stable (the same across the sender's restarts), else a random
// number chosen by each Stack. seq is the queue's id of the message (a
// counter of the Stack without a queue), never 0. floor is the smallest
// seq the sender has not yet seen done (every seq below it is done and is
// never sent again). The receiver keeps, per remote, for the last
// midStreams streams, a window of midWindow seqs from the highest floor it
// saw: a message whose seq is below the floor or marked in the window is a
// repeat; it is answered done and not delivered again (counted as
// "message_id_repeated"). The window is not cleared by a new session; it
// lives in memory, so a receiver's own restart forgets it.
//
// Floors are per remote. A sender puts an id only on a message whose seq
// is within midWindow of its remote's floor: a message older than that
// still unfinished (a failed one waiting in its queue for the next run)
// makes newer ones go without an id, with a warning, rather than risking
// the loss of the old one. A queue's ids are shared by all remotes, so a
// sender that keeps several messages under way to each of many remotes at
// once spreads a remote's seqs apart and meets that limit sooner.

// midWindow is how many seqs above the floor a receiver tracks per stream;
// midStreams how many streams per remote.
const (
	midWindow  = 2048
	midStreams = 4
)

// msgID is a message's stable id; seq 0 is none.
type msgID struct{ stream, seq, floor uint64 }

// appendEnvelope appends the id envelope and body to dst.
func appendEnvelope(dst []byte, id msgID, body []byte) []byte {
	if id.seq == 0 {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, id.stream)
		dst = binary.AppendUvarint(dst, id.seq)
		dst = binary.AppendUvarint(dst, id.floor)
	}
	return append(dst, body...)
}

// envelopes are scratch buffers for sealWithID, up to maxScratch bytes.
var envelopes = sync.Pool{New: func() any { return new([]byte) }}

const maxScratch = 64 << 10

// sealWithID seals the envelope of id and body with coat.
func sealWithID(coat packet.Coat, id msgID, body []byte) ([]byte, error) {
	n := 1 + 3*binary.MaxVarintLen64 + len(body)
	if n > maxScratch {
		return coat.Seal(nil, appendEnvelope(make([]byte, 0, n), id, body))
	}
	buf := envelopes.Get().(*[]byte)
	defer envelopes.Put(buf)
	*buf = appendEnvelope((*buf)[:0], id, body)
	return coat.Seal(nil, *buf)
}

var errEnvelope = errors.New("bad message id envelope")

// openEnvelope splits a plain coat into its id and body.
func openEnvelope(plain []byte) (msgID, []byte, error) {
	if len(plain) == 0 {
		return msgID{}, nil, errEnvelope
	}
	switch plain[0] {
	case 0:
		return msgID{}, plain[1:], nil
	case 1:
	default:
		return msgID{}, nil, errEnvelope
	}
	rest := plain[1:]
	var v [3]uint64
	for i := range v {
		x, n := binary.Uvarint(rest)
		if n <= 0 {
			return msgID{}, nil, errEnvelope
		}
		v[i], rest = x, rest[n:]
	}
	id := msgID{stream: v[0], seq: v[1], floor: v[2]}
	if id.seq == 0 || id.floor > id.seq {
		return msgID{}, nil, errEnvelope
	}
	return id, rest, nil
}

// --- sender ---------------------------------------------------------------

// midSource gives the messages of a Stack their ids. Floors are per
// remote: a message that waits for one remote holds back no other. It is
// safe for concurrent use (Send runs on the caller's goroutines).
type midSource struct {
	mu      sync.Mutex
	stream  uint64
	high    uint64 // the highest seq seen (given or held)
	remotes map[string]*openSeqs
	// puts are the queue Puts under way: each gets an id above the high
	// it saw when it began (the ids of a queue grow), so its remote's
	// floor stays at or below that until its id is known.
	puts   map[uint64]pendingPut
	ticket uint64
	warned time.Time // the last warning of a message sent without an id
}

// openSeqs are a remote's seqs not yet done.
type openSeqs struct {
	open map[uint64]struct{}
	low  []uint64 // a min-heap of them, some done (lazily removed)
}

type pendingPut struct {
	remote string
	above  uint64
}

func newMidSource(stream uint64) *midSource {
	for stream == 0 {
		stream = rand.Uint64()
	}
	return &midSource{stream: stream, remotes: map[string]*openSeqs{}, puts: map[uint64]pendingPut{}}
}

// reserve is called before a queue's Put for remote; begin (with the
// ticket and the id the Put returned) or cancel ends it.
func (s *midSource) reserve(remote string) (ticket uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticket++
	s.puts[s.ticket] = pendingPut{remote: remote, above: s.high + 1}
	return s.ticket
}

// cancel ends a reservation whose Put failed.
func (s *midSource) cancel(ticket uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.puts, ticket)
}

// begin registers seq (0: the next of the Stack's own, with no queue) of
// a message to remote as not done, ends its reservation (ticket 0: none),
// and returns the seq with its id, which has seq 0 (no id) when seq is too
// far above the remote's floor.
func (s *midSource) begin(remote string, seq, ticket uint64) (msgID, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.puts, ticket)
	if seq == 0 {
		seq = s.high + 1
	}
	s.holdLocked(remote, seq)
	floor := s.floor(remote)
	if seq-floor >= midWindow {
		return msgID{stream: s.stream, floor: floor}, seq // seq stays open: done later
	}
	return msgID{stream: s.stream, seq: seq, floor: floor}, seq
}

// hold registers seq of a message to remote as not done (a queued message
// of an earlier run).
func (s *midSource) hold(remote string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdLocked(remote, seq)
}

func (s *midSource) holdLocked(remote string, seq uint64) {
	s.high = max(s.high, seq)
	o := s.remotes[remote]
	if o == nil {
		o = &openSeqs{open: map[uint64]struct{}{}}
		s.remotes[remote] = o
	}
	if _, ok := o.open[seq]; !ok {
		o.open[seq] = struct{}{}
		o.push(seq)
	}
}

// done forgets seq of a message to remote: the remote has it (or, without
// a queue, it will not be sent again).
func (s *midSource) done(remote string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.remotes[remote]
	if o == nil {
		return
	}
	delete(o.open, seq)
	for len(o.low) > 0 {
		if _, ok := o.open[o.low[0]]; ok {
			break
		}
		o.pop()
	}
	if len(o.open) == 0 {
		delete(s.remotes, remote)
	}
}

// floor is the smallest seq to remote not done or being put, or the next
// one when there is none.
func (s *midSource) floor(remote string) uint64 {
	f := s.high + 1
	if o := s.remotes[remote]; o != nil && len(o.low) > 0 {
		f = o.low[0]
	}
	for _, p := range s.puts {
		if p.remote == remote {
			f = min(f, p.above)
		}
	}
	return f
}

// warn says whether to log a message sent without an id: once a minute.
func (s *midSource) warn(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.warned) < time.Minute {
		return false
	}
	s.warned = now
	return true
}

func (o *openSeqs) push(seq uint64) {
	h := append(o.low, seq)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			break
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
	o.low = h
}

func (o *openSeqs) pop() {
	h := o.low
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l] < h[small] {
			small = l
		}
		if r < len(h) && h[r] < h[small] {
			small = r
		}
		if small == i {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	o.low = h
}

// --- receiver -------------------------------------------------------------

// midFilter remembers the message ids a remote's messages carried.
type midFilter struct {
	streams []*midStream // at most midStreams
}

// midStream tracks one stream: every seq below base is done; bits marks
// the delivered seqs of [base, base+midWindow), at seq % midWindow.
type midStream struct {
	stream, base uint64
	bits         [midWindow / 64]uint64
	used         time.Time
}

// lookup returns the stream's record, made (in place of the one used
// least recently, when there are midStreams) if new.
func (f *midFilter) lookup(stream uint64, now time.Time) *midStream {
	var oldest *midStream
	for _, s := range f.streams {
		if s.stream == stream {
			s.used = now
			return s
		}
		if oldest == nil || s.used.Before(oldest.used) {
			oldest = s
		}
	}
	if len(f.streams) < midStreams {
		s := &midStream{stream: stream, used: now}
		f.streams = append(f.streams, s)
		return s
	}
	*oldest = midStream{stream: stream, used: now}
	return oldest
}

// repeated says whether id was delivered before, after taking its floor.
func (f *midFilter) repeated(id msgID, now time.Time) bool {
	s := f.lookup(id.stream, now)
	s.advance(id.floor)
	if id.seq < s.base {
		return true
	}
	if id.seq-s.base >= midWindow {
		return false
	}
	return s.bits[id.seq%midWindow/64]&(1<<(id.seq%64)) != 0
}

// delivered marks id; a seq beyond the window moves the window up (a
// sender that keeps to midWindow never makes it).
func (f *midFilter) delivered(id msgID, now time.Time) {
	s := f.lookup(id.stream, now)
	if id.seq-s.base >= midWindow {
		s.advance(id.seq - midWindow + 1)
	}
	s.bits[id.seq%midWindow/64] |= 1 << (id.seq % 64)
}

// advance moves base up to floor, forgetting the marks below it.
func (s *midStream) advance(floor uint64) {
	if floor <= s.base {
		return
	}
	if floor-s.base >= midWindow {
		clear(s.bits[:])
	} else {
		for q := s.base; q < floor; q++ {
			s.bits[q%midWindow/64] &^= 1 << (q % 64)
		}
	}
	s.base = floor
}
