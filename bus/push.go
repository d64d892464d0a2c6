package bus

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/protocol"
)

// JobResult is a job done, as the pusher sees it: once per job.
type JobResult struct {
	ID       uint64
	Subject  string
	Puller   string // who did it (a parked job: the last puller it was handed to)
	Body     any    // the handler's result (a parked job: the job's own body, to push again or set aside)
	Err      string // the handler's error, if it failed (a parked job: why it was parked)
	Attempts int    // how many pullers it was handed to
	// Parked: no puller reported the job done although it was handed out
	// Config.JobAttempts times (each puller died, went silent or let it time
	// out): it is not handed out again.
	Parked bool
}

// PusherStats count a node's jobs.
type PusherStats struct {
	Pushed     uint64
	Done       uint64 // each job once
	Reassigned uint64 // handed to another puller (its puller died, restarted or timed out)
	Duplicates uint64 // done reports for jobs already done (ignored)
	// Refused envelopes, by reason (each logged once per peer).
	Forged       uint64 // done reports from a peer the job was never handed to
	CreditCapped uint64 // ready envelopes offering more than Config.MaxPullCredit (taken as MaxPullCredit)
	Overdue      uint64 // jobs a puller let time out: each halved the credit the pusher gives it
	Parked       uint64 // jobs handed out Config.JobAttempts times without a done (JobResult.Parked)
	Waiting      int    // now: jobs waiting for a puller
	InFlight     int    // now: jobs handed out and not done
	Pullers      int    // now: pullers that have given this node credit
}

// Why a pusher refuses a puller's envelope, in logs.
const (
	refusedForgedDone = "done for a job not handed to this peer"
	refusedCredit     = "credit above Config.MaxPullCredit"
	refusedOverdue    = "jobs held past their timeout: credit halved"
	refusedNoCredit   = "job beyond the credit offered"
)

// errParked is JobResult.Err of a parked job.
const errParked = "parked: handed out Config.JobAttempts times without a done"

type job struct {
	id       uint64
	subject  string
	body     any
	puller   string
	prev     string   // the puller it was taken from
	holders  []string // every puller it was handed to: the only ones whose done counts
	deadline time.Time
	attempts int
}

// pullerState is what a pusher knows of one puller. The credit it uses is
// the smaller of what the puller offered (at most Config.MaxPullCredit) and
// what the puller has earned: it starts at Config.PullCreditStart, grows by
// one per job done and halves per job let time out, so that a puller
// taking jobs and never finishing them holds few of them, while one that
// works gets its whole offer after a few jobs.
type pullerState struct {
	offered  int
	earned   int
	up       bool
	inflight map[uint64]*job
}

func (ps *pullerState) credit() int { return min(ps.offered, ps.earned) }

type pusher struct {
	n       *Node
	mu      sync.Mutex
	room    *sync.Cond
	next    uint64
	waiting []*job
	jobs    map[uint64]*job // handed out
	pullers map[string]*pullerState
	earned  map[string]int // the credit earned by pullers forgotten (gone, restarted) below the start
	parked  []JobResult    // to report, once the lock is released
	results chan JobResult
	st      PusherStats
	warned  warnOnce
	store   *boltCommitter // Config.JobFile's; nil: jobs are kept in memory only
}

func (p *pusher) init(n *Node) error {
	p.n = n
	p.room = sync.NewCond(&p.mu)
	p.jobs = map[uint64]*job{}
	p.pullers = map[string]*pullerState{}
	p.earned = map[string]int{}
	p.results = make(chan JobResult, n.cfg.JobQueue)
	p.next = runIDs()
	if n.cfg.JobFile != "" {
		if err := p.open(n.cfg.JobFile); err != nil {
			return err
		}
	}
	context.AfterFunc(n.ctx, func() {
		p.mu.Lock()
		p.room.Broadcast()
		p.mu.Unlock()
	})
	return nil
}

