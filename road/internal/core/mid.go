package core

import (
	"encoding/binary"
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
// authenticated with the body), before the serialized body: the envelope
// of packet.AppendMessageID.
//
// stream names the sender's id space: the Instance of a durable queue that
// is queue.Stable (the same across the sender's restarts), else a random
// number chosen by each Stack. seq is the queue's id of the message (a
// counter of the Stack without a queue), never 0. floor is the smallest
// seq the sender has not yet seen done (every seq below it is done and is
// never sent again). The receiver keeps, per remote, for the last
// midStreams streams, a window of MidWindow seqs from the highest floor it
// saw: a message whose seq is below the floor or marked in the window is a
// repeat; it is answered done and not delivered again (counted as
// "message_id_repeated"). The window is not cleared by a new session; it
// lives in memory, so a receiver's own restart forgets it.
//
// Floors are per remote. A sender puts an id only on a message whose seq
// is within MidWindow of its remote's floor: a message older than that
// still unfinished (a failed one waiting in its queue for the next run)
// makes newer ones go without an id, with a warning, rather than risking
// the loss of the old one. A queue's ids are shared by all remotes, so a
// sender that keeps several messages under way to each of many remotes at
// once spreads a remote's seqs apart and meets that limit sooner.

// MidWindow is how many seqs above the floor a receiver tracks per stream;
// midStreams how many streams per remote.
const (
	MidWindow  = 2048
	midStreams = 4
)

// MsgID is a message's stable id (packet.MsgID); Seq 0 is none.
type MsgID = packet.MsgID

// envelopes are scratch buffers for sealWithID, up to maxScratch bytes.
var envelopes = sync.Pool{New: func() any { return new([]byte) }}

const maxScratch = 64 << 10

// sealWithID seals the envelope of id and body with coat.
func sealWithID(coat packet.Coat, id MsgID, body []byte) ([]byte, error) {
	n := 1 + 3*binary.MaxVarintLen64 + len(body)
	if n > maxScratch {
		return coat.Seal(nil, packet.AppendMessageID(make([]byte, 0, n), id, body))
	}
	buf := envelopes.Get().(*[]byte)
	defer envelopes.Put(buf)
	*buf = packet.AppendMessageID((*buf)[:0], id, body)
	return coat.Seal(nil, *buf)
}

// --- receiver -------------------------------------------------------------

// midFilter remembers the message ids a remote's messages carried.
type midFilter struct {
	streams []midStream // at most midStreams
}

// midStream tracks one stream: every seq below base is done; bits marks
// the delivered seqs of [base, base+MidWindow), word w (seqs 64w..64w+63)
// at w % len(bits). The ring holds the words from base's up to the highest
// seq delivered (hi), so it stays one word while the sender's floor keeps
// up with its messages, and grows (up to midMaxWords) only while a sender
// has more under way; a seq in no word of the ring was not delivered.
type midStream struct {
	stream, base, hi uint64
	used             int64 // unix ns
	bits             []uint64
}

// midMaxWords covers MidWindow seqs from any base.
const midMaxWords = MidWindow/64 + 1

// lookup returns the stream's record, made (in place of the one used
// least recently, when there are midStreams) if new.
func (f *midFilter) lookup(stream uint64, now time.Time) *midStream {
	at := now.UnixNano()
	var oldest *midStream
	for i := range f.streams {
		s := &f.streams[i]
		if s.stream == stream {
			s.used = at
			return s
		}
		if oldest == nil || s.used < oldest.used {
			oldest = s
		}
	}
	if len(f.streams) < midStreams {
		f.streams = append(f.streams, midStream{stream: stream, used: at})
		return &f.streams[len(f.streams)-1]
	}
	*oldest = midStream{stream: stream, used: at}
	return oldest
}

// repeated says whether id was delivered before, after taking its floor.
func (f *midFilter) repeated(id MsgID, now time.Time) bool {
	s := f.lookup(id.Stream, now)
	s.advance(id.Floor)
	if id.Seq < s.base {
		return true
	}
	if id.Seq/64-s.base/64 >= uint64(len(s.bits)) {
		return false
	}
	return s.bits[id.Seq/64%uint64(len(s.bits))]&(1<<(id.Seq%64)) != 0
}

// delivered marks id; a seq beyond the window moves the window up (a
// sender that keeps to MidWindow never makes it).
func (f *midFilter) delivered(id MsgID, now time.Time) {
	s := f.lookup(id.Stream, now)
	if id.Seq < s.base {
		return
	}
	if id.Seq-s.base >= MidWindow {
		s.advance(id.Seq - MidWindow + 1)
	}
	if w := id.Seq/64 - s.base/64 + 1; w > uint64(len(s.bits)) {
		s.resize(min(max(2*len(s.bits), int(w)), midMaxWords))
	}
	s.hi = max(s.hi, id.Seq)
	s.bits[id.Seq/64%uint64(len(s.bits))] |= 1 << (id.Seq % 64)
}

// advance moves base up to floor, forgetting the marks below it, and
// shrinks the ring to the words still needed.
func (s *midStream) advance(floor uint64) {
	if floor <= s.base {
		return
	}
	n := uint64(len(s.bits))
	if floor/64-s.base/64 >= n {
		clear(s.bits)
	} else {
		for w := s.base / 64; w < floor/64; w++ {
			s.bits[w%n] = 0
		}
	}
	s.base = floor
	need := 1
	if s.hi >= floor {
		need = int(s.hi/64 - floor/64 + 1)
	}
	if need <= len(s.bits)/2 {
		s.resize(need)
	}
}

// resize lays the words from base's up out in a ring of n words.
func (s *midStream) resize(n int) {
	bits := make([]uint64, n)
	if old := uint64(len(s.bits)); old > 0 {
		for w := s.base / 64; w < s.base/64+min(old, uint64(n)); w++ {
			bits[w%uint64(n)] = s.bits[w%old]
		}
	}
	s.bits = bits
}
