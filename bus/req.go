package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/protocol"
)

// Errors of requests; test with errors.Is.
var (
	// ErrTimeout: no reply came before the request's deadline.
	ErrTimeout = errors.New("raet bus: request timed out")
	// ErrNoResponders: no live peer serves the queue group.
	ErrNoResponders = errors.New("raet bus: no responders")
	// ErrTooManyPending: Config.MaxPending requests wait already.
	ErrTooManyPending = errors.New("raet bus: too many pending requests")
	// ErrPeerDown: the responder went down (or restarted, or is not
	// known) before it answered.
	ErrPeerDown = errors.New("raet bus: responder down")
	// ErrRequestBudget: the responder refused the request because this
	// node had Config.MaxPeerRequests requests held there already (a
	// *RemoteError is this error; RequestGroup tries another member).
	ErrRequestBudget = errors.New("raet bus: over the responder's request budget")
)

// RemoteError is the error a responder's handler returned (or why the
// responder could not run it).
type RemoteError struct {
	Peer string
	Msg  string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("raet bus: %s: %s", e.Peer, e.Msg) }

// Is reports whether the responder refused the request for a reason a
// caller branches on: ErrRequestBudget.
func (e *RemoteError) Is(target error) bool {
	return target == ErrRequestBudget && e.Msg == overRequestBudget
}

// Reply is the answer to a request.
type Reply struct {
	From string
	Body any
	RTT  time.Duration
}

// RequesterStats count a node's requests.
type RequesterStats struct {
	Requests uint64
	Replies  uint64
	Timeouts uint64
	Late     uint64 // replies that came after their request gave up (ignored)
	Forged   uint64 // replies from a peer other than the one the request went to (refused, logged once per peer)
	Retried  uint64 // group requests sent to another member after one went down
	Pending  int    // now
}

type requester struct {
	n       *Node
	mu      sync.Mutex
	next    uint64
	pending map[uint64]*pendingReq
	rr      map[string]int // per group: where the last choice was
	st      RequesterStats
	warned  warnOnce
}

type pendingReq struct {
	peer   string
	sent   time.Time
	c      chan envelope.Envelope // cap 1: the reply
	down   chan struct{}          // closed when peer goes down
	cancel context.CancelFunc     // ends the Send (set under requester.mu)
	once   sync.Once
}

func (r *requester) init(n *Node) {
	r.n = n
	r.pending = map[uint64]*pendingReq{}
	r.rr = map[string]int{}
	r.next = runIDs()
}

// Request sends body to peer as a request on subject and waits for the
// reply until ctx's deadline (Config.RequestTimeout when it has none). A
// peer known to be down (it was up, and went down or silent) fails the
// request at once with ErrNoResponders and ErrPeerDown. The pending request
// is forgotten when Request returns, whatever happens: a reply after that
// is counted as late and dropped.
func (n *Node) Request(ctx context.Context, peer, subject string, body any) (Reply, error) {
	if err := checkSubject(subject, n.cfg.MaxSubjectBytes); err != nil {
		return Reply{}, err
	}
	ctx, cancel := n.requestContext(ctx)
	defer cancel()
	return n.req.do(ctx, peer, subject, body)
}

// RequestGroup sends a request to a live member of queue group, the least
// busy, taking turns among equals; if the member goes down before it
// answers, or refuses it as busy, the request goes to another member while
// the deadline allows.
func (n *Node) RequestGroup(ctx context.Context, group, subject string, body any) (Reply, error) {
	if err := checkSubject(subject, n.cfg.MaxSubjectBytes); err != nil {
		return Reply{}, err
	}
	ctx, cancel := n.requestContext(ctx)
	defer cancel()
	var tried []string
	for {
		peer, ok := n.req.choose(group, tried)
		if !ok {
			if len(tried) > 0 {
				<-ctx.Done()
				return Reply{}, n.req.timeout(ctx)
			}
			return Reply{}, fmt.Errorf("%w in group %q", ErrNoResponders, group)
		}
		rep, err := n.req.do(ctx, peer, subject, body)
		var re *RemoteError
		if !errors.Is(err, ErrPeerDown) && !(errors.As(err, &re) && (re.Msg == busy || re.Msg == overRequestBudget)) {
			return rep, err
		}
		tried = append(tried, peer)
		n.req.mu.Lock()
		n.req.st.Retried++
		n.req.mu.Unlock()
	}
}

