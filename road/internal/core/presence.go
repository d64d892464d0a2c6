package core

import (
	"cmp"
	"slices"
	"time"

	"github.com/raet-go/raet/codec"
)

// Presence (§8.4): is each remote there? Any authenticated packet from a
// remote that is no replay (one of a live transaction, or one starting a
// transaction the replay window has not seen) says it is (heard): it
// pushes the remote's presence and reaping timers, so no alive goes while
// traffic flows.
//
// Of two estates one drives presence and the other answers: the driver
// (the non-main end; of two mains or two others, the one whose name sorts
// first) sends an alive after each period of silence; the answerer sends
// none while those come and probes only after a silence of the period
// plus AliveTimeout (the driver's resends fit in it). So a pair makes at
// most one alive exchange per period. The reference (and a raet-go estate
// of ProfileReference) keeps its own timer, its AlivePeriod (1 s by
// default), whichever end it is, and nothing on the wire tells it ours.
// Toward it a raet-go estate keeps its own period as below (alivePeriod),
// so that a main with many reference remotes probes each at most once per
// that period plus AliveTimeout of silence: about AliveRate alives a
// second in all, however many remotes it has. What the remotes send is
// theirs to set (Config.AlivePeriod per road); the main answers each
// alive, and each counts as a sign of life.
//
// Between two raet-go estates that both advertised a period (caps "ap",
// profile.go) the answerer also tells its period in the body of each ack,
// and the period of the pair is the larger of the two ends'; an estate's
// period grows with its remotes: max(AlivePeriod, remotes/AliveRate,
// rounded up to whole AlivePeriods), so that a main's presence costs about
// AliveRate exchanges a second however many remotes it has. With the
// reference the period is this estate's own.
//
// Detection: the driver finds a dead answerer within period + AliveTimeout
// of its last packet, the answerer a dead driver within period +
// 2·AliveTimeout. A main reaps a remote Interim after it found it dead,
// and a silent remote never sooner than that detection time (reapDelay),
// though Interim be shorter: a remote merely between its alives (a period
// grown with many remotes) is not reaped.
//
// Restart: remotes loaded from the keep have no session. Their first
// presence is spread over its delay, in uid order (startPresence), not
// due in one tick; and while a remote has no session the answering end (a
// main) mends it, as the reference's presence does (an allow, or a join
// when its keys need one), once per this estate's period, so a restarted
// main starts at most about AliveRate of those a second however many
// remotes it kept; the drivers mend them from their end too.

// alivePeriod is this estate's presence period now (see above).
func (c *Core) alivePeriod() time.Duration { return c.cfg.PresencePeriod(len(c.roster.remotes)) }

// pairPeriod is the period of presence with r when one end drives it (both
// advertised one); zero otherwise.
func (c *Core) pairPeriod(r *remote) time.Duration {
	if c.cfg.AlivePeriod < 0 || r.prof == nil || r.prof.alive <= 0 {
		return 0
	}
	return max(c.alivePeriod(), r.prof.alive)
}

// drives says whether we drive the presence with r (see above).
func (c *Core) drives(r *remote) bool {
	if c.local.main != r.main {
		return !c.local.main
	}
	return c.local.name < r.name
}

// presenceDelay is how long after its last word r's next alive goes: a
// period for the end that drives, a period and AliveTimeout for the end
// that answers; while there is no session (a restarted main cannot read
// its drivers' alives until it allows again), the driver's period for the
// driver, and this estate's period (alivePeriod, bounded by AliveRate) for
// the answerer, so that a main mends its sessions at most AliveRate a
// second, not all of them every AlivePeriod: its drivers mend them too.
func (c *Core) presenceDelay(r *remote, first bool) time.Duration {
	p := c.pairPeriod(r)
	if p == 0 { // the reference's presence
		p = c.alivePeriod()
		if first && !c.local.main {
			p += c.cfg.AliveOffset
		}
	}
	switch {
	case c.drives(r):
		return p
	case !r.allowed:
		return max(p, c.alivePeriod())
	}
	return p + c.cfg.AliveTimeout
}

// reapDelay is how long after its last word a silent r is reaped (once
// presence found it dead, refresh reaps it Interim on): Interim, or the
// answerer's detection time (period + 2·AliveTimeout, see above) when that
// is longer.
func (c *Core) reapDelay(r *remote) time.Duration {
	p := c.pairPeriod(r)
	if p == 0 { // the reference's presence
		p = c.alivePeriod()
	}
	return max(c.cfg.Interim, p+2*c.cfg.AliveTimeout)
}

// reaps says whether this estate reaps silent remotes (a main, §8.4).
func (c *Core) reaps() bool { return c.local.main && c.cfg.Interim > 0 && c.cfg.AlivePeriod >= 0 }

