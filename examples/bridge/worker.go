package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/raet-go/raet/lane"
)

// serveWorker is the task of a worker yard: it answers every envelope
// {"estate": E, "body": B} with
//
//	{"estate": E, "body": {"yard": NAME, "pid": PID, "n": N, "echo": B}}
//
// sent back to the yard it came from (the bridge), N counting the
// envelopes answered. It logs notices and anything else it gets, and
// answers neither. It returns when ctx ends or the stack is closed.
func serveWorker(ctx context.Context, st *lane.Stack, log *slog.Logger) {
	pid := os.Getpid()
	n := 0
	for {
		var m lane.Message
		var ok bool
		select {
		case m, ok = <-st.Receive():
			if !ok {
				return
			}
		case <-ctx.Done():
			return
		}
		estate, _ := m.Body[keyEstate].(string)
		body, isMap := m.Body[keyBody].(map[string]any)
		switch {
		case estate == "":
			log.Warn("worker: not an envelope", "yard", st.Name(), "from", m.From)
			continue
		case !isMap:
			log.Warn("worker: notice from the bridge", "yard", st.Name(), "estate", estate, "error", m.Body[keyError])
			continue
		}
		n++
		reply := map[string]any{keyEstate: estate, keyBody: map[string]any{
			"yard": st.Name(), "pid": pid, "n": n, "echo": body}}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := st.Send(sctx, m.From, reply)
		cancel()
		if err != nil && ctx.Err() == nil {
			log.Warn("worker: reply not sent", "yard", st.Name(), "to", m.From, "err", err)
		}
	}
}
