package core

import (
	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// The send window: what a remote's messages under way may hold of its
// room, so that an honest sender is held back (its messages wait, in
// order, and go as earlier ones end) rather than refused or rejected by a
// receiver under load.
//
//   - Ids: a message starts only while its transaction id is less than
//     sendSpan ids after the oldest of the remote's messages still under
//     way. The receiver's replay window (replay.go) refuses, as too old,
//     an id more than replayIDs behind the newest it finished; with the
//     span at half that, a message that is late (lost, refused for room,
//     sent again) is never too old when it comes.
//   - Room: segmented messages (those that are not one packet) under way
//     are at most the reassembly room a remote gets here per remote
//     (Config.Reassembly: MaxPerRemote messages, MaxBufferedPerRemote
//     bytes, counted as the Reassembler counts them; one message always
//     goes), which the sender takes as the receiver's. A receiver with
//     less room refuses the excess for now and the messenger sends it
//     again (its redo timer); nothing is nacked for want of room.
//
// Messages waiting for the window sit in remote.saved, with the ones a new
// session made stale, and time out there (MessageTimeout from Send).

// sendSpan is how many transaction ids a remote's messages under way may
// span.
const sendSpan = replayIDs / 2

// sendWindow is what a remote's messages under way hold; a remote has one
// only while it has messages under way.
type sendWindow struct {
	// started are the messages started, in order (their ids increase),
	// from head on; those that ended are dropped as they reach the head.
	started []txnKey
	head    int
	// first is the messenger at started[head] when oldest found it under
	// way: while it is, oldest looks nothing up (it asks at every start and
	// every done).
	first  *messenger
	large  int // segmented messages under way
	charge int // what they may be charged in the receiver's reassembly
}

// spareWinRoom bounds the room of the windows kept in Core.spareWins.
const spareWinRoom = 16

// roomCharge is what the receiver's Reassembler charges at most for m's
// segments (packet.MessageCharge, for its count of segments).
func roomCharge(m *messenger) int {
	return packet.MessageCharge(m.coatLen()) - packet.SegmentCharge*(codec.MaxSegmentCount-m.count)
}

// oldest returns the oldest of r's messages under way; false when none is.
func (w *sendWindow) oldest(r *remote) (uint32, bool) {
	for w.head < len(w.started) {
		k := w.started[w.head]
		if m := w.first; m != nil && m.in == r && m.key() == k && k.si == r.sid {
			return k.ti, true
		}
		if m, ok := r.txn(k).(*messenger); ok && k.si == r.sid {
			w.first = m
			return k.ti, true
		}
		w.started[w.head] = txnKey{}
		w.head++
	}
	w.started, w.head, w.first = w.started[:0], 0, nil
	return 0, false
}

// A Waiter takes the outcome of a message (SendFor): nil when the remote
// said done, else why it failed. The core calls MessageDone once per
// message, on the owner goroutine, so it must not block.
type Waiter interface{ MessageDone(err error) }

// errChan is the Waiter of Send: a channel with room for the outcome.
type errChan chan<- error

func (ch errChan) MessageDone(err error) { ch <- err }
