// Package replay is a sliding-window replay filter for 64-bit packet
// counters, in the manner of WireGuard's replay filter (RFC 6479's bitmap of
// blocks): it accepts each counter once, in any order within Window of the
// highest counter accepted, and refuses the rest.
package replay

// Window is how far behind the highest accepted counter a counter may be and
// still be accepted once: 8,128 counters (a ring of 128 words of 64 bits,
// 1 KiB, less the word the top is in).
const Window = (words - 1) * 64

const words = 128

// Filter records which counters were accepted. The zero value is an empty
// filter ready to use. It is not safe for concurrent use.
type Filter struct {
	top  uint64 // the highest counter accepted (0 when none yet)
	bits [words]uint64
}

// Verdict is what a filter says of a counter.
type Verdict uint8

// The verdicts.
const (
	Fresh  Verdict = iota // not seen, within the window or ahead of it
	Seen                  // accepted before: a replay
	TooOld                // behind the window: refused unseen
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case Fresh:
		return "fresh"
	case Seen:
		return "seen"
	case TooOld:
		return "too old"
	}
	return "verdict(?)"
}

// Check says what Accept would say of n, and records nothing. Use it to
// refuse a packet before the work of authenticating it.
func (f *Filter) Check(n uint64) Verdict {
	if n > f.top {
		return Fresh
	}
	if f.top-n >= Window {
		return TooOld
	}
	if f.bits[n/64%words]&(1<<(n%64)) != 0 {
		return Seen
	}
	return Fresh
}

// Accept records n and returns Fresh, or returns Seen or TooOld and
// records nothing. Call it only for an authenticated packet, so that a
// forged counter cannot move the window.
func (f *Filter) Accept(n uint64) Verdict {
	if n > f.top {
		// Slide: clear the words the window moves into.
		from, to := f.top/64, n/64
		if to-from >= words {
			clear(f.bits[:])
		} else {
			for b := from + 1; b <= to; b++ {
				f.bits[b%words] = 0
			}
		}
		f.top = n
	} else if v := f.Check(n); v != Fresh {
		return v
	}
	f.bits[n/64%words] |= 1 << (n % 64)
	return Fresh
}

// Reset empties the filter, for a new key.
func (f *Filter) Reset() { *f = Filter{} }
