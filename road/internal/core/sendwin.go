package core

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
