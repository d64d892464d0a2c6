package bus

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/protocol"
)

// peer is what the node knows of one peer. Its fields are guarded by
// Node.mu.
type peer struct {
	name     string
	up       bool
	epoch    uint64    // its run, from its hellos; 0 until one came
	heard    time.Time // when it last sent anything
	asked    int       // heartbeats sent since it last answered
	greeted  bool      // our first hello of this run is queued
	wanted   bool      // we talk to it (subscribe, request, pull): heartbeats even before it answers
	groups   []string  // the queue groups it serves
	rtt      RTT
	ctl      chan envelope.Envelope
	sending  bool // a goroutine drains ctl
	ctlMu    sync.Mutex
	helloOut bool // a hello is waiting in ctl
}

// RTT is the round-trip time to a peer, measured by heartbeats (hellos are
// answered by the node's reader at once: the network's time, not a
// handler's).
type RTT struct {
	Count uint64
	Last  time.Duration
	Min   time.Duration
	Avg   time.Duration // moving average, weight 1/8 for a new sample
}

func (r *RTT) add(d time.Duration) {
	if d < 0 {
		return
	}
	r.Count++
	r.Last = d
	if r.Count == 1 {
		r.Min, r.Avg = d, d
		return
	}
	r.Min = min(r.Min, d)
	r.Avg += (d - r.Avg) / 8
}

// RTT returns the round-trip time to peer; ok is false when the node knows
// no such peer.
func (n *Node) RTT(peerName string) (rtt RTT, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.peers[peerName]; p != nil {
		return p.rtt, true
	}
	return RTT{}, false
}

// knownDown reports whether peer was heard from and is down now.
func (n *Node) knownDown(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.peers[name]
	return p != nil && !p.up && !p.heard.IsZero()
}

// Peers lists the peers the node knows and whether each is up.
func (n *Node) Peers() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]bool, len(n.peers))
	for name, p := range n.peers {
		out[name] = p.up
	}
	return out
}

// peerLocked returns the peer named name, making it (down, unheard) when
// it is new; nil when MaxPeers is reached. n.mu is held.
func (n *Node) peerLocked(name string) *peer {
	p := n.peers[name]
	if p == nil {
		if name == n.Name() {
			return nil
		}
		if len(n.peers) >= n.cfg.MaxPeers {
			n.stats.peerLimit.Add(1)
			return nil
		}
		p = &peer{name: name, ctl: make(chan envelope.Envelope, n.cfg.ControlQueue)}
		n.peers[name] = p
	}
	return p
}

// know makes sure the node tracks peer name (one it is about to talk to) and
// greets it.
func (n *Node) know(name string) {
	n.mu.Lock()
	p := n.peerLocked(name)
	if p != nil {
		p.wanted = true
	}
	n.mu.Unlock()
	if p != nil {
		n.greet(p)
	}
}

// greet queues our first hello of this run to p, so that it precedes every
// control envelope we send it.
func (n *Node) greet(p *peer) {
	n.mu.Lock()
	first := !p.greeted
	p.greeted = true
	n.mu.Unlock()
	if first {
		n.sendHello(p, true, 0)
	}
}

// heard notes that name sent something: a down peer is up again.
func (n *Node) heard(name string) {
	n.mu.Lock()
	p := n.peerLocked(name)
	if p == nil {
		n.mu.Unlock()
		return
	}
	p.heard = time.Now()
	p.asked = 0
	wasUp := p.up
	p.up = true
	n.mu.Unlock()
	n.greet(p)
	if !wasUp {
		n.changed(name, PeerUp, "spoke", false)
	}
}

func (n *Node) hello(from string, e *envelope.Envelope) {
	n.mu.Lock()
	p := n.peers[from]
	if p == nil {
		n.mu.Unlock()
		return
	}
	restarted := p.epoch != 0 && e.Epoch != p.epoch
	p.epoch = e.Epoch
	p.groups = e.Groups
	if !e.Reply && e.Time != 0 {
		p.rtt.add(time.Since(time.Unix(0, e.Time)))
	}
	n.mu.Unlock()
	if e.Reply {
		n.sendHello(p, false, e.Time)
	}
	if restarted {
		n.changed(from, PeerUp, "restarted", true)
	}
}

// sendHello queues a hello to p: asking for an answer (ask), or answering
// one sent at echo.
func (n *Node) sendHello(p *peer, ask bool, echo int64) {
	e := newEnvelope(protocol.BusKindHello)
	e.Epoch = n.epoch
	e.Groups = n.rep.groups()
	e.Reply = ask
	e.Time = echo
	if ask {
		e.Time = time.Now().UnixNano()
		p.ctlMu.Lock()
		pending := p.helloOut
		p.helloOut = true
		p.ctlMu.Unlock()
		if pending {
			return
		}
	}
	n.control(p, e)
}

// sayHello sends a hello to every known peer (the groups served changed).
func (n *Node) sayHello() {
	n.mu.Lock()
	ps := make([]*peer, 0, len(n.peers))
	for _, p := range n.peers {
		ps = append(ps, p)
	}
	n.mu.Unlock()
	for _, p := range ps {
		n.sendHello(p, false, 0)
	}
}

