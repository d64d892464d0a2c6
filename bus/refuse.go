package bus

import (
	"log/slog"
	"sync"
)

// warnOnce logs the envelopes a role refuses from a peer: at Warn the first
// time for each peer and reason, at Debug after, so that a hostile peer
// sending thousands of them does not flood the log. Each role counts them
// in its stats by reason.
type warnOnce struct {
	mu   sync.Mutex
	seen map[warnKey]struct{}
}

type warnKey struct{ peer, reason string }

// maxWarned bounds the pairs remembered; past it the memory starts again
// (a pair may then be logged at Warn twice).
const maxWarned = 4096

func (w *warnOnce) log(l *slog.Logger, peer, reason string, args ...any) {
	k := warnKey{peer, reason}
	w.mu.Lock()
	_, seen := w.seen[k]
	if !seen {
		if w.seen == nil || len(w.seen) >= maxWarned {
			w.seen = map[warnKey]struct{}{}
		}
		w.seen[k] = struct{}{}
	}
	w.mu.Unlock()
	args = append([]any{"peer", peer, "reason", reason}, args...)
	if seen {
		l.Debug("envelope refused", args...)
		return
	}
	l.Warn("envelope refused (logged once per peer and reason)", args...)
}

// forget lets peer's refusals be logged again (it left or restarted).
func (w *warnOnce) forget(peer string) {
	w.mu.Lock()
	for k := range w.seen {
		if k.peer == peer {
			delete(w.seen, k)
		}
	}
	w.mu.Unlock()
}
