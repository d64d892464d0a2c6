package bus_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/protocol"
)

// The attacks of issue 32 on jobs and requests, by a joined peer that
// speaks raw envelopes on its transport (no Node behind it): what a hostile
// or broken estate can send, not what the bus API lets it.

// rawSend sends envelope e from a hostile transport.
func rawSend(t *testing.T, from *bus.MemTransport, to string, e envelope.Envelope) {
	t.Helper()
	e.Version = envelope.Version
	if err := from.Send(t.Context(), to, e.Map()); err != nil {
		t.Fatalf("%s: %v", from.Name(), err)
	}
}

// memPeers makes transports named names on a new MemNet of queue queue,
// closed at cleanup.
func memPeers(t *testing.T, queue int, names ...string) []*bus.MemTransport {
	net := bus.NewMemNet(queue)
	var trs []*bus.MemTransport
	for _, name := range names {
		tr, err := net.Transport(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		trs = append(trs, tr)
	}
	return trs
}

// answerHellos answers the hellos that ask for an answer, as a live bus peer
// does, and ignores everything else (jobs are never acknowledged), until the
// transport closes.
func answerHellos(tr *bus.MemTransport) {
	for {
		select {
		case m := <-tr.Receive():
			var e envelope.Envelope
			if envelope.Decode(m.Body, &e) != nil || e.Kind != protocol.BusKindHello || !e.Reply {
				continue
			}
			rep := envelope.Envelope{Version: envelope.Version, Kind: protocol.BusKindHello, Epoch: 7, Time: e.Time}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = tr.Send(ctx, m.From, rep.Map())
			cancel()
		case <-tr.Done():
			return
		}
	}
}

// Attack 1: a peer that never pulled sends done for every job in flight,
// with its own body. None is counted: every job is reported once, by the
// puller it went to, with that puller's result, and the puller is handed no
// job beyond its credit.
func TestAttackForgedDones(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trs := memPeers(t, 0, "pusher", "worker", "mallory")
		pusher := newNode(t, trs[0], &bus.Config{Heartbeat: -1})
		worker := newNode(t, trs[1], &bus.Config{Heartbeat: -1})
		release := make(chan struct{})
		if _, err := worker.Pull([]string{"pusher"}, 4, func(ctx context.Context, j *bus.Job) (any, error) {
			<-release
			return fmt.Sprint("real ", j.Body), nil
		}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		const n = 20
		ids := map[uint64]int{}
		for i := range n {
			id, err := pusher.Push(t.Context(), "job", i)
			if err != nil {
				t.Fatal(err)
			}
			ids[id] = i
		}
		synctest.Wait() // the worker holds 4 jobs, 16 wait
		for id := range ids {
			rawSend(t, trs[2], "pusher", envelope.Envelope{Kind: protocol.BusKindDone, ID: id, Body: "forged"})
		}
		synctest.Wait()
		close(release)
		for range n {
			r := <-pusher.Results()
			if r.Puller != "worker" || r.Body != fmt.Sprint("real ", ids[r.ID]) {
				t.Fatalf("job %d reported %+v", r.ID, r)
			}
		}
		st := pusher.Stats().Pusher
		if st.Forged != n || st.Done != n || st.Duplicates != 0 {
			t.Fatalf("pusher stats %+v: want the %d forged dones refused", st, n)
		}
		if bad := worker.Stats().BadEnvelope; bad != 0 {
			t.Fatalf("the worker dropped %d jobs beyond its credit", bad)
		}
	})
}

// Attack 3: 20,000 requests for a subject nobody serves from a peer that
// never reads its answers. The responder holds one goroutine and
// Config.MaxPeerAnswers answers for it (the rest are dropped and counted), a
// legitimate requester beside it is answered, and when the peer leaves the
// goroutines are back where they were.
func TestAttackUnreadAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trs := memPeers(t, 64, "server", "alice", "mallory")
		cfg := &bus.Config{Heartbeat: -1, MaxPeerAnswers: 128}
		server := newNode(t, trs[0], cfg)
		alice := newNode(t, trs[1], cfg)
		if _, err := server.Serve("echo", echo("server"), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Request(t.Context(), "server", "echo", "hi"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		before := runtime.NumGoroutine()
		const n = 20_000
		for i := range n {
			rawSend(t, trs[2], "server", envelope.Envelope{Kind: protocol.BusKindReq, ID: uint64(i + 1),
				Subject: "nobody.serves", Deadline: 60_000})
		}
		synctest.Wait()
		during := runtime.NumGoroutine()
		rep, err := alice.Request(t.Context(), "server", "echo", "still there")
		if err != nil {
			t.Fatalf("a legitimate request beside the hostile one: %v", err)
		}
		if b := rep.Body.(map[string]any)["echo"]; b != "still there" {
			t.Fatalf("reply %+v", rep)
		}
		st := server.Stats().Responder
		t.Logf("goroutines %d before, %d under %d unread requests; responder %+v", before, during, n, st)
		// One sender for mallory's answers (blocked), the few a Send and
		// the MemNet use; not one per answer.
		if during > before+8 {
			t.Fatalf("%d goroutines under %d unread requests, %d before", during, n, before)
		}
		// The queue's 128 and the ones in mallory's transport queue (64) and
		// in the sender's hand are not dropped; all the others are.
		if st.AnswerDrops < n-128-64-8 || st.Requests != n+2 {
			t.Fatalf("responder stats %+v", st)
		}
		trs[2].Leave()
		// A Send to the peer already under way when it left ends at the
		// latest at its answer's deadline (60 s of the fake clock).
		for i := 0; ; i++ {
			synctest.Wait()
			after := runtime.NumGoroutine()
			if after <= before {
				break
			}
			if i == 61 {
				t.Fatalf("%d goroutines %d s after the peer left, %d before", after, i, before)
			}
			time.Sleep(time.Second)
		}
		if st := server.Stats().Responder; st.Peers != 0 {
			t.Fatalf("responder keeps state for %d peers after the hostile one left", st.Peers)
		}
	})
}

