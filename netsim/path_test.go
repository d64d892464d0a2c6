package netsim

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestImpairmentValidate(t *testing.T) {
	valid := []Impairment{
		{},
		{Loss: 1, Duplicate: 1, Reorder: 1},
		{Delay: time.Second, Jitter: time.Second, ReorderDelay: time.Second, Limit: 5, Seed: 7},
	}
	for _, imp := range valid {
		if err := imp.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", imp, err)
		}
	}
	invalid := []struct {
		imp  Impairment
		want string
	}{
		{Impairment{Loss: -0.1}, "Loss"},
		{Impairment{Loss: 1.01}, "Loss"},
		{Impairment{Duplicate: math.NaN()}, "Duplicate"},
		{Impairment{Reorder: 2}, "Reorder"},
		{Impairment{Delay: -1}, "Delay"},
		{Impairment{Jitter: -1}, "Jitter"},
		{Impairment{ReorderDelay: -1}, "ReorderDelay"},
		{Impairment{Limit: -1}, "Limit"},
	}
	for _, tc := range invalid {
		err := tc.imp.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.imp, err, tc.want)
		}
	}
}

// within reports whether got is within 5 standard deviations of the
// binomial mean n*p.
func within(got uint64, n int, p float64) bool {
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	return math.Abs(float64(got)-mean) <= 5*sd
}

func TestDecideRates(t *testing.T) {
	const n = 20000
	imp := Impairment{Loss: 0.1, Duplicate: 0.05, Reorder: 0.2, Seed: 42}
	p := newPath(imp, 0, 1)
	for range n {
		p.decide()
	}
	s := p.stats.snapshot()
	// The exact counts for this seed: a change here means the random
	// sequence changed, and with it every recorded failing seed.
	want := LinkStats{Received: n, Dropped: 1953, Duplicated: 917, Reordered: 3788}
	if s != want {
		t.Errorf("stats = %+v, want %+v", s, want)
	}
	kept := int(s.Received - s.Dropped)
	copies := int(s.Received - s.Dropped + s.Duplicated)
	if !within(s.Dropped, n, imp.Loss) {
		t.Errorf("dropped %d of %d, want about %v", s.Dropped, n, imp.Loss*n)
	}
	if !within(s.Duplicated, kept, imp.Duplicate) {
		t.Errorf("duplicated %d of %d, want about %v", s.Duplicated, kept, imp.Duplicate*float64(kept))
	}
	if !within(s.Reordered, copies, imp.Reorder) {
		t.Errorf("reordered %d of %d copies, want about %v", s.Reordered, copies, imp.Reorder*float64(copies))
	}
}

func TestDecideExtremes(t *testing.T) {
	all := newPath(Impairment{Loss: 1}, 0, 1)
	none := newPath(Impairment{Duplicate: 1, Reorder: 1, Delay: time.Millisecond}, 0, 1)
	for range 1000 {
		if f := all.decide(); f.n != 0 {
			t.Fatalf("Loss 1 delivered %d copies", f.n)
		}
		f := none.decide()
		if f.n != 2 {
			t.Fatalf("Duplicate 1 delivered %d copies, want 2", f.n)
		}
		for _, c := range f.copies {
			if !c.reordered || c.delay != time.Millisecond+DefaultReorderDelay {
				t.Fatalf("Reorder 1 copy = %+v, want reordered with delay %v", c, time.Millisecond+DefaultReorderDelay)
			}
		}
	}
}