// startPresence starts the presence timers of the remotes loaded from the
// keep, by uid: the i-th of n first asks i+1 n-ths of its delay from now,
// so that an estate restarted with many remotes spreads them over a delay
// (a main: its period, so at most about AliveRate a second) instead of
// asking all in one tick; one remote asks after its delay, as before.
func (c *Core) startPresence(rs []*remote) {
	slices.SortFunc(rs, func(a, b *remote) int { return cmp.Compare(a.nuid, b.nuid) })
	n := time.Duration(len(rs))
	for i, r := range rs {
		c.schedulePresence(r, true)
		if !r.presence.IsZero() {
			r.presence = c.now.Add(c.presenceDelay(r, true) / n * time.Duration(i+1))
		}
	}
}

func (c *Core) schedulePresence(r *remote, first bool) {
	if c.cfg.AlivePeriod < 0 {
		return
	}
	r.presence = c.now.Add(c.presenceDelay(r, first))
	if r.reapAt.IsZero() && c.cfg.Interim > 0 {
		r.reapAt = c.now.Add(c.reapDelay(r))
	}
	c.wake.touch(r)
}

// heard records an authenticated packet from r: it is there, so its next
// alive and its reaping move on.
func (c *Core) heard(r *remote) {
	r.heard = c.now
	if r.added {
		c.roster.silence.last(r)
	}
	if c.cfg.AlivePeriod < 0 || r.presence.IsZero() {
		return // presence not started
	}
	r.presence = c.now.Add(c.presenceDelay(r, false))
	if c.cfg.Interim > 0 {
		r.reapAt = c.now.Add(c.reapDelay(r))
	}
	c.wake.touch(r)
}

// managePresence starts an alive when r's presence timer is due, lets a
// main estate reap a silent remote (§8.4, reapDelay), and forgets one
// reaped for ForgetAfter (forget.go).
func (c *Core) managePresence(r *remote) {
	if c.cfg.AlivePeriod < 0 {
		return
	}
	if r.reaped {
		if !r.forgetAt.IsZero() && !c.now.Before(r.forgetAt) {
			c.forget(r, ReasonSilent)
		}
		return
	}
	if !r.presence.IsZero() && !c.now.Before(r.presence) {
		c.schedulePresence(r, false)
		// Not one whose join waits for its hello (answered): a join of
		// ours would cross the allow it is about to start; nor an allow
		// before mendAt (mendLater).
		switch {
		case r.joined && !r.allowed && c.now.UnixNano() < r.mendAt:
		case r.joined || (len(r.inProcess(codec.TransactionKindJoin)) == 0 && r.answered == nil):
			c.startAliver(r, true)
		}
	}
	if c.reaps() && !r.reapAt.IsZero() && !c.now.Before(r.reapAt) {
		r.reaped = true
		if c.cfg.ForgetAfter > 0 {
			r.forgetAt = c.now.Add(c.cfg.ForgetAfter)
		}
		c.event(EventReaped, r)
	}
}

// refresh records an alive outcome (the reference's refresh): a nil alived
// only restarts the presence timer.
func (c *Core) refresh(r *remote, alived *bool) {
	c.schedulePresence(r, false)
	if alived == nil {
		return
	}
	if r.alived || *alived {
		switch {
		case c.cfg.Interim <= 0:
		case *alived:
			r.reapAt = c.now.Add(c.reapDelay(r))
		default: // found dead just now: reaped Interim on
			r.reapAt = c.now.Add(c.cfg.Interim)
		}
		if r.reaped {
			c.unreap(r)
		}
	}
	switch {
	case *alived && (!r.alived || !r.aliveKnown):
		c.event(EventAlive, r)
	case !*alived && (r.alived || !r.aliveKnown):
		c.event(EventDead, r)
	}
	r.alived, r.aliveKnown = *alived, true
}

// Mending a session (presence.go: the answering end allows a remote that
// has none) must not cross the remote's own allow: the reference, at any
// hello it takes, makes new short-term keys and holds itself unallowed
// until that allow completes, so each allow of ours it sees while it
// allows, or that it answers too late for our 4 s (a peer starved of CPU
// lags by seconds), leaves it without a session, and it refuses the next
// one while its late allowent lives: a main that mended every period
// started allows that never completed, its echoes nacked meanwhile (issue
// 31). So a remote that joined us gets the time of its own allow first,
// and after each allow of ours that fails the next waits twice as long.

// awaitAllow gives r, which joined us, the time of its allow before we
// mend its session.
func (c *Core) awaitAllow(r *remote) {
	r.mendAt = c.now.Add(c.cfg.AllowTimeout + c.alivePeriod()).UnixNano()
}

// mendLater backs off our next allow with r after one failed.
func (c *Core) mendLater(r *remote) {
	r.mends = min(r.mends+1, maxMendShift)
	r.mendAt = c.now.Add(c.alivePeriod() << r.mends).UnixNano()
}

// maxMendShift bounds mendLater's wait: 64 periods.
const maxMendShift = 6

func (c *Core) unreap(r *remote) {
	if c.local.main && r.reaped {
		r.reaped = false
		r.forgetAt = time.Time{}
		c.wake.touch(r)
		c.event(EventUnreaped, r)
	}
}

var (
	yes = func() *bool { b := true; return &b }()
	no  = func() *bool { b := false; return &b }()
)
