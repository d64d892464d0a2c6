package core

import (
	"time"

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

// opens reports whether a message may start now to r (on ids; the room of
// a segmented one is checked once it is cut, in began).
func (c *Core) opens(r *remote) bool {
	w := r.win
	if w == nil {
		return true
	}
	oldest, ok := w.oldest(r)
	if ok && r.tid+1-oldest >= sendSpan {
		return false
	}
	cfg := c.reasm.Config()
	return w.large == 0 || (w.large < cfg.MaxPerRemote && w.charge < cfg.MaxBufferedPerRemote)
}

// begin starts a message to r now if the window lets it (and nothing
// waits before it), or holds it in r.saved until it does.
// buf is body's pooled buffer, or nil (SendFor).
func (c *Core) begin(r *remote, body []byte, buf *[]byte, bk codec.BodyKind, id MsgID, result Waiter, started time.Time) {
	if r.allowed && r.coat != nil && (len(r.saved) > 0 || !c.opens(r)) {
		r.save(&messenger{r: r, body: body, buf: buf, bk: bk, id: id, result: result,
			started: started, timeout: after(c.now, c.cfg.MessageTimeout)})
		c.wake.touch(r)
		return
	}
	c.launch(r, body, buf, bk, id, result, started)
}

// launch starts a message to r and counts it in r's window.
func (c *Core) launch(r *remote, body []byte, buf *[]byte, bk codec.BodyKind, id MsgID, result Waiter, started time.Time) {
	if m := c.startMessenger(r, body, buf, bk, id, result, started); m.in == r {
		c.began(m)
	}
}

// began counts m, just started, in its remote's window.
func (c *Core) began(m *messenger) {
	r := m.r
	if r.win == nil {
		var ok bool
		if r.win, ok = c.spares.wins.Get(); !ok {
			r.win = &sendWindow{}
		}
	}
	w := r.win
	if w.head > 0 && 2*w.head >= len(w.started) {
		n := copy(w.started, w.started[w.head:])
		clear(w.started[n:])
		w.started, w.head = w.started[:n], 0
	}
	w.started = append(w.started, m.key())
	if !m.bundled && m.count > 1 {
		m.large = true
		w.large++
		w.charge += roomCharge(m)
	}
}

// ended takes m out of its remote's window; it may then let what waits go
// (startHeld, which the caller runs where the remote's transactions are
// not being walked).
func (c *Core) ended(m *messenger) {
	m.r.sendOrder.remove(m)
	w := m.r.win
	if w == nil || !m.large {
		return
	}
	m.large = false
	w.large--
	w.charge -= roomCharge(m)
}

// startHeld starts the messages waiting in r.saved, in order, while the
// window lets them and r is allowed (after an allow, those a new session
// made stale go again); it drops the window once nothing is under way.
func (c *Core) startHeld(r *remote) {
	for len(r.saved) > 0 && r.allowed && r.coat != nil && c.opens(r) {
		m := r.saved[0]
		r.saved[0] = nil
		r.saved = r.saved[1:]
		if len(r.saved) == 0 {
			r.dropSaved()
		}
		c.launch(r, m.body, m.buf, m.bk, m.id, m.result, m.started) // m's successor owns buf
	}
	if w := r.win; w != nil && w.large == 0 {
		if _, ok := w.oldest(r); !ok {
			r.win = nil
			if cap(w.started) <= spareWinRoom {
				*w = sendWindow{started: w.started[:0]}
				c.spares.wins.Put(w)
			}
		}
	}
}