func TestDecideJitterBounds(t *testing.T) {
	imp := Impairment{Delay: 10 * time.Millisecond, Jitter: 4 * time.Millisecond, Seed: 3}
	p := newPath(imp, 0, 1)
	var lo, hi time.Duration = time.Hour, 0
	for range 5000 {
		d := p.decide().copies[0].delay
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 6*time.Millisecond || hi > 14*time.Millisecond {
		t.Errorf("delays in [%v, %v], want within [6ms, 14ms]", lo, hi)
	}
	if lo > 7*time.Millisecond || hi < 13*time.Millisecond {
		t.Errorf("delays in [%v, %v], want them to spread over most of [6ms, 14ms]", lo, hi)
	}

	clamp := newPath(Impairment{Delay: time.Millisecond, Jitter: 5 * time.Millisecond}, 0, 1)
	for range 1000 {
		if d := clamp.decide().copies[0].delay; d < 0 {
			t.Fatalf("delay %v is negative", d)
		}
	}
}

// fates draws n fates from a fresh path.
func fates(imp Impairment, salt, stream uint64, n int) []fate {
	p := newPath(imp, salt, stream)
	out := make([]fate, n)
	for i := range out {
		out[i] = p.decide()
	}
	return out
}

// lossPattern returns which of the fates are losses.
func lossPattern(fs []fate) []bool {
	out := make([]bool, len(fs))
	for i, f := range fs {
		out[i] = f.n == 0
	}
	return out
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDecideDeterministic(t *testing.T) {
	const n = 2000
	imp := Impairment{Loss: 0.3, Duplicate: 0.2, Reorder: 0.2, Delay: time.Millisecond, Jitter: time.Millisecond, Seed: 99}
	a, b := fates(imp, 5, 1, n), fates(imp, 5, 1, n)
	if !equal(a, b) {
		t.Fatal("same seed, salt and stream gave different fates")
	}
	other := imp
	other.Seed++
	if equal(lossPattern(a), lossPattern(fates(other, 5, 1, n))) {
		t.Error("a different seed gave the same losses")
	}
	if equal(lossPattern(a), lossPattern(fates(imp, 5, 2, n))) {
		t.Error("a different stream gave the same losses")
	}
	if equal(lossPattern(a), lossPattern(fates(imp, 6, 1, n))) {
		t.Error("a different salt gave the same losses")
	}
	// Every datagram draws the same values whatever the settings, so the
	// loss pattern does not depend on the other probabilities.
	plain := imp
	plain.Duplicate, plain.Reorder, plain.Jitter = 0, 0, 0
	if !equal(lossPattern(a), lossPattern(fates(plain, 5, 1, n))) {
		t.Error("changing Duplicate, Reorder and Jitter changed the losses")
	}
}

func TestPathSet(t *testing.T) {
	const n = 1000
	imp := Impairment{Loss: 0.5, Seed: 1}
	ref := lossPattern(fates(imp, 0, 1, 2*n))

	// Changing the probabilities keeps the sequence going.
	p := newPath(imp, 0, 1)
	for range n {
		p.decide()
	}
	p.set(Impairment{Loss: 0.5, Delay: time.Second, Seed: 1})
	var got []bool
	for range n {
		got = append(got, p.decide().n == 0)
	}
	if !equal(got, ref[n:]) {
		t.Error("set with the same seed restarted or changed the sequence")
	}

	// Changing the seed restarts from the new one.
	p.set(Impairment{Loss: 0.5, Seed: 2})
	fresh := lossPattern(fates(Impairment{Loss: 0.5, Seed: 2}, 0, 1, n))
	got = got[:0]
	for range n {
		got = append(got, p.decide().n == 0)
	}
	if !equal(got, fresh) {
		t.Error("set with a new seed did not restart from it")
	}
}

// Fates draws what a path decides: nothing for a lost datagram, two delays
// for a duplicated one, Delay (plus ReorderDelay when reordered) for each.
func TestFates(t *testing.T) {
	if _, err := NewFates(Impairment{Loss: 2}); err == nil {
		t.Fatal("a loss of 2 was taken")
	}
	lost, err := NewFates(Impairment{Loss: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if d := lost.Next(nil); len(d) != 0 {
			t.Fatalf("a partition delivered %v", d)
		}
	}
	if st := lost.Stats(); st.Received != 100 || st.Dropped != 100 {
		t.Fatalf("partition stats %+v", st)
	}
	dup, err := NewFates(Impairment{Duplicate: 1, Reorder: 1, Delay: time.Millisecond, ReorderDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	d := dup.Next(nil)
	if len(d) != 2 || d[0] != 6*time.Millisecond || d[1] != 6*time.Millisecond {
		t.Fatalf("duplicated and reordered: %v", d)
	}
}

// NextAt adds what needs a clock: a datagram waits for the rate, the queue
// before the rate drops at its tail, jitter keeps the order, and Set
// changes the settings from the next datagram on.
func TestFatesNextAt(t *testing.T) {
	f, err := NewFates(Impairment{Delay: 10 * time.Millisecond, Jitter: 5 * time.Millisecond, Rate: 8e6, Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	send := 1000 * time.Microsecond // 1000 bytes at 8 Mbit/s
	var last time.Time
	var got []time.Duration
	for i := range 4 { // four at once: one leaves, two wait, the fourth is dropped
		got = f.NextAt(got[:0], now, 1000)
		if i == 3 {
			if len(got) != 0 {
				t.Fatalf("datagram 4 of a burst into a queue of 2: %v, want dropped", got)
			}
			break
		}
		if len(got) != 1 {
			t.Fatalf("datagram %d: %d copies", i, len(got))
		}
		at := now.Add(got[0])
		// Its own sending time and those before it, the delay, at most the jitter.
		least := time.Duration(i+1)*send + 5*time.Millisecond
		if got[0] < least || got[0] > least+10*time.Millisecond || at.Before(last) {
			t.Fatalf("datagram %d: delay %v, want %v plus up to 10ms, not before %v", i, got[0], least, last.Sub(now))
		}
		last = at
	}
	if s := f.Stats(); s.ShaperDrops != 1 || s.Received != 4 {
		t.Fatalf("stats %+v, want 4 received and 1 dropped at the queue", s)
	}
	if err := f.Set(Impairment{Loss: 1}); err != nil {
		t.Fatal(err)
	}
	if got = f.NextAt(got[:0], now.Add(time.Second), 1000); len(got) != 0 {
		t.Fatalf("after Set(Loss 1): %v", got)
	}
	if err := f.Set(Impairment{Loss: 2}); err == nil {
		t.Fatal("Set accepted Loss 2")
	}
}
