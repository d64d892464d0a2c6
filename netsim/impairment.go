package netsim

import (
	"fmt"
	"math"
	"time"
)

// Defaults used for the zero values of [Impairment] fields that would
// otherwise make no sense.
const (
	// DefaultReorderDelay is the extra delay given to a reordered datagram
	// when Impairment.ReorderDelay is zero.
	DefaultReorderDelay = 10 * time.Millisecond

	// DefaultLimit is the number of datagrams one direction may hold in
	// the delay queue when Impairment.Limit is zero (netem's default).
	DefaultLimit = 1000
)

// Impairment describes what happens to the datagrams that travel one way
// along a link. The zero value is a perfect link: nothing is lost,
// duplicated, reordered or delayed.
//
// Each datagram draws the same number of random values whatever the
// settings, so with a given Seed the n-th datagram's fate under one setting
// (say, whether it is lost) does not depend on the others (say, Duplicate).
type Impairment struct {
	// Loss is the probability, in [0, 1], that a datagram is dropped.
	// 1 drops everything: a partition.
	Loss float64

	// Duplicate is the probability, in [0, 1], that a datagram that is not
	// lost is delivered twice. Each copy gets its own delay and its own
	// reordering draw.
	Duplicate float64

	// Reorder is the probability, in [0, 1], that a copy is held back by an
	// extra ReorderDelay, so that datagrams sent after it overtake it.
	Reorder float64

	// Delay is the one-way delay added to every copy. Zero delivers at once
	// (in the sender's goroutine), preserving order.
	Delay time.Duration

	// Jitter varies each copy's delay uniformly within Delay ± Jitter,
	// clamped at zero, as netem does. Like netem's, it can reorder
	// datagrams that are sent closer together than the jitter.
	Jitter time.Duration

	// ReorderDelay is the extra delay given to a reordered copy. Zero means
	// DefaultReorderDelay.
	ReorderDelay time.Duration

	// Limit bounds how many copies this direction may hold in the delay
	// queue at once; a copy that would exceed it is dropped and counted in
	// LinkStats.QueueDrops. Zero means DefaultLimit.
	Limit int

	// Seed seeds the direction's pseudo-random source (PCG from
	// math/rand/v2). Zero is a seed like any other. Each direction of a
	// Relay draws from its own stream of Seed; a Network mixes Seed with
	// its own seed and the link's two addresses. The same seeds and the
	// same sequence of datagrams on a link give the same decisions.
	Seed uint64
}

// Validate reports whether imp is usable: probabilities within [0, 1] and
// no negative durations or limit.
func (imp Impairment) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"Loss", imp.Loss}, {"Duplicate", imp.Duplicate}, {"Reorder", imp.Reorder}} {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return fmt.Errorf("netsim: impairment %s %v is outside [0, 1]", p.name, p.v)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Delay", imp.Delay}, {"Jitter", imp.Jitter}, {"ReorderDelay", imp.ReorderDelay}} {
		if d.v < 0 {
			return fmt.Errorf("netsim: impairment %s %v is negative", d.name, d.v)
		}
	}
	if imp.Limit < 0 {
		return fmt.Errorf("netsim: impairment Limit %d is negative", imp.Limit)
	}
	return nil
}

// withDefaults returns imp with the documented zero-value defaults filled in.
func (imp Impairment) withDefaults() Impairment {
	if imp.ReorderDelay == 0 {
		imp.ReorderDelay = DefaultReorderDelay
	}
	if imp.Limit == 0 {
		imp.Limit = DefaultLimit
	}
	return imp
}