// open opens the job file at path and queues the jobs it holds: those a
// previous run pushed and did not see done (nor parked), under their ids.
// The file is a bbolt file of a history's layout (a job is a Retained whose
// Seq is its id), written by the history's group committer.
func (p *pusher) open(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, NoFreelistSync: true})
	if err != nil {
		return fmt.Errorf("raet bus: job file %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(boltMeta); err != nil {
			return err
		}
		jobs, err := tx.CreateBucketIfNotExists(boltMessages)
		if err != nil {
			return err
		}
		return jobs.ForEach(func(k, v []byte) error {
			m, err := decodeRetained(k, v)
			if err != nil {
				return err
			}
			p.waiting = append(p.waiting, &job{id: m.Seq, subject: m.Subject, body: m.Body})
			return nil
		})
	})
	if err != nil {
		db.Close()
		return fmt.Errorf("raet bus: job file %s: %w", path, err)
	}
	p.store = newBoltCommitter(db, 0)
	return nil
}

// keepLocked queues job j's record in the job file, or its removal (gone:
// done or parked); p.mu is held, so records are written in order.
func (p *pusher) keepLocked(j *job, gone bool) error {
	if p.store == nil {
		return nil
	}
	op := boltOp{}
	binary.BigEndian.PutUint64(op.key[:], j.id)
	if !gone {
		v, err := packet.JSONBody{}.Marshal(nil, retainedRecord{Subject: j.subject, Body: j.body})
		if err != nil {
			return fmt.Errorf("raet bus: job file: %w", err)
		}
		op.val = v
	}
	return p.store.queue(0, op)
}

// close writes what the job file has queued and closes it.
func (p *pusher) close() error {
	if p.store == nil {
		return nil
	}
	return p.store.close()
}

// Push queues a job for the pullers that have given this node credit (see
// Pull), waiting while Config.JobQueue jobs wait already, and returns its
// id. Each job goes to the least loaded puller with credit; its result
// comes on Results once, however many pullers it took.
func (n *Node) Push(ctx context.Context, subject string, body any) (uint64, error) {
	if err := checkSubject(subject, n.cfg.MaxSubjectBytes); err != nil {
		return 0, err
	}
	p := &n.push
	stop := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.room.Broadcast()
		p.mu.Unlock()
	})
	defer stop()
	p.mu.Lock()
	for len(p.waiting)+len(p.jobs) >= n.cfg.JobQueue {
		if n.closed() {
			p.mu.Unlock()
			return 0, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			p.mu.Unlock()
			return 0, err
		}
		p.room.Wait()
	}
	if n.closed() {
		p.mu.Unlock()
		return 0, ErrClosed
	}
	p.next++
	j := &job{id: p.next, subject: subject, body: body}
	if err := p.keepLocked(j, false); err != nil {
		p.mu.Unlock()
		return 0, err
	}
	var written func() (uint64, error)
	if p.store != nil {
		written = p.store.written()
	}
	p.waiting = append(p.waiting, j)
	p.st.Pushed++
	p.mu.Unlock()
	p.dispatch()
	if written != nil {
		if _, err := written(); err != nil {
			return j.id, err
		}
	}
	return j.id, nil
}

// Results is the channel of jobs done, each once. A pusher that does not
// read it holds up the node's receiving once it is full.
func (n *Node) Results() <-chan JobResult { return n.push.results }

func (p *pusher) stats() PusherStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.st
	st.Waiting, st.InFlight, st.Pullers = len(p.waiting), len(p.jobs), len(p.pullers)
	return st
}

// dispatch reports the jobs parked, and hands waiting jobs to the pullers
// with free credit, the least loaded first: one offering more credit than
// the others does not take the jobs they wait for.
func (p *pusher) dispatch() {
	p.report()
	type send struct {
		to string
		e  envelope.Envelope
	}
	var out []send
	p.mu.Lock()
	names := make([]string, 0, len(p.pullers))
	for name := range p.pullers {
		names = append(names, name)
	}
	slices.Sort(names)
	for len(p.waiting) > 0 {
		j := p.waiting[0]
		// The puller with the fewest jobs in hand, then the most credit
		// free; the one that had the job before (and let it go) only when
		// no other can take it.
		best, bestLoad, bestFree, bestPrev := "", 0, 0, true
		for _, name := range names {
			ps := p.pullers[name]
			load := len(ps.inflight)
			free := ps.credit() - load
			if !ps.up || free <= 0 {
				continue
			}
			prev := name == j.prev
			if best == "" || (bestPrev && !prev) ||
				(prev == bestPrev && (load < bestLoad || load == bestLoad && free > bestFree)) {
				best, bestLoad, bestFree, bestPrev = name, load, free, prev
			}
		}
		if best == "" {
			break
		}
		p.waiting = p.waiting[1:]
		j.puller, j.deadline = best, time.Now().Add(p.n.cfg.JobTimeout)
		j.attempts++
		if !slices.Contains(j.holders, best) {
			j.holders = append(j.holders, best)
		}
		p.pullers[best].inflight[j.id] = j
		p.jobs[j.id] = j
		e := newEnvelope(protocol.BusKindJob)
		e.ID, e.Subject, e.Body = j.id, j.subject, j.body
		e.Deadline = uint32(p.n.cfg.JobTimeout.Milliseconds())
		out = append(out, send{best, e})
	}
	p.mu.Unlock()
	for _, s := range out {
		p.n.goWait(func() {
			if err := p.n.t.Send(p.n.ctx, s.to, s.e.Map()); err != nil && !p.n.closed() {
				p.n.log.Debug("job not sent", "puller", s.to, "id", s.e.ID, "err", err)
				p.requeue(s.to, s.e.ID, errors.Is(err, ErrUnknownPeer))
			}
		})
	}
}

