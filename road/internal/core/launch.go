package core

import (
	"time"

	"github.com/raet-go/raet/codec"
)

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
