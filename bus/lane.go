package bus

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/raet-go/raet/lane"
)

// Lane adapts a started lane.Stack to Transport. A lane has no handshake and
// no presence, so the adapter makes the peer events itself, from the yards'
// sockets and messages: PeerUp ("socket found") when a yard's socket appears
// in the lane's directory, or is made again (a restart), and when the
// adapter starts; PeerUp ("first message") when a yard it has not heard from
// sends; PeerGone ("socket gone") when the socket of a yard it knows
// vanishes from the directory, and ("yard gone") when a Send finds it gone
// (lane.ErrYardGone). So peers on a lane find each other, and the queue
// groups they serve, without a first message, and again after any restart.
// The directory is read when the adapter starts and every second after.
// The Node's heartbeats (Config.Heartbeat) notice a yard that is silent or
// that restarted. It owns one goroutine that carries messages, as Road's
// does, and that Close stops; the stack stays open.
type Lane struct {
	s *lane.Stack
	carrier

	mu    sync.Mutex
	heard map[string]bool // yards heard from, at most maxHeard
	order []string        // heard, oldest first, to forget the oldest

	seen   map[string]os.FileInfo // the yards' sockets at the last scan; pump only
	rescan chan struct{}          // a node attached: report every socket again
}

// laneScan is how often a Lane reads its lane's directory for yards that
// came, came back or left.
const laneScan = time.Second

// maxHeard bounds the yards a Lane remembers having heard from.
const maxHeard = lane.DefaultMaxYards

// NewLane starts carrying s's messages.
func NewLane(s *lane.Stack) *Lane {
	l := &Lane{s: s, heard: map[string]bool{}, seen: map[string]os.FileInfo{}, rescan: make(chan struct{}, 1)}
	l.start(l.pump)
	return l
}

func (l *Lane) pump() {
	l.scan()
	tick := time.NewTicker(laneScan)
	defer tick.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-tick.C:
			l.scan()
		case <-l.attached:
			// The queued events are the first scan's, which the rescan
			// reports again.
			l.handQueued(false)
			for len(l.events) > 0 {
				<-l.events
			}
		case <-l.rescan:
			clear(l.seen)
			l.scan()
		case m, ok := <-l.s.Receive():
			if !ok {
				l.stop() // the stack closed under the adapter
				return
			}
			if l.hear(m.From) {
				l.peerEvent(m.From, PeerUp, "first message")
			}
			if !l.deliver(Message{From: m.From, Body: m.Body}) {
				return
			}
		}
	}
}

// attach attaches a node (see sink) and has the yards found so far
// reported again, to it: those of the first scan went to the Events
// channel, which an attached node does not read.
func (l *Lane) attach(msg func(Message), ev func(PeerEvent)) {
	l.carrier.attach(msg, ev)
	if ev != nil {
		select {
		case l.rescan <- struct{}{}:
		default: // one is pending
		}
	}
}

// scan reads the lane's directory: a yard whose socket is new or was made
// again since the last scan is up, one heard from whose socket vanished is
// gone. A socket is told from one made again at the same path by its file
// identity and time, so that a socket left by a killed yard is reported
// once, not at every scan.
func (l *Lane) scan() {
	dir := filepath.Dir(l.s.Path())
	// The socket path of a yard is <prefix><name><suffix> (lane.SocketPath).
	prefix, suffix, _ := strings.Cut(lane.SocketPath(dir, l.s.Lane(), "\x00"), "\x00")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // the directory is the stack's; a Send reports its trouble
	}
	seen := make(map[string]os.FileInfo, len(l.seen))
	var up []string
	for _, e := range entries {
		if len(seen) >= maxHeard {
			break
		}
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		name, ok := strings.CutPrefix(filepath.Join(dir, e.Name()), prefix)
		if !ok {
			continue
		}
		if name, ok = strings.CutSuffix(name, suffix); !ok || name == "" || name == l.s.Name() || strings.ContainsAny(name, "./") {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // gone since ReadDir
		}
		seen[name] = fi
		if old, ok := l.seen[name]; !ok || !os.SameFile(old, fi) || !old.ModTime().Equal(fi.ModTime()) {
			up = append(up, name)
		}
	}
	var gone []string
	for name := range l.seen {
		if _, ok := seen[name]; !ok {
			gone = append(gone, name)
		}
	}
	l.seen = seen
	for _, name := range gone {
		if l.forget(name) {
			l.peerEvent(name, PeerGone, "socket gone")
		}
	}
	for _, name := range up {
		l.hear(name)
		l.peerEvent(name, PeerUp, "socket found")
	}
}

// hear records that yard spoke (or its socket was found) and reports
// whether it is new.
func (l *Lane) hear(yard string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.heard[yard] {
		return false
	}
	if len(l.order) >= maxHeard {
		delete(l.heard, l.order[0])
		l.order = l.order[1:]
	}
	l.heard[yard] = true
	l.order = append(l.order, yard)
	return true
}

func (l *Lane) forget(yard string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.heard[yard] {
		return false
	}
	delete(l.heard, yard)
	for i, y := range l.order {
		if y == yard {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	return true
}

func (l *Lane) peerEvent(peer string, st PeerState, reason string) {
	l.notify(PeerEvent{Peer: peer, State: st, Reason: reason, Time: time.Now()})
}

// Name is the yard's name.
func (l *Lane) Name() string { return l.s.Name() }

// Send sends body to the yard named to (see lane.Stack.Send). A yard whose
// socket is gone gives an error wrapping both lane.ErrYardGone and
// ErrUnknownPeer, and a PeerGone event if it had been heard from.
func (l *Lane) Send(ctx context.Context, to string, body any) error {
	err := l.s.Send(ctx, to, body)
	if err != nil && errors.Is(err, lane.ErrYardGone) {
		if l.forget(to) {
			l.peerEvent(to, PeerGone, "yard gone")
		}
		return errors.Join(err, ErrUnknownPeer)
	}
	return err
}