// report hands the jobs parked to Results.
func (p *pusher) report() {
	p.mu.Lock()
	out := p.parked
	p.parked = nil
	p.mu.Unlock()
	if len(out) > 0 {
		p.n.log.Warn("jobs parked: handed out Config.JobAttempts times without a done", "count", len(out))
	}
	for _, r := range out {
		select {
		case p.results <- r:
		case <-p.n.ctx.Done():
			return
		}
	}
}

// requeue puts job id, handed to puller, back in front of the queue (it
// never reached the puller: not an attempt); gone also forgets the puller.
func (p *pusher) requeue(puller string, id uint64, gone bool) {
	p.mu.Lock()
	if ps := p.pullers[puller]; ps != nil {
		if j := ps.inflight[id]; j != nil {
			j.attempts--
			p.unassignLocked(ps, j)
		}
		if gone {
			p.forgetLocked(puller)
		}
	}
	p.mu.Unlock()
	p.dispatch()
}

// unassignLocked takes job j back from its puller: to the front of the
// queue, or parked when it was handed out Config.JobAttempts times.
func (p *pusher) unassignLocked(ps *pullerState, j *job) {
	delete(ps.inflight, j.id)
	delete(p.jobs, j.id)
	j.prev, j.puller = j.puller, ""
	if j.attempts >= p.n.cfg.JobAttempts {
		p.st.Parked++
		p.forgetJobLocked(j)
		p.parked = append(p.parked, JobResult{ID: j.id, Subject: j.subject, Puller: j.prev, Body: j.body,
			Err: errParked, Attempts: j.attempts, Parked: true})
		p.room.Broadcast()
		return
	}
	p.waiting = append([]*job{j}, p.waiting...)
	p.st.Reassigned++
}

// forgetJobLocked removes job j, done or parked, from the job file; a
// failure is logged (the job comes back at the next start, as a duplicate
// the application sees again).
func (p *pusher) forgetJobLocked(j *job) {
	if err := p.keepLocked(j, true); err != nil && !p.n.closed() {
		p.n.log.Warn("job not removed from the job file", "id", j.id, "err", err)
	}
}

// forgetLocked drops puller name, its jobs back in the queue; a credit it
// earned below the start is remembered, so that leaving or restarting
// does not clear it.
func (p *pusher) forgetLocked(name string) {
	ps := p.pullers[name]
	if ps == nil {
		return
	}
	for _, j := range ps.inflight {
		p.unassignLocked(ps, j)
	}
	delete(p.pullers, name)
	if ps.earned < p.n.cfg.PullCreditStart {
		if len(p.earned) >= p.n.cfg.MaxPeers {
			for k := range p.earned { // any one: the map is bounded
				delete(p.earned, k)
				break
			}
		}
		p.earned[name] = ps.earned
	}
}