// Attack 3, served subject: a peer sends 1,000 requests to a slow service.
// It holds Config.MaxPeerRequests of them and the rest are refused; a
// legitimate requester still finds room in the service, and its own
// requests beyond the budget are refused with ErrRequestBudget.
func TestAttackRequestsHoldTheirShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trs := memPeers(t, 0, "server", "alice", "mallory")
		cfg := &bus.Config{Heartbeat: -1, MaxPeerRequests: 32}
		server := newNode(t, trs[0], cfg)
		alice := newNode(t, trs[1], cfg)
		release := make(chan struct{})
		if _, err := server.Serve("slow", func(ctx context.Context, r *bus.Request) (any, error) {
			if r.From == "mallory" || r.Body == "hold" {
				<-release
			}
			return r.Body, nil
		}, &bus.ServeOptions{Concurrency: 48, Backlog: 100}); err != nil {
			t.Fatal(err)
		}
		go answerHellos(trs[2])
		const n = 1000
		for i := range n {
			rawSend(t, trs[2], "server", envelope.Envelope{Kind: protocol.BusKindReq, ID: uint64(i + 1),
				Subject: "slow", Deadline: 60_000})
		}
		synctest.Wait()
		for i := range 10 {
			rep, err := alice.Request(t.Context(), "server", "slow", i)
			if err != nil {
				t.Fatalf("a legitimate request beside the hostile ones: %v", err)
			}
			if fmt.Sprint(rep.Body) != fmt.Sprint(i) {
				t.Fatalf("reply %+v", rep)
			}
		}
		if st := server.Stats().Responder; st.OverBudget != n-32 {
			t.Fatalf("responder stats %+v: want %d refused over the budget of 32", st, n-32)
		}
		errs := make(chan error, 33)
		for range 33 {
			go func() {
				_, err := alice.Request(t.Context(), "server", "slow", "hold")
				errs <- err
			}()
		}
		synctest.Wait()
		close(release)
		refused := 0
		for range 33 {
			if err := <-errs; errors.Is(err, bus.ErrRequestBudget) {
				refused++
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if refused != 1 {
			t.Fatalf("%d of 33 requests refused with ErrRequestBudget over a budget of 32, want 1", refused)
		}
		trs[2].Leave()
		synctest.Wait()
	})
}

