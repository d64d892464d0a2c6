package core

import (
	"testing"
	"time"
)

// The message timer follows the remote's measured answer time: the
// reference's 200 ms until a sample, longer for a slow remote (bounded),
// and back down when it speeds up.
func TestMessageRedoFollowsRTT(t *testing.T) {
	var r remote
	if got := r.messageRedo(); got.min != minMessageRedo || got.max != minMessageRedo*5/2 {
		t.Fatalf("no sample: %v..%v, want the reference's 200ms..500ms", got.min, got.max)
	}
	for range 20 {
		r.observeRTT(400 * time.Millisecond) // a loaded remote
	}
	slow := r.messageRedo().min
	if slow < 400*time.Millisecond || slow > time.Second {
		t.Fatalf("after 400 ms answers: %v", slow)
	}
	for range 50 {
		r.observeRTT(time.Minute)
	}
	if got := r.messageRedo().min; got != maxMessageRedo {
		t.Fatalf("after 1 min answers: %v, want the bound %v", got, maxMessageRedo)
	}
	for range 100 {
		r.observeRTT(time.Millisecond)
	}
	if got := r.messageRedo().min; got != minMessageRedo {
		t.Fatalf("after 1 ms answers: %v, want %v", got, minMessageRedo)
	}
}