// input takes a puller's ready or done. A done counts only from a puller
// the job was handed to; credit is capped at Config.MaxPullCredit.
func (p *pusher) input(from string, e *envelope.Envelope) {
	p.mu.Lock()
	switch e.Kind {
	case protocol.BusKindReady:
		ps := p.pullers[from]
		if ps == nil {
			earned, ok := p.earned[from]
			if ok {
				delete(p.earned, from)
			} else {
				earned = p.n.cfg.PullCreditStart
			}
			ps = &pullerState{earned: earned, inflight: map[uint64]*job{}}
			p.pullers[from] = ps
		}
		capped := e.Credit > uint32(p.n.cfg.MaxPullCredit)
		ps.offered, ps.up = int(min(e.Credit, uint32(p.n.cfg.MaxPullCredit))), true
		if capped {
			p.st.CreditCapped++
		}
		p.mu.Unlock()
		if capped {
			p.warned.log(p.n.log, from, refusedCredit, "credit", e.Credit, "taken", p.n.cfg.MaxPullCredit)
		}
		p.dispatch()
		return
	case protocol.BusKindDone:
		j := p.jobs[e.ID]
		if j == nil {
			if p.pullers[from] != nil {
				// A job reassigned and then done by its first puller is
				// done then; the second puller's report is a duplicate.
				p.st.Duplicates++
				p.mu.Unlock()
				return
			}
		}
		if j == nil || !slices.Contains(j.holders, from) {
			p.st.Forged++
			p.mu.Unlock()
			p.warned.log(p.n.log, from, refusedForgedDone, "id", e.ID)
			return
		}
		delete(p.jobs, j.id)
		if ps := p.pullers[j.puller]; ps != nil {
			delete(ps.inflight, j.id)
		}
		p.forgetJobLocked(j)
		if ps := p.pullers[from]; ps != nil {
			ps.earned = min(ps.earned+1, p.n.cfg.MaxPullCredit)
		}
		p.st.Done++
		p.room.Broadcast()
		res := JobResult{ID: j.id, Subject: j.subject, Puller: from, Body: e.Body, Err: e.Error, Attempts: j.attempts}
		p.mu.Unlock()
		p.dispatch()
		select {
		case p.results <- res:
		case <-p.n.ctx.Done():
		}
		return
	}
	p.mu.Unlock()
}

// peer hands the jobs of a puller that went down, left or restarted to
// others.
func (p *pusher) peer(name string, st PeerState, restarted bool) {
	if st == PeerGone || restarted {
		p.warned.forget(name)
	}
	p.mu.Lock()
	ps := p.pullers[name]
	if ps == nil {
		p.mu.Unlock()
		return
	}
	switch {
	case st == PeerGone || restarted:
		p.forgetLocked(name)
	case st == PeerDown:
		ps.up = false
		for _, j := range ps.inflight {
			p.unassignLocked(ps, j)
		}
	case st == PeerUp:
		ps.up = true
	}
	p.mu.Unlock()
	p.dispatch()
}

// tick hands jobs whose puller took too long to another, and halves that
// puller's credit for each.
func (p *pusher) tick(now time.Time) {
	p.mu.Lock()
	late := map[string]int{}
	for _, j := range p.jobs {
		if now.After(j.deadline) {
			if ps := p.pullers[j.puller]; ps != nil {
				ps.earned = max(ps.earned/2, 1)
				late[j.puller]++
				p.st.Overdue++
				p.unassignLocked(ps, j)
			}
		}
	}
	p.mu.Unlock()
	for name, k := range late {
		p.warned.log(p.n.log, name, refusedOverdue, "count", k)
	}
	if len(late) > 0 {
		p.dispatch()
	}
}

// Job is a job as a puller's handler sees it.
type Job struct {
	ID       uint64
	From     string // the pusher
	Subject  string
	Body     any
	Deadline time.Time // when the pusher hands it to another puller
}

// JobHandler does a job; its result or error goes back to the pusher when
// it returns (the job's acknowledgement).
type JobHandler func(ctx context.Context, j *Job) (any, error)