func (n *Node) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, n.cfg.RequestTimeout)
}

// choose picks the live member of group with the fewest pending requests
// from us, turning round among equals; tried are left out.
func (r *requester) choose(group string, tried []string) (string, bool) {
	members := r.n.liveGroupMembers(group)
	members = slices.DeleteFunc(members, func(m string) bool { return slices.Contains(tried, m) })
	if len(members) == 0 {
		return "", false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	load := map[string]int{}
	for _, p := range r.pending {
		load[p.peer]++
	}
	start := r.rr[group] + 1
	best := -1
	for i := range members {
		m := (start + i) % len(members)
		if best < 0 || load[members[m]] < load[members[best]] {
			best = m
		}
	}
	r.rr[group] = best
	return members[best], true
}

// GroupMembers lists the live peers known to serve queue group.
func (n *Node) GroupMembers(group string) []string { return n.liveGroupMembers(group) }

func (r *requester) timeout(ctx context.Context) error {
	r.mu.Lock()
	r.st.Timeouts++
	r.mu.Unlock()
	return fmt.Errorf("%w: %w", ErrTimeout, context.Cause(ctx))
}

func (r *requester) do(ctx context.Context, peer, subject string, body any) (Reply, error) {
	r.n.know(peer)
	if r.n.knownDown(peer) {
		return Reply{}, fmt.Errorf("raet bus: request to %s: %w: %w", peer, ErrNoResponders, ErrPeerDown)
	}
	r.mu.Lock()
	if len(r.pending) >= r.n.cfg.MaxPending {
		r.mu.Unlock()
		return Reply{}, ErrTooManyPending
	}
	r.next++
	id := r.next
	p := &pendingReq{peer: peer, sent: time.Now(), c: make(chan envelope.Envelope, 1), down: make(chan struct{})}
	r.pending[id] = p
	r.st.Requests++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.pending, id)
		r.mu.Unlock()
	}()

	e := newEnvelope(protocol.BusKindReq)
	e.ID, e.Subject, e.Body, e.Time = id, subject, body, p.sent.UnixNano()
	if dl, ok := ctx.Deadline(); ok {
		e.Deadline = uint32(max(time.Until(dl).Milliseconds(), 1))
	}
	// Send in this goroutine (its stack is grown already, a new one's is
	// not); a responder that goes down meanwhile ends the Send.
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	r.mu.Lock()
	p.cancel = scancel
	r.mu.Unlock()
	if err := r.n.t.Send(sctx, peer, e.Map()); err != nil {
		select {
		case <-p.down:
			return Reply{}, ErrPeerDown
		default:
		}
		switch {
		case errors.Is(err, ErrUnknownPeer):
			return Reply{}, errors.Join(ErrPeerDown, err)
		case r.n.closed():
			return Reply{}, ErrClosed
		case ctx.Err() != nil:
			return Reply{}, r.timeout(ctx)
		}
		return Reply{}, fmt.Errorf("raet bus: request to %s: %w", peer, err)
	}
	select {
	case rep := <-p.c:
		rtt := time.Since(p.sent) // the handler's time too: not a sample of Node.RTT
		r.mu.Lock()
		r.st.Replies++
		r.mu.Unlock()
		if rep.Error != "" {
			return Reply{}, &RemoteError{Peer: peer, Msg: rep.Error}
		}
		return Reply{From: peer, Body: rep.Body, RTT: rtt}, nil
	case <-p.down:
		return Reply{}, ErrPeerDown
	case <-ctx.Done():
		if r.n.closed() {
			return Reply{}, ErrClosed
		}
		return Reply{}, r.timeout(ctx)
	}
}

