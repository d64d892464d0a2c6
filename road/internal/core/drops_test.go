package core

import (
	"fmt"
	"regexp"
	"testing"
)

// Every drop reason has its own stable snake_case name, and Counters
// reports each drop by it.
func TestDropReasonNames(t *testing.T) {
	seen := map[string]bool{}
	name := regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)
	for r := range numDropReasons {
		n := r.String()
		if !name.MatchString(n) || seen[n] {
			t.Errorf("reason %d: name %q (repeated: %v)", r, n, seen[n])
		}
		seen[n] = true
	}
	if got, want := numDropReasons.String(), fmt.Sprintf("drop(%d)", numDropReasons); got != want {
		t.Errorf("beyond the list: %q", got)
	}
	var s stats
	s.drop(dropUnsigned)
	s.drop(dropUnsigned)
	if c := s.snapshot(); len(c.Drops) != 1 || c.Drops["unsigned"] != 2 {
		t.Errorf("counters %v", c.Drops)
	}
}