// Puller takes jobs from pushers.
type Puller struct {
	n       *Node
	pushers []string
	credit  int
	h       JobHandler
	work    chan incomingJob
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

type incomingJob struct {
	from string
	e    envelope.Envelope
	at   time.Time
}

type puller struct {
	n       *Node
	mu      sync.Mutex
	pullers []*Puller
	warned  warnOnce
}

func (p *puller) init(n *Node) { p.n = n }

// Pull takes jobs from pushers, credit (at least 1) at once from each, and
// runs h on each, credit at once in all. A job is acknowledged when h
// returns. Jobs run at once, one pusher's too, may run and finish in any
// order: a handler that needs a pusher's jobs in their order orders them
// itself (examples/docsync carries a seq in each). After a pusher
// restarts, the puller offers its credit again.
func (n *Node) Pull(pushers []string, credit int, h JobHandler) (*Puller, error) {
	credit = max(credit, 1)
	ctx, cancel := context.WithCancel(n.ctx)
	pl := &Puller{n: n, pushers: slices.Clone(pushers), credit: credit, h: h,
		work: make(chan incomingJob, credit*len(pushers)*2+1), ctx: ctx, cancel: cancel}
	n.pull.mu.Lock()
	if n.closed() {
		n.pull.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	n.pull.pullers = append(n.pull.pullers, pl)
	n.pull.mu.Unlock()
	for range credit {
		pl.wg.Add(1)
		if !n.goWait(pl.worker) {
			pl.wg.Done()
		}
	}
	for _, ps := range pushers {
		n.know(ps)
		pl.offer(ps)
	}
	return pl, nil
}

func (pl *Puller) offer(pusher string) {
	e := newEnvelope(protocol.BusKindReady)
	e.Credit = uint32(pl.credit)
	pl.n.mu.Lock()
	p := pl.n.peerLocked(pusher)
	pl.n.mu.Unlock()
	if p != nil {
		pl.n.control(p, e)
	}
}

// Close stops taking jobs; handlers running see their ctx end, and their
// jobs are not acknowledged (the pusher hands them to another puller).
func (pl *Puller) Close() error {
	r := &pl.n.pull
	r.mu.Lock()
	if i := slices.Index(r.pullers, pl); i >= 0 {
		r.pullers = slices.Delete(r.pullers, i, i+1)
	}
	r.mu.Unlock()
	pl.cancel()
	pl.wg.Wait()
	return nil
}

func (p *puller) input(from string, e *envelope.Envelope) {
	p.mu.Lock()
	var pl *Puller
	for _, x := range p.pullers {
		if slices.Contains(x.pushers, from) {
			pl = x
			break
		}
	}
	p.mu.Unlock()
	if pl == nil {
		p.n.bad(from, e, "a job from a pusher we do not pull from")
		return
	}
	select {
	case pl.work <- incomingJob{from: from, e: *e, at: time.Now()}:
	default: // the pusher hands it to another puller at its job timeout
		p.n.stats.badEnvelope.Add(1)
		p.warned.log(p.n.log, from, refusedNoCredit, "id", e.ID)
	}
}

// peer offers the credit again to a pusher that restarted or came up.
func (p *puller) peer(name string, st PeerState, restarted bool) {
	if st == PeerGone || restarted {
		p.warned.forget(name)
	}
	if st != PeerUp {
		return
	}
	p.mu.Lock()
	var pls []*Puller
	for _, pl := range p.pullers {
		if slices.Contains(pl.pushers, name) {
			pls = append(pls, pl)
		}
	}
	p.mu.Unlock()
	for _, pl := range pls {
		pl.offer(name)
	}
}

func (pl *Puller) worker() {
	defer pl.wg.Done()
	for {
		select {
		case <-pl.ctx.Done():
			return
		case in := <-pl.work:
			pl.run(in)
		}
	}
}

func (pl *Puller) run(in incomingJob) {
	j := &Job{ID: in.e.ID, From: in.from, Subject: in.e.Subject, Body: in.e.Body}
	ctx, cancel := pl.ctx, context.CancelFunc(func() {})
	if in.e.Deadline > 0 {
		j.Deadline = in.at.Add(time.Duration(in.e.Deadline) * time.Millisecond)
		ctx, cancel = context.WithDeadline(pl.ctx, j.Deadline)
	}
	defer cancel()
	body, err := pl.h(ctx, j)
	if pl.ctx.Err() != nil {
		return // closed: not acknowledged
	}
	done := newEnvelope(protocol.BusKindDone)
	done.ID, done.Body = j.ID, body
	if err != nil {
		done.Body, done.Error = nil, err.Error()
	}
	if err := pl.n.t.Send(pl.ctx, in.from, done.Map()); err != nil {
		pl.n.log.Debug("done not sent", "pusher", in.from, "id", j.ID, "err", err)
	}
}
