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

	// DefaultQueue is how many datagrams may wait for a rate-limited
	// direction's bandwidth when Impairment.Queue is zero (the default
	// transmit queue length of a Linux interface).
	DefaultQueue = 1000
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
	// clamped at zero. A link keeps its order, as a wire does: a copy
	// whose draw would overtake the one before it arrives just after it
	// instead, so datagrams sent closer together than the jitter see a
	// little more delay than drawn. JitterReorders lets them overtake, as
	// Linux netem's jitter does. (Fates has no clock and keeps the draws.)
	Jitter time.Duration

	// JitterReorders lets a copy with less jitter overtake one sent before
	// it, instead of keeping the link's order.
	JitterReorders bool

	// Rate is the direction's bandwidth in bits per second, zero for
	// unlimited. Datagrams leave a token bucket holding Burst bytes at this
	// rate; those waiting for it form a drop-tail queue of Queue
	// datagrams, and the delay applies after it, as on a real link.
	// Duplicates take bandwidth too. Fates has no clock and ignores it.
	Rate float64

	// Burst is how many bytes the token bucket holds: what may leave at
	// once after an idle spell. Zero means one datagram (the link
	// serializes every datagram at Rate).
	Burst int

	// Queue is how many datagrams may wait for the bandwidth; one more is
	// dropped (tail drop) and counted in LinkStats.ShaperDrops. Zero means
	// DefaultQueue.
	Queue int

	// Bursts adds loss in bursts (a Gilbert-Elliott channel) to the
	// independent Loss above; its zero value loses nothing.
	Bursts GilbertElliott

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
	if err := probabilities("", []named{{"Loss", imp.Loss}, {"Duplicate", imp.Duplicate}, {"Reorder", imp.Reorder}}); err != nil {
		return err
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
	if math.IsNaN(imp.Rate) || math.IsInf(imp.Rate, 0) || imp.Rate < 0 {
		return fmt.Errorf("netsim: impairment Rate %v is not a bandwidth", imp.Rate)
	}
	if imp.Burst < 0 || imp.Queue < 0 {
		return fmt.Errorf("netsim: impairment Burst %d or Queue %d is negative", imp.Burst, imp.Queue)
	}
	if err := imp.Bursts.validate(); err != nil {
		return err
	}
	return nil
}

// GilbertElliott is a two-state channel for loss in bursts: in the good
// state a datagram is lost with probability GoodLoss, in the bad state
// with BadLoss, and after each datagram the channel moves from good to bad
// with probability GoodToBad and back with BadToGood. Bursts of bad state
// last 1/BadToGood datagrams on average. The zero value never leaves the
// good state and loses nothing.
type GilbertElliott struct {
	GoodToBad float64 // p: probability of entering the bad state
	BadToGood float64 // r: probability of leaving it
	GoodLoss  float64 // 1-k: loss in the good state
	BadLoss   float64 // 1-h: loss in the bad state
}

// MeanLoss is the long-run fraction of datagrams the channel loses.
func (g GilbertElliott) MeanLoss() float64 {
	if g.GoodToBad == 0 {
		return g.GoodLoss
	}
	bad := g.GoodToBad / (g.GoodToBad + g.BadToGood)
	return bad*g.BadLoss + (1-bad)*g.GoodLoss
}

func (g GilbertElliott) validate() error {
	if err := probabilities("Bursts.", []named{{"GoodToBad", g.GoodToBad}, {"BadToGood", g.BadToGood},
		{"GoodLoss", g.GoodLoss}, {"BadLoss", g.BadLoss}}); err != nil {
		return err
	}
	if g.GoodToBad > 0 && g.BadToGood == 0 {
		return fmt.Errorf("netsim: impairment Bursts enters the bad state (GoodToBad %v) and never leaves it (BadToGood 0)", g.GoodToBad)
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
	if imp.Queue == 0 {
		imp.Queue = DefaultQueue
	}
	return imp
}

// named is a field's name and value, for error messages.
type named struct {
	name string
	v    float64
}

// probabilities checks that each value is within [0, 1].
func probabilities(prefix string, ps []named) error {
	for _, p := range ps {
		if math.IsNaN(p.v) || p.v < 0 || p.v > 1 {
			return fmt.Errorf("netsim: impairment %s%s %v is outside [0, 1]", prefix, p.name, p.v)
		}
	}
	return nil
}
