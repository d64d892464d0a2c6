package core

import (
	"errors"
	"time"

	"github.com/raet-go/raet/packet"
)

// sealedAEAD follows every seal with r's AEAD coat a: a coat with little
// left to seal (rekeyAt), or none (err), has r allowed again.
func (c *Core) sealedAEAD(r *remote, a *packet.AEADCoat, err error) {
	if (err == nil && a.Remaining() < c.rekeyAt) || errors.Is(err, packet.ErrRekey) {
		c.rekey(r)
	}
	c.usedAEAD(r, true)
}

// aeadIdle is a new AEAD session's hold: how long it may go without a
// packet sealed or opened before its coat drops its cipher states
// (packet.AEADCoat.Drop; ~1.5 KiB with AES-256-GCM, as much as the rest
// of a remote's state); its
// next packet builds them again (~1.4 µs, BenchmarkAEADCoatRebuild). A
// busy session never runs this timer: each packet moves it. A session
// whose presence period is longer (a main's grows with its remotes,
// presence.go: 5 s at 1000 remotes and the default AliveRate) drops them
// at the end of each alive exchange instead (idleExchange), so that its
// idle remotes hold none and run no timer between their alives.
//
// A session whose traffic comes in bursts a little further apart than
// that (a main that sends to each of its remotes every few seconds) would
// drop and rebuild them for every burst: 2.6 KB of garbage and a rebuild
// each. So the hold adapts (adaptHold): states wanted again within a hold
// of being dropped are kept twice as long from then on, up to aeadHoldMax;
// wanted later than that, half as long, down to aeadIdle.
const (
	aeadIdle    = 2 * time.Second
	aeadHoldMax = 8 * aeadIdle
)

// usedAEAD records a packet sealed or opened with r's AEAD coat, whose
// cipher states are therefore built: they go the session's hold after the
// last such packet (remoteDeadline, idleAEAD). A coat that did not open
// (forged, say) only starts that timer if it was not running, so forgeries
// cannot keep the states beyond a hold, nor lengthen it.
func (c *Core) usedAEAD(r *remote, opened bool) {
	p := r.prof
	if p == nil || p.aead == nil || (!opened && p.aeadCheck != 0) {
		return
	}
	now := c.now.UnixNano()
	if p.aeadCheck == 0 && opened && p.aeadDropped != 0 {
		p.adaptHold(now)
	}
	p.aeadCheck = now + int64(p.hold())
	c.wake.touch(r)
}

// hold is how long the session's AEAD cipher states are kept idle.
func (p *profile) hold() time.Duration {
	if p.aeadHold == 0 {
		return aeadIdle
	}
	return p.aeadHold
}

// adaptHold follows states dropped by idleAEAD and wanted again at now:
// within a hold of the drop, the hold doubles (up to aeadHoldMax);
// later, it halves (down to aeadIdle).
func (p *profile) adaptHold(now int64) {
	h := p.hold()
	if now-p.aeadDropped < int64(h) {
		h = min(2*h, aeadHoldMax)
	} else {
		h = max(h/2, aeadIdle)
	}
	p.aeadHold, p.aeadDropped = h, 0
}

// idleAEAD drops the cipher states of r's AEAD coat once its timer is due:
// nothing was sealed or opened with it for its hold.
func (c *Core) idleAEAD(r *remote) {
	if p := r.prof; p != nil && p.aeadCheck != 0 && c.now.UnixNano() >= p.aeadCheck {
		p.aead.Drop()
		p.aeadCheck, p.aeadDropped = 0, c.now.UnixNano()
	}
}

// idleExchange follows an alive exchange with r that left nothing under
// way. A driver asks only after a period of silence both ways (presence.go),
// so the session was idle for that period and is idle until the next
// exchange: when the period is longer than aeadIdle, its AEAD cipher
// states go now rather than by a timer a hold later (whatever the hold:
// an idle remote holds none between its alives), and the hold is left as
// it is (the next exchange's rebuild says nothing of the traffic).
func (c *Core) idleExchange(r *remote) {
	p := r.prof
	if p == nil || p.aeadCheck == 0 || r.numTxns() > 0 || c.pairPeriod(r) <= aeadIdle {
		return
	}
	p.aead.Drop()
	p.aeadCheck = 0
}
