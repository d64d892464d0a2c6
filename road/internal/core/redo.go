package core

import "time"

// redo is a transaction's retry timer: each expiry doubles its duration
// from min up to max (§8.1), and every transmission restarts it.
type redo struct {
	min, max time.Duration
	cur      time.Duration
	at       time.Time
}

func newRedo(min, max time.Duration) redo { return redo{min: min, max: max, cur: min} }

// restart arms the timer for its current duration from now.
func (r *redo) restart(now time.Time) { r.at = now.Add(r.cur) }

// backoff doubles the duration within [min, max] and re-arms it.
func (r *redo) backoff(now time.Time) {
	r.cur = min(max(r.min, 2*r.cur), r.max)
	r.restart(now)
}

// rebase takes the bounds of fresh, a timer made now, when they are
// shorter (the estimate came down since r was made), its current duration
// within them.
func (r *redo) rebase(fresh redo) {
	if fresh.min < r.min {
		r.min, r.max, r.cur = fresh.min, fresh.max, min(r.cur, fresh.max)
	}
}

func (r *redo) due(now time.Time) bool { return !r.at.IsZero() && !now.Before(r.at) }

// expiry is a transaction timeout; zero means none.
type expiry time.Time

func after(now time.Time, d time.Duration) expiry {
	if d <= 0 {
		return expiry{}
	}
	return expiry(now.Add(d))
}

func (e expiry) due(now time.Time) bool { t := time.Time(e); return !t.IsZero() && !now.Before(t) }

// earliest returns the earliest non-zero time.
func earliest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}