// input takes a reply: only from the peer its request went to.
func (r *requester) input(from string, e *envelope.Envelope) {
	r.mu.Lock()
	p := r.pending[e.ID]
	if p == nil {
		r.st.Late++
		r.mu.Unlock()
		return
	}
	if p.peer != from {
		r.st.Forged++
		r.mu.Unlock()
		r.warned.log(r.n.log, from, refusedForgedReply, "id", e.ID)
		return
	}
	r.mu.Unlock()
	select {
	case p.c <- *e:
	default:
		r.n.bad(from, e, "second reply")
	}
}

// peer fails the requests waiting for a peer that went down.
func (r *requester) peer(name string, st PeerState, restarted bool) {
	if st == PeerGone || restarted {
		r.warned.forget(name)
	}
	if st == PeerUp && !restarted {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pending {
		if p.peer == name {
			p.once.Do(func() {
				close(p.down)
				if p.cancel != nil {
					p.cancel()
				}
			})
		}
	}
}

func (r *requester) stats() RequesterStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.Pending = len(r.pending)
	return st
}

// Request is a request as a responder's handler sees it.
type Request struct {
	From     string
	Subject  string
	Body     any
	Deadline time.Time // when the requester stops waiting (zero: not said)
}

// Handler answers a request: its result is the reply's body, its error the
// requester's RemoteError. The ctx ends at the request's deadline or when
// the service closes.
type Handler func(ctx context.Context, r *Request) (any, error)

// ServeOptions are a service's options; nil means the defaults.
type ServeOptions struct {
	// Group puts the service in a queue group: requesters that ask the
	// group send each request to one live member.
	Group string
	// Concurrency is how many handlers run at once; 0 means 16.
	Concurrency int
	// Backlog is how many requests wait for a handler; 0 means 256. A
	// request beyond it is answered at once with the error "busy".
	Backlog int
}

