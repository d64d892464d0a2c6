package road

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/raet-go/raet/road/internal/core"
	"github.com/raet-go/raet/road/internal/shrink"
)

// The ids of the messages a Stack sends (the wire form, and the receiver's
// side, are the core's: road/internal/core/mid.go).

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
	// remotesPeak and putsPeak say when remotes and puts, emptied of
	// most of what they held (a fan-out to ten thousand remotes done),
	// are rebuilt, to give back their room (shrink).
	remotesPeak, putsPeak shrink.Peak
	// spares are the seqs of remotes that had none open any more,
	// emptied, for the next remotes that have: neither a remote sent one
	// message at a time nor a fan-out to many remotes answered in bursts
	// (many done, then as many begun) makes them anew per message. At most
	// maxSpareSeqs, each of little room (spareSeqsRoom).
	spares shrink.Spares[*openSeqs]
	warned time.Time // the last warning of a message sent without an id
}

// openSeqs are a remote's seqs not yet done: in order from head (a
// Stack's own grow, so each goes at the end), some done (dropped once
// they reach the head), found by binary search, with no map or hash.
type openSeqs struct {
	seqs []openSeq
	head int
	open int // how many are not done
}

type openSeq struct {
	seq  uint64
	done bool
}

type pendingPut struct {
	remote string
	above  uint64
}

func newMidSource(stream uint64) *midSource {
	for stream == 0 {
		stream = rand.Uint64()
	}
	return &midSource{stream: stream, remotes: map[string]*openSeqs{}, puts: map[uint64]pendingPut{},
		spares: shrink.Spares[*openSeqs]{Max: maxSpareSeqs}}
}

// reserve is called before a queue's Put for remote; begin (with the
// ticket and the id the Put returned) or cancel ends it.
func (s *midSource) reserve(remote string) (ticket uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ticket++
	s.puts[s.ticket] = pendingPut{remote: remote, above: s.high + 1}
	s.putsPeak.Note(len(s.puts))
	return s.ticket
}

// cancel ends a reservation whose Put failed.
func (s *midSource) cancel(ticket uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endPut(ticket)
}

// endPut ends the reservation of ticket (0: none).
func (s *midSource) endPut(ticket uint64) {
	if ticket == 0 {
		return
	}
	delete(s.puts, ticket)
	if s.putsPeak.Due(len(s.puts)) {
		s.puts = shrink.Map(s.puts)
		s.putsPeak.Rebuilt(len(s.puts))
	}
}

// begin registers seq (0: the next of the Stack's own, with no queue) of
// a message to remote as not done, ends its reservation (ticket 0: none),
// and returns the seq with its id, which has seq 0 (no id) when seq is too
// far above the remote's floor.
func (s *midSource) begin(remote string, seq, ticket uint64) (core.MsgID, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endPut(ticket)
	if seq == 0 {
		seq = s.high + 1
	}
	floor := s.floor(s.holdLocked(remote, seq), remote)
	if seq-floor >= core.MidWindow {
		return core.MsgID{Stream: s.stream, Floor: floor}, seq // seq stays open: done later
	}
	return core.MsgID{Stream: s.stream, Seq: seq, Floor: floor}, seq
}

// hold registers seq of a message to remote as not done (a queued message
// of an earlier run).
func (s *midSource) hold(remote string, seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdLocked(remote, seq)
}

// holdLocked is hold with s.mu held; it returns the remote's seqs.
func (s *midSource) holdLocked(remote string, seq uint64) *openSeqs {
	s.high = max(s.high, seq)
	o := s.remotes[remote]
	if o == nil {
		var ok bool
		if o, ok = s.spares.Get(); !ok {
			o = &openSeqs{}
		}
		s.remotes[remote] = o
		s.remotesPeak.Note(len(s.remotes))
	}
	o.add(seq)
	return o
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
	if o.remove(seq) == 0 {
		delete(s.remotes, remote)
		if cap(o.seqs) <= spareSeqsRoom {
			s.spares.Put(o)
		}
		if s.remotesPeak.Due(len(s.remotes)) {
			s.remotes = shrink.Map(s.remotes)
			s.remotesPeak.Rebuilt(len(s.remotes))
		}
	}
}

// maxSpareSeqs bounds midSource.spares, and spareSeqsRoom the seqs each
// has room for: at most ~20 KiB kept.
const (
	maxSpareSeqs  = 64
	spareSeqsRoom = 16
)

// floor is the smallest seq to remote (whose seqs are o) not done or
// being put, or the next one when there is none.
func (s *midSource) floor(o *openSeqs, remote string) uint64 {
	f := s.high + 1
	if o.open > 0 {
		f = o.seqs[o.head].seq
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

// find is where seq is, or would go, among the seqs from head.
func (o *openSeqs) find(seq uint64) (int, bool) {
	live := o.seqs[o.head:]
	i, found := slices.BinarySearchFunc(live, seq, func(e openSeq, seq uint64) int { return cmp.Compare(e.seq, seq) })
	return o.head + i, found
}

// add opens seq (again, if it was done).
func (o *openSeqs) add(seq uint64) {
	if n := len(o.seqs); n == o.head || o.seqs[n-1].seq < seq {
		o.seqs = append(o.seqs, openSeq{seq: seq})
		o.open++
		return
	}
	i, found := o.find(seq)
	switch {
	case !found:
		o.seqs = slices.Insert(o.seqs, i, openSeq{seq: seq})
		o.open++
	case o.seqs[i].done:
		o.seqs[i].done = false
		o.open++
	}
}

// remove marks seq done, drops the done ones at the head, and returns how
// many stay open; none: the seqs are emptied (their memory kept).
func (o *openSeqs) remove(seq uint64) int {
	if i, found := o.find(seq); found && !o.seqs[i].done {
		o.seqs[i].done = true
		o.open--
	}
	for o.head < len(o.seqs) && o.seqs[o.head].done {
		o.head++
	}
	switch {
	case o.open == 0:
		o.seqs, o.head = o.seqs[:0], 0
	case o.head >= len(o.seqs)/2 && o.head >= 64:
		n := copy(o.seqs, o.seqs[o.head:])
		o.seqs, o.head = o.seqs[:n], 0
	}
	return o.open
}

// beginID gives seq of a message to remote (a queue id, with the ticket of
// its Put; 0 for the next of our own) its message id, warning when an
// unfinished older message leaves it none, and returns it with the seq.
func (s *Stack) beginID(remote string, seq, ticket uint64) (core.MsgID, uint64) {
	id, seq := s.mids.begin(remote, seq, ticket)
	if id.Seq == 0 && s.mids.warn(time.Now()) {
		s.cfg.Logger.Warn("raet: message sent without an id: an older one is still unfinished (a receiver may deliver it twice after a crash)",
			"remote", remote, "seq", seq, "oldest", id.Floor, "window", core.MidWindow, "logged", "once a minute")
	}
	return id, seq
}
