// Package replay is a sliding-window replay filter for 64-bit packet
// counters, in the manner of WireGuard's replay filter (RFC 6479's bitmap of
// blocks): it accepts each counter once, in any order within Window of the
// highest counter accepted, and refuses the rest.
package replay

// Window is how far behind the highest accepted counter a counter may be and
// still be accepted once: 8,128 counters (a ring of up to 128 words of 64
// bits, 1 KiB, less the word the top is in).
const Window = (words - 1) * 64

const words = 128

// Filter records which counters were accepted. The zero value is an empty
// filter ready to use. It is not safe for concurrent use.
//
// Its ring holds the words from the oldest one with a counter not yet
// accepted up to the top's, so a session whose packets arrive in order
// keeps one word (8 bytes), and one with losses or reordering up to 128: a
// word is dropped early only when every counter in it was accepted, so a
// counter within Window below the ring is seen, and the filter says of
// every counter what a full ring would.
type Filter struct {
	top  uint64   // the highest counter accepted (0 when none yet)
	span uint64   // the words covered: the top's and span-1 below it
	bits []uint64 // the ring, word w at w % len(bits), a power of two; nil: empty
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
	if n > f.top || f.bits == nil {
		return Fresh
	}
	if f.top-n >= Window {
		return TooOld
	}
	if f.top/64-n/64 >= f.span {
		return Seen // a word dropped early: every counter of it was accepted
	}
	if f.bits[n/64%uint64(len(f.bits))]&(1<<(n%64)) != 0 {
		return Seen
	}
	return Fresh
}

// Accept records n and returns Fresh, or returns Seen or TooOld and
// records nothing. Call it only for an authenticated packet, so that a
// forged counter cannot move the window.
func (f *Filter) Accept(n uint64) Verdict {
	if f.bits == nil {
		f.bits, f.span = make([]uint64, 1), 1 // word 0, empty
	}
	if n > f.top {
		f.slide(n)
	} else if v := f.Check(n); v != Fresh {
		return v
	}
	f.bits[n/64%uint64(len(f.bits))] |= 1 << (n % 64)
	return Fresh
}

// slide moves the top up to n: the ring grows to keep every word from the
// oldest with a counter not yet accepted (the counters skipped are among
// them), and shrinks while its older half has none.
func (f *Filter) slide(n uint64) {
	adv := n/64 - f.top/64
	if adv > 0 {
		need := adv
		for k := range f.span {
			if f.bits[(f.top/64-(f.span-1)+k)%uint64(len(f.bits))] != ^uint64(0) {
				need += f.span - k
				break
			}
		}
		if l := len(f.bits); uint64(l) < need && l < words {
			for uint64(l) < need && l < words {
				l *= 2
			}
			f.resize(l, f.top/64, f.span)
		}
		l := uint64(len(f.bits))
		for k := range min(adv, l) {
			f.bits[(n/64-k)%l] = 0
		}
		f.span = min(f.span+adv, l)
		for l > 1 {
			keep := min(f.span, l/2)
			full := true
			for k := range f.span - keep {
				full = full && f.bits[(n/64-(f.span-1)+k)%l] == ^uint64(0)
			}
			if !full {
				break
			}
			f.span, l = keep, l/2
			f.resize(int(l), n/64, keep)
		}
	}
	f.top = n
}

// resize lays the span words up to word top out in a ring of n words.
func (f *Filter) resize(n int, top, span uint64) {
	bits := make([]uint64, n)
	for k := range span {
		bits[(top-k)%uint64(n)] = f.bits[(top-k)%uint64(len(f.bits))]
	}
	f.bits = bits
}

// Reset empties the filter, for a new key.
func (f *Filter) Reset() { *f = Filter{} }