// Service serves requests on a subject filter.
type Service struct {
	n      *Node
	filter string
	group  string
	h      Handler
	work   chan incoming
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type incoming struct {
	from string
	e    envelope.Envelope
	at   time.Time
}

// ResponderStats count the requests a node's services were sent.
type ResponderStats struct {
	Requests uint64 // requests received
	// Refused requests and answers, by reason (each logged once per peer).
	OverBudget  uint64 // requests refused: their peer had Config.MaxPeerRequests held already (answered ErrRequestBudget)
	AnswerDrops uint64 // answers not sent: their peer had Config.MaxPeerAnswers waiting, or the send failed or outlived the request
	Peers       int    // now: peers with requests held or answers waiting
}

// Why a responder refuses a peer's request or drops its answer, in logs.
const (
	refusedForgedReply   = "reply from a peer the request did not go to"
	refusedRequestBudget = "requests over Config.MaxPeerRequests"
	refusedAnswerBudget  = "answers over Config.MaxPeerAnswers: not read"
)

type responder struct {
	n        *Node
	mu       sync.Mutex
	services []*Service
	peers    map[string]*answerer // peers with requests held or answers waiting
	st       ResponderStats
	warned   warnOnce
}

// answerer is a responder's queue of answers to one peer, sent in order by
// one goroutine while it is not empty: a peer that does not read them
// holds that goroutine and MaxPeerAnswers answers, no more.
type answerer struct {
	held    int // requests admitted to a service, not answered yet
	queue   []answer
	sending bool
}

type answer struct {
	e     envelope.Envelope
	until time.Time // the request's deadline: the answer is useless after it
}

func (r *responder) init(n *Node) { r.n = n; r.peers = map[string]*answerer{} }

// Serve answers requests whose subject matches filter with h, at most
// Concurrency at once. A request that matches no service is answered with
// an error; the first service registered that matches wins.
func (n *Node) Serve(filter string, h Handler, opt *ServeOptions) (*Service, error) {
	if err := checkFilter(filter, n.cfg.MaxSubjectBytes); err != nil {
		return nil, err
	}
	var o ServeOptions
	if opt != nil {
		o = *opt
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Backlog <= 0 {
		o.Backlog = 256
	}
	if o.Group != "" {
		if err := checkSubject(o.Group, n.cfg.MaxSubjectBytes); err != nil {
			return nil, fmt.Errorf("queue group: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(n.ctx)
	s := &Service{n: n, filter: filter, group: o.Group, h: h, work: make(chan incoming, o.Backlog), ctx: ctx, cancel: cancel}
	n.rep.mu.Lock()
	if n.closed() {
		n.rep.mu.Unlock()
		cancel()
		return nil, ErrClosed
	}
	n.rep.services = append(n.rep.services, s)
	n.rep.mu.Unlock()
	for range o.Concurrency {
		s.wg.Add(1)
		if !n.goWait(s.worker) {
			s.wg.Done()
		}
	}
	if o.Group != "" {
		n.sayHello()
	}
	return s, nil
}

// Close stops the service: its handlers' contexts end, and requests still
// waiting are answered with an error.
func (s *Service) Close() error {
	r := &s.n.rep
	r.mu.Lock()
	i := slices.Index(r.services, s)
	if i >= 0 {
		r.services = slices.Delete(r.services, i, i+1)
	}
	r.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	for { // the requests still waiting for a handler
		select {
		case in := <-s.work:
			r.answer(in, true, nil, errServiceClosed)
			continue
		default:
		}
		break
	}
	if i >= 0 && s.group != "" {
		s.n.sayHello()
	}
	return nil
}

// groups lists the queue groups this node serves.
func (r *responder) groups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.services {
		if s.group != "" && !slices.Contains(out, s.group) {
			out = append(out, s.group)
		}
	}
	return out
}

// input takes a request. One is admitted to a service while its peer has
// fewer than Config.MaxPeerRequests held; every other is answered at once.
func (r *responder) input(from string, e *envelope.Envelope) {
	in := incoming{from: from, e: *e, at: time.Now()}
	r.mu.Lock()
	r.st.Requests++
	var svc *Service
	for _, s := range r.services {
		if Match(s.filter, e.Subject) {
			svc = s
			break
		}
	}
	if svc == nil {
		r.mu.Unlock()
		r.answer(in, false, nil, "no responder for subject "+e.Subject)
		return
	}
	a := r.answererLocked(from)
	if a.held >= r.n.cfg.MaxPeerRequests {
		r.st.OverBudget++
		r.mu.Unlock()
		r.warned.log(r.n.log, from, refusedRequestBudget, "id", e.ID, "held", r.n.cfg.MaxPeerRequests)
		r.answer(in, false, nil, overRequestBudget)
		return
	}
	a.held++
	select {
	case svc.work <- in:
		r.mu.Unlock()
	default:
		a.held--
		r.mu.Unlock()
		r.answer(in, false, nil, busy)
	}
}

// busy is the error of a request refused for a full backlog: a group
// request then goes to another member.
const busy = "busy"

// overRequestBudget is the error of a request refused because its peer had
// Config.MaxPeerRequests held (ErrRequestBudget).
const overRequestBudget = "over budget: requests in flight"

// errServiceClosed answers the requests a closing service did not handle.
const errServiceClosed = "service closed"

func (r *responder) answererLocked(name string) *answerer {
	a := r.peers[name]
	if a == nil {
		a = &answerer{}
		r.peers[name] = a
	}
	return a
}

// idleLocked forgets a peer with nothing held or waiting.
func (r *responder) idleLocked(name string, a *answerer) {
	if a.held == 0 && len(a.queue) == 0 && !a.sending {
		delete(r.peers, name)
	}
}

// answer queues the reply to request in for its peer (held: it was
// admitted to a service, and is answered now). The node's reader and the
// handlers never wait for the network: a peer's queue beyond
// Config.MaxPeerAnswers drops the answer and counts it.
func (r *responder) answer(in incoming, held bool, body any, errText string) {
	rep := newEnvelope(protocol.BusKindRep)
	rep.ID, rep.Body, rep.Error = in.e.ID, body, errText
	until := in.at.Add(r.n.cfg.RequestTimeout)
	if in.e.Deadline > 0 {
		until = in.at.Add(time.Duration(in.e.Deadline) * time.Millisecond)
	}
	r.mu.Lock()
	a := r.answererLocked(in.from)
	if held {
		a.held--
	}
	if len(a.queue) >= r.n.cfg.MaxPeerAnswers {
		r.st.AnswerDrops++
		r.idleLocked(in.from, a)
		r.mu.Unlock()
		r.warned.log(r.n.log, in.from, refusedAnswerBudget, "id", in.e.ID, "waiting", r.n.cfg.MaxPeerAnswers)
		return
	}
	a.queue = append(a.queue, answer{e: rep, until: until})
	if !a.sending {
		a.sending = r.n.goWait(func() { r.send(in.from) })
		if !a.sending { // closing: nothing is sent any more
			a.queue = nil
		}
	}
	r.idleLocked(in.from, a)
	r.mu.Unlock()
}

// send sends the answers queued for peer until none is left, each until
// its request's deadline at most.
func (r *responder) send(peer string) {
	for {
		r.mu.Lock()
		a := r.peers[peer]
		if a != nil && r.n.closed() {
			a.queue = nil // nothing is sent any more
		}
		if a == nil || len(a.queue) == 0 {
			if a != nil {
				a.sending = false
				r.idleLocked(peer, a)
			}
			r.mu.Unlock()
			return
		}
		next := a.queue[0]
		a.queue[0] = answer{}
		a.queue = a.queue[1:]
		r.mu.Unlock()
		err := context.DeadlineExceeded // its requester gave up
		if time.Now().Before(next.until) {
			ctx, cancel := context.WithDeadline(r.n.ctx, next.until)
			err = r.n.t.Send(ctx, peer, next.e.Map())
			cancel()
		}
		if err != nil && !r.n.closed() {
			r.mu.Lock()
			r.st.AnswerDrops++
			r.mu.Unlock()
			r.n.log.Debug("reply not sent", "peer", peer, "id", next.e.ID, "err", err)
		}
	}
}

// peer drops the answers waiting for a peer that left or restarted: its
// requester is gone.
func (r *responder) peer(name string, st PeerState, restarted bool) {
	if st != PeerGone && !restarted {
		return
	}
	r.warned.forget(name)
	r.mu.Lock()
	if a := r.peers[name]; a != nil {
		r.st.AnswerDrops += uint64(len(a.queue))
		a.queue = nil
		r.idleLocked(name, a)
	}
	r.mu.Unlock()
}

func (r *responder) stats() ResponderStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	st.Peers = len(r.peers)
	return st
}

func (s *Service) worker() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case in := <-s.work:
			s.run(in)
		}
	}
}

func (s *Service) run(in incoming) {
	req := &Request{From: in.from, Subject: in.e.Subject, Body: in.e.Body}
	ctx, cancel := s.ctx, context.CancelFunc(func() {})
	if in.e.Deadline > 0 {
		req.Deadline = in.at.Add(time.Duration(in.e.Deadline) * time.Millisecond)
		ctx, cancel = context.WithDeadline(s.ctx, req.Deadline)
	}
	defer cancel()
	r := &s.n.rep
	if ctx.Err() != nil {
		if s.ctx.Err() != nil { // taken as the service closed
			r.answer(in, true, nil, errServiceClosed)
			return
		}
		// It waited past its deadline: the requester gave up.
		r.mu.Lock()
		a := r.answererLocked(in.from)
		a.held--
		r.idleLocked(in.from, a)
		r.mu.Unlock()
		return
	}
	body, err := s.h(ctx, req)
	// Answered even when the handler was ended by Close.
	if err != nil {
		r.answer(in, true, nil, err.Error())
		return
	}
	r.answer(in, true, body, "")
}
