package core

import (
	"testing"
	"time"
)

// The join log lines are bounded: a burst, then joinLogRate a second, and
// the next line after a gap says how many were left out.
func TestJoinLogBudget(t *testing.T) {
	var b logBudget
	now := time.Unix(1000, 0)
	logged := 0
	for range 1000 {
		if _, ok := b.take(now); ok {
			logged++
		}
	}
	if logged != joinLogBurst {
		t.Fatalf("%d of 1000 lines at once logged, want %d", logged, joinLogBurst)
	}
	suppressed, ok := b.take(now.Add(time.Second / joinLogRate))
	if !ok || suppressed != 1000-joinLogBurst {
		t.Fatalf("after a gap: logged %v, %d suppressed before", ok, suppressed)
	}
}
