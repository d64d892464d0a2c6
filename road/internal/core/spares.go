package core

import "github.com/raet-go/raet/road/internal/shrink"

// spares are the emptied tables, messengers and send windows the core keeps
// for the next remotes and messages to start with, so that a window of
// messages that drains and fills again makes none anew.
type spares struct {
	// txns are the empty transaction tables (ours or theirs) of the
	// remotes whose transactions of one side all ended last, for the next
	// remotes to start one: a remote whose window of messages drains and
	// fills again (16 in flight, answered by one bundle of dones) would
	// make and grow a table each time, and so would a main whose fan-out
	// to many remotes is answered in bursts (a read of many dones, then as
	// many new messages, each to a remote with none under way). Each is
	// never larger than a remote's was.
	txns shrink.Spares[map[txnID]txn]
	// messengers are messengers whose messages ended, for the next
	// messages: a main's fan-out made one (~500 B) per message, the most
	// of its garbage. A messenger that ended goes to retired, out of its
	// remote's transactions and no bundle's, and joins the spares at the
	// next Deadline (recycle), once the event that ended it is over
	// (nothing then holds it but what checks its key: a send window's
	// first).
	messengers shrink.Spares[*messenger]
	retired    []*messenger
	// wins are the send windows of remotes whose messages all ended (with
	// room for at most spareWinRoom), for the next remotes to start one: a
	// remote sent one message at a time made one per message.
	wins shrink.Spares[*sendWindow]
}

// maxSpares bounds each of spares' txns, messengers, retired and wins: a
// read of that many dones, then as many new messages, each to a remote
// with none under way, makes no table, messenger or window.
const maxSpares = 256

func newSpares() spares {
	return spares{
		txns:       shrink.Spares[map[txnID]txn]{Max: maxSpares},
		messengers: shrink.Spares[*messenger]{Max: maxSpares},
		wins:       shrink.Spares[*sendWindow]{Max: maxSpares},
	}
}

// retire keeps m, whose message ended, for recycle.
func (s *spares) retire(m *messenger) {
	if len(s.retired) < maxSpares {
		s.retired = append(s.retired, m)
	}
}

// recycle makes the retired messengers spares: the events that ended them
// are over.
func (s *spares) recycle() {
	for i, m := range s.retired {
		s.messengers.Put(m)
		s.retired[i] = nil
	}
	s.retired = s.retired[:0]
}

// drop lets the spares go (Core.shrink).
func (s *spares) drop() {
	s.txns.Drop()
	s.messengers.Drop()
	s.wins.Drop()
	s.retired = nil
}