// transportEvent takes a peer event of the transport.
func (n *Node) transportEvent(ev PeerEvent) {
	switch ev.State {
	case PeerUp:
		n.mu.Lock()
		p := n.peerLocked(ev.Peer)
		if p == nil {
			n.mu.Unlock()
			return
		}
		wasUp := p.up
		p.up, p.asked, p.heard = true, 0, time.Now()
		p.greeted = true
		n.mu.Unlock()
		// A session came up (again): say hello, so a restart shows.
		n.sendHello(p, true, 0)
		if !wasUp {
			n.changed(ev.Peer, PeerUp, ev.Reason, false)
		}
	case PeerDown:
		n.mu.Lock()
		p := n.peers[ev.Peer]
		wasUp := p != nil && p.up
		if p != nil {
			p.up = false
		}
		n.mu.Unlock()
		if wasUp {
			n.changed(ev.Peer, PeerDown, ev.Reason, false)
		}
	case PeerGone:
		// A peer we talk to (subscribe to, pull from, request) is kept,
		// down, so that the heartbeats go on asking for it: a transport
		// cannot tell a peer that left from one that will restart (a lane
		// yard's socket is gone in both cases), and only a hello that gets
		// through again brings its subscriptions and credit back.
		n.mu.Lock()
		p, known := n.peers[ev.Peer]
		if known && p.wanted {
			p.up = false
		} else {
			delete(n.peers, ev.Peer)
		}
		n.mu.Unlock()
		if known {
			n.changed(ev.Peer, PeerGone, ev.Reason, false)
		}
	}
}

// heartbeat asks for a hello from every peer that speaks the bus (it
// answered one) or that we talk to, and marks down those silent too long. A
// peer that never answered and that we do not talk to (a reference estate
// on the same road, say) got one hello when it came up, and is left alone.
func (n *Node) heartbeat(now time.Time) {
	var ask []*peer
	var silent []string
	release := map[string]bool{}
	n.mu.Lock()
	for _, p := range n.peers {
		if n.cfg.ReleaseSilent > 0 && now.Sub(p.heard) >= n.cfg.ReleaseSilent {
			release[p.name] = true
		}
		if p.epoch == 0 && !p.wanted {
			continue
		}
		if p.up && p.asked >= n.cfg.Silent {
			p.up = false
			silent = append(silent, p.name)
		}
		p.asked++
		ask = append(ask, p)
	}
	n.mu.Unlock()
	for _, p := range ask {
		n.sendHello(p, true, 0)
	}
	for _, name := range silent {
		n.changed(name, PeerDown, "silent", false)
	}
	n.pub.release(release, "silent")
	n.sub.tick()
	n.push.tick(now)
}

// changed tells the roles and the application that a peer's state changed.
func (n *Node) changed(name string, st PeerState, reason string, restarted bool) {
	n.log.Debug("peer", "peer", name, "state", st, "reason", reason)
	n.pub.peer(name, st, restarted)
	n.sub.peer(name, st, restarted)
	n.req.peer(name, st, restarted)
	n.rep.peer(name, st, restarted)
	n.push.peer(name, st, restarted)
	n.pull.peer(name, st, restarted)
	n.event(PeerEvent{Peer: name, State: st, Reason: reason, Time: time.Now()})
}

// event hands ev to the application, or counts it dropped when PeerEvents
// is full: it never waits.
func (n *Node) event(ev PeerEvent) {
	select {
	case n.peerEvents <- ev:
	default:
		n.stats.peerEventDrops.Add(1)
	}
}

// liveGroupMembers lists the up peers serving queue group g.
func (n *Node) liveGroupMembers(g string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for name, p := range n.peers {
		if p.up && slices.Contains(p.groups, g) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// control queues e for p; a goroutine sends p's queue in order. A full
// queue drops e and counts it; control reports whether e was queued.
func (n *Node) control(p *peer, e envelope.Envelope) bool {
	if n.closed() {
		return false
	}
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	select {
	case p.ctl <- e:
	default:
		if e.Kind == protocol.BusKindHello && e.Reply {
			p.helloOut = false
		}
		n.stats.controlDrops.Add(1)
		n.log.Warn("control envelope dropped: queue full", "peer", p.name, "kind", e.Kind)
		return false
	}
	if !p.sending {
		p.sending = n.goWait(func() { n.drainControl(p) })
	}
	return true
}

// drainControl sends p's control queue until it is empty.
func (n *Node) drainControl(p *peer) {
	for {
		p.ctlMu.Lock()
		var e envelope.Envelope
		select {
		case e = <-p.ctl:
		default:
			p.sending = false
			p.ctlMu.Unlock()
			return
		}
		if e.Kind == protocol.BusKindHello && e.Reply {
			p.helloOut = false
		}
		p.ctlMu.Unlock()
		if n.closed() {
			continue // empty the queue without sending
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ControlTimeout)
		err := n.t.Send(ctx, p.name, e.Map())
		cancel()
		if err != nil && !n.closed() {
			n.stats.controlDrops.Add(1)
			n.log.Debug("control envelope not sent", "peer", p.name, "kind", e.Kind, "err", err)
		}
	}
}
