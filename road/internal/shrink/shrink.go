// Package shrink gives back the room of maps that grew at a peak, and
// keeps a few emptied ones for reuse (Spares).
//
// Go's maps never shrink: one that held ten thousand entries keeps their
// room once they are gone, until it is replaced by a new map of what it
// still holds. A Peak says when that is worth doing: once the map holds a
// quarter of its peak or less, so that rebuilding it costs at most a third
// of the deletions since (O(1) a deletion, amortized), and not when its
// peak fits the least room a map takes (Small), of which there is nothing
// to give back.
package shrink

// Small is the most entries a map holds in its least room (one group of
// eight slots).
const Small = 8

// Peak is the most entries a map held since it was made or rebuilt, or
// the most of maps that grow and empty together (those of one key, say).
// The zero value is ready to use.
type Peak struct{ n int }

// Note records that the map holds n entries: call it as it grows.
func (p *Peak) Note(n int) { p.n = max(p.n, n) }

// Due reports whether a map that holds n entries, fewer than at its peak,
// is to be rebuilt (Map, then Rebuilt): it holds a quarter of its peak or
// less, and the peak was beyond Small.
func (p *Peak) Due(n int) bool { return p.n > Small && n <= p.n/4 }

// Rebuilt records that the map was rebuilt holding n entries.
func (p *Peak) Rebuilt(n int) { p.n = n }

// Map returns a new map with m's entries, in the room they need
// (maps.Clone keeps the room of m).
func Map[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Spares keeps emptied things (maps, slices and what holds them) for the
// next to need one, up to Max: what many holders take and give back in
// bursts (many emptied, then as many filled) is then not made anew for
// each. The zero value keeps none; set Max.
type Spares[T any] struct {
	Max int
	s   []T
}

// Get returns a spare, or ok false when there is none.
func (p *Spares[T]) Get() (v T, ok bool) {
	n := len(p.s)
	if n == 0 {
		return v, false
	}
	v, p.s[n-1] = p.s[n-1], v
	p.s = p.s[:n-1]
	return v, true
}

// Put keeps v, emptied, unless Max are kept.
func (p *Spares[T]) Put(v T) {
	if len(p.s) < p.Max {
		p.s = append(p.s, v)
	}
}

// Len is how many are kept.
func (p *Spares[T]) Len() int { return len(p.s) }

// All yields those kept.
func (p *Spares[T]) All(yield func(T) bool) {
	for _, v := range p.s {
		if !yield(v) {
			return
		}
	}
}

// Drop gives back all kept and their room.
func (p *Spares[T]) Drop() { p.s = nil }