// greedyRun pushes n jobs to a pusher with a legitimate puller (credit 2,
// 10 ms a job) and, when greedy, a hostile one that offers a credit of
// 2^31, answers hellos and never reports a job done. It returns how long
// the legitimate puller took alone (zero when greedy) and how many jobs it
// finished within within.
func greedyRun(t *testing.T, n int, greedy bool, within time.Duration) (took time.Duration, done int) {
	trs := memPeers(t, 0, "pusher", "worker", "mallory")
	pusher := newNode(t, trs[0], &bus.Config{Heartbeat: time.Second, JobTimeout: 30 * time.Second})
	worker := newNode(t, trs[1], &bus.Config{Heartbeat: time.Second})
	if _, err := worker.Pull([]string{"pusher"}, 2, func(ctx context.Context, j *bus.Job) (any, error) {
		time.Sleep(10 * time.Millisecond)
		return j.Body, nil
	}); err != nil {
		t.Fatal(err)
	}
	go answerHellos(trs[2])
	if greedy {
		rawSend(t, trs[2], "pusher", envelope.Envelope{Kind: protocol.BusKindReady, Credit: 1 << 31})
	}
	synctest.Wait()
	start := time.Now()
	for i := range n {
		if _, err := pusher.Push(t.Context(), "job", i); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.After(within)
	for {
		select {
		case r := <-pusher.Results():
			if r.Puller == "worker" {
				done++
			}
			if !greedy && done == n {
				return time.Since(start), done
			}
		case <-deadline:
			return 0, done
		}
	}
}

// Attack 5: a puller offering a credit of 2^31 that answers hellos and
// never acknowledges a job. Over a fixed number of jobs, the legitimate
// puller beside it finishes at least 80% of what it finishes alone in the
// same (fake) time.
func TestAttackGreedyPuller(t *testing.T) {
	const n = 400
	var alone time.Duration
	synctest.Test(t, func(t *testing.T) {
		var done int
		alone, done = greedyRun(t, n, false, time.Hour)
		if done != n {
			t.Fatalf("alone: %d of %d jobs", done, n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		_, done := greedyRun(t, n, true, alone)
		t.Logf("alone: %d jobs in %v; beside a greedy puller: %d in that time", n, alone, done)
		if done < n*8/10 {
			t.Fatalf("beside a greedy puller the worker finished %d of %d jobs (alone: all %d in %v)", done, n, n, alone)
		}
	})
}

// Attack 5, the job's side: a job that no puller finishes is handed out
// Config.JobAttempts times, then parked: reported once with
// JobResult.Parked and its own body, and not handed out again.
func TestAttackJobParked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trs := memPeers(t, 0, "pusher", "mallory")
		ptr, mtr := trs[0], trs[1]
		pusher := newNode(t, ptr, &bus.Config{Heartbeat: time.Second, JobTimeout: 5 * time.Second, JobAttempts: 3})
		go answerHellos(mtr)
		rawSend(t, mtr, "pusher", envelope.Envelope{Kind: protocol.BusKindReady, Credit: 1})
		synctest.Wait()
		id, err := pusher.Push(t.Context(), "job", "the body")
		if err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-pusher.Results():
			if r.ID != id || !r.Parked || r.Body != "the body" || r.Attempts != 3 || r.Err == "" {
				t.Fatalf("result %+v", r)
			}
		case <-time.After(time.Hour):
			t.Fatal("a job never done was not parked in an hour")
		}
		time.Sleep(time.Minute)
		if st := pusher.Stats().Pusher; st.Parked != 1 || st.Waiting != 0 || st.InFlight != 0 || st.Overdue != 3 {
			t.Fatalf("pusher stats %+v", st)
		}
		select {
		case r := <-pusher.Results():
			t.Fatalf("an extra result %+v", r)
		default:
		}
	})
}

// A reply counts only from the peer its request went to: a peer that
// learnt a request's id (here from the responder itself) and answers first
// is refused and counted, and the responder's reply is the answer. (Main
// refused it too, counted as late.)
func TestAttackForgedReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trs := memPeers(t, 0, "client", "server", "mallory")
		client := newNode(t, trs[0], &bus.Config{Heartbeat: -1})
		got := make(chan any, 1)
		go func() {
			rep, err := client.Request(t.Context(), "server", "s", "q")
			if err != nil {
				got <- err
				return
			}
			got <- rep.Body
		}()
		var req envelope.Envelope
		for req.Kind != protocol.BusKindReq { // hellos first
			m := <-trs[1].Receive()
			if err := envelope.Decode(m.Body, &req); err != nil {
				t.Fatal(err)
			}
		}
		rawSend(t, trs[2], "client", envelope.Envelope{Kind: protocol.BusKindRep, ID: req.ID, Body: "forged"})
		synctest.Wait()
		rawSend(t, trs[1], "client", envelope.Envelope{Kind: protocol.BusKindRep, ID: req.ID, Body: "real"})
		if b := <-got; b != "real" {
			t.Fatalf("the request was answered %v", b)
		}
		if st := client.Stats().Requester; st.Forged != 1 || st.Replies != 1 {
			t.Fatalf("requester stats %+v", st)
		}
	})
}

// A puller that lets jobs time out loses credit by halves, and a new ready
// does not give it back: offering 1,000, it holds the PullCreditStart of 4,
// and after they time out one at a time, however often it offers again.
func TestAttackOverduePullerLosesCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		trs := memPeers(t, 0, "pusher", "mallory")
		pusher := newNode(t, trs[0], &bus.Config{Heartbeat: time.Second, JobTimeout: 5 * time.Second, JobAttempts: 100})
		go answerHellos(trs[1])
		ready := envelope.Envelope{Kind: protocol.BusKindReady, Credit: 1000}
		rawSend(t, trs[1], "pusher", ready)
		synctest.Wait()
		for i := range 20 {
			if _, err := pusher.Push(t.Context(), "job", i); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait()
		if st := pusher.Stats().Pusher; st.InFlight != 4 {
			t.Fatalf("a new puller offering 1,000 holds %d jobs, want 4: %+v", st.InFlight, st)
		}
		time.Sleep(7 * time.Second) // past the job timeout and a heartbeat
		rawSend(t, trs[1], "pusher", ready)
		synctest.Wait()
		if st := pusher.Stats().Pusher; st.InFlight != 1 || st.Overdue != 4 || st.CreditCapped != 2 {
			t.Fatalf("after 4 jobs overdue and a new offer: %+v, want 1 in flight", st)
		}
	})
}
