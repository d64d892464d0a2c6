package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/raet-go/raet/plugins/sdk"
)

// DefaultMaxBytesInFlight is the default of Config.MaxBytesInFlight: room
// for two calls of the largest size at once, or three small ones (each
// reserves the largest answer, sdk.MaxCallSize), so that a plugin's answers
// cost the host at most that much whatever it answers.
const DefaultMaxBytesInFlight = 4 * sdk.MaxCallSize

// ErrOverBudget: a call to a serializer or coat plugin found no room in its
// bytes in flight (Config.MaxBytesInFlight) before its deadline, or the
// batch it belongs to already holds answers and the room left would not take
// the next part's (it fails at once rather than wait holding them, which two
// such batches would do for each other).
var ErrOverBudget = errors.New("raet: plugin bytes in flight over budget")

// budget bounds the bytes of one plugin's calls in flight: each call
// reserves its request and the largest answer it may carry
// (sdk.MaxCallSize), keeps its answer's actual size once it came, and
// gives that back when the batch it belongs to returns to its caller.
type budget struct {
	max int64 // <= 0: no bound

	mu   sync.Mutex
	used int64
	wake chan struct{} // closed at each release
}

func newBudget(max int64) *budget { return &budget{max: max, wake: make(chan struct{})} }

// acquire reserves n bytes, waiting for room up to wait or until ctx
// ends, unless holding (the caller keeps answers already: it fails at
// once). A call finds room when nothing is in flight, whatever n.
func (b *budget) acquire(ctx context.Context, wait time.Duration, n int64, holding bool) error {
	var timer *time.Timer
	var expired <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		b.mu.Lock()
		if b.max <= 0 || b.used == 0 || b.used+n <= b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		used, wake := b.used, b.wake
		b.mu.Unlock()
		if holding {
			return fmt.Errorf("%w: %d bytes in flight, %d more asked, at most %d, while holding answers", ErrOverBudget, used, n, b.max)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			expired = timer.C
		}
		select {
		case <-wake:
		case <-expired:
			return fmt.Errorf("%w: %d bytes in flight, %d more asked, at most %d, for %v", ErrOverBudget, used, n, b.max, wait)
		case <-ctx.Done():
			return fmt.Errorf("%w: %d bytes in flight, %d more asked, at most %d: %w", ErrOverBudget, used, n, b.max, ctx.Err())
		}
	}
}

// release gives back n bytes.
func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// inFlight returns the bytes reserved or held now.
func (b *budget) inFlight() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// budgeted runs the calls of one batch (batched's fn, sub by sub) under
// p's budget: each call reserves its request and the largest answer, keeps
// its answer's size, and what the batch holds is given back when it
// returns.
func (p *proc) budgeted(ctx context.Context, op string, items [][]byte,
	call func(sub [][]byte) ([]sdk.Result, error)) ([]sdk.Result, error) {
	var held int64
	defer func() { p.budget.release(held) }()
	return batched(items, func(sub [][]byte, _ []int) ([]sdk.Result, error) {
		var req int64
		for _, it := range sub {
			req += int64(len(it))
		}
		n := req + sdk.MaxCallSize
		if err := p.budget.acquire(ctx, p.timeout, n, held > 0); err != nil {
			return nil, &CallError{Plugin: p.spec.Name, Op: op, Err: err}
		}
		rs, err := call(sub)
		var ans int64
		if err == nil {
			for _, r := range rs {
				ans += int64(len(r.Data))
			}
		}
		p.budget.release(n - ans)
		held += ans
		return rs, err
	})
}
