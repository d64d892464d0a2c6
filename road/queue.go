package road

import (
	"context"
	"fmt"
	"time"

	"github.com/raet-go/raet/road/internal/core"
)

// resendQueued starts sending again the messages the Queue held at Start,
// or, with none, says they are all sent (WaitPending).
func (s *Stack) resendQueued() {
	var pending []QueuedMessage
	if s.cfg.Queue != nil {
		var err error
		if pending, err = s.cfg.Queue.Pending(); err != nil {
			s.cfg.Logger.Error("raet: queue: pending messages", "err", err)
		}
	}
	if len(pending) == 0 {
		close(s.resent)
		return
	}
	for _, m := range pending {
		s.mids.hold(m.Remote, m.ID) // not done: the floor stays below it
	}
	s.wg.Add(1)
	go s.resendPending(pending)
}

// WaitPending waits until the messages the Queue held at Start (those of
// an earlier run: sent again as soon as their remote is allowed) have been
// sent again, and returns how many of them are done and how many failed
// again (still queued for the next Start). Without a Queue, or with
// nothing pending, it returns at once; before Start, ErrNotStarted.
func (s *Stack) WaitPending(ctx context.Context) (done, failed int, err error) {
	select {
	case <-s.started:
	default:
		return 0, 0, ErrNotStarted
	}
	select {
	case <-s.resent:
		return int(s.resentDone.Load()), int(s.resentFailed.Load()), nil
	case <-ctx.Done():
		return int(s.resentDone.Load()), int(s.resentFailed.Load()), ctx.Err()
	case <-s.closing:
		return int(s.resentDone.Load()), int(s.resentFailed.Load()), ErrClosed
	}
}

// resendPending sends the messages a queue kept from an earlier run, each
// once its remote is allowed, and tells the queue when each is done. It
// ends with the stack.
func (s *Stack) resendPending(pending []QueuedMessage) {
	defer s.wg.Done()
	completed := false
	defer func() {
		if completed {
			close(s.resent)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	for _, m := range pending {
		for {
			r, err := s.remoteInfo(ctx, func(c *core.Core) (core.Remote, bool) { return c.RemoteNamed(m.Remote) })
			if err == nil && r.Allowed {
				break
			}
			select {
			case <-time.After(100 * time.Millisecond):
			case <-s.closing:
				return
			}
		}
		mid, _ := s.beginID(m.Remote, m.ID, 0)
		c := &Call{To: m.Remote, Done: make(chan *Call, 1), s: s, plain: m.Body, kind: m.Kind, mid: mid, qid: m.ID}
		err := s.takeRoom(ctx)
		if err == nil {
			err = s.post(c)
		}
		if err == nil {
			err = s.await(ctx, c) // done: the queue goroutine told the Queue
		}
		if err != nil {
			s.cfg.Logger.Warn("raet: queued message not sent", "remote", m.Remote, "id", m.ID, "err", err)
			s.resentFailed.Add(1)
			continue // stays queued for the next run
		}
		s.resentDone.Add(1)
	}
	completed = true
}

// doneQueued forgets a queued message its remote has.
func (s *Stack) doneQueued(remote string, id uint64) error {
	s.mids.done(remote, id)
	if err := s.cfg.Queue.Done(id); err != nil {
		s.cfg.Logger.Error("raet: queue: done", "id", id, "err", err)
		return err
	}
	return nil
}

// queueLoop is the queue goroutine of a stack with a Queue: it tells the
// Queue which messages are done (a call that may be slow: disk, or a
// plugin), off the owner goroutine, and then hands their Calls over.
func (s *Stack) queueLoop() {
	defer s.wg.Done()
	for {
		select {
		case <-s.queueWake:
			s.forgetQueued()
		case <-s.closing:
			return
		}
	}
}

// forgetQueued tells the Queue that the messages of the Calls waiting in
// queueDone are done, and hands the Calls over.
func (s *Stack) forgetQueued() {
	s.queueMu.Lock()
	q := s.queueDone
	s.queueDone = nil
	s.queueMu.Unlock()
	for _, c := range q {
		if err := s.doneQueued(c.To, c.qid); err != nil {
			c.Err = fmt.Errorf("raet: message done, but the queue did not forget it: %w", err)
		}
		s.handOver(c)
	}
}
