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
	streams []*midStream // at most midStreams
}

// midStream tracks one stream: every seq below base is done; bits marks
// the delivered seqs of [base, base+MidWindow), at seq % MidWindow.
type midStream struct {
	stream, base uint64
	bits         [MidWindow / 64]uint64
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
func (f *midFilter) repeated(id MsgID, now time.Time) bool {
	s := f.lookup(id.Stream, now)
	s.advance(id.Floor)
	if id.Seq < s.base {
		return true
	}
	if id.Seq-s.base >= MidWindow {
		return false
	}
	return s.bits[id.Seq%MidWindow/64]&(1<<(id.Seq%64)) != 0
}

// delivered marks id; a seq beyond the window moves the window up (a
// sender that keeps to MidWindow never makes it).
func (f *midFilter) delivered(id MsgID, now time.Time) {
	s := f.lookup(id.Stream, now)
	if id.Seq-s.base >= MidWindow {
		s.advance(id.Seq - MidWindow + 1)
	}
	s.bits[id.Seq%MidWindow/64] |= 1 << (id.Seq % 64)
}

// advance moves base up to floor, forgetting the marks below it.
func (s *midStream) advance(floor uint64) {
	if floor <= s.base {
		return
	}
	if floor-s.base >= MidWindow {
		clear(s.bits[:])
	} else {
		for q := s.base; q < floor; q++ {
			s.bits[q%MidWindow/64] &^= 1 << (q % 64)
		}
	}
	s.base = floor
}
