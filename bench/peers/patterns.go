package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	zmq "github.com/pebbe/zmq4"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/road"
)

// The messaging patterns of package bus beside NATS core and ZeroMQ:
// request/reply in the windowed mode (a transport, "raet bus req/rep"), and
// fan-out, a mode of its own: one publisher, -subs subscribers, each message
// delivered to every one. A message counts as in flight until every
// subscriber has it; -window of them are. msgs/s counts deliveries (a
// message to 10 subscribers is 10), latency is from publishing to each
// delivery, CPU is per delivery. Every peer must deliver every message to
// every subscriber, once and intact: NATS and ZeroMQ run with no pending
// or high-water limit (the window bounds what is in flight), the bus with
// the Block policy.

const modeFanout = "fanout"

// ---- request/reply through bus.Node.Request and Serve, over two road
// estates with the fast profile (a request and a reply: two messages, each
// done by its receiver).

type busReqRep struct {
	stacks []*road.Stack
	roads  []*bus.Road
	cli    *bus.Node
	srv    *bus.Node
	inFlight
}

func dialBusReqRep() (transport, error) {
	m, others, err := raetEstates(1)
	if err != nil {
		return nil, err
	}
	t := &busReqRep{stacks: append([]*road.Stack{m}, others...)}
	t.init()
	nodes, err := busNodes(t.stacks, &t.roads)
	if err != nil {
		t.close()
		return nil, err
	}
	t.srv, t.cli = nodes[0], nodes[1]
	if _, err := t.srv.Serve("bench.req", func(ctx context.Context, r *bus.Request) (any, error) {
		return map[string]any{"id": r.Body.(map[string]any)["id"]}, nil
	}, &bus.ServeOptions{Concurrency: 64, Backlog: 4096}); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *busReqRep) send(id uint64, p []byte) error {
	body := map[string]any{"id": id, "data": string(p)}
	t.run(id, true, func(ctx context.Context) error {
		rep, err := t.cli.Request(ctx, "main", "bench.req", body)
		if err != nil {
			return err
		}
		got, err := bodyID(rep.Body.(map[string]any))
		if err == nil && got != id {
			err = fmt.Errorf("reply %d to request %d", got, id)
		}
		return err
	})
	return nil
}

func (t *busReqRep) close() {
	t.cancel()
	t.wg.Wait()
	closeBus(t.stacks, t.roads, t.cli, t.srv)
}

func bodyID(b map[string]any) (uint64, error) {
	switch id := b["id"].(type) { // what the built-in serializers decode to
	case int64:
		if id >= 0 {
			return uint64(id), nil
		}
	case uint64:
		return id, nil
	}
	id, err := strconv.ParseUint(fmt.Sprint(b["id"]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("a body without an id: %v", err)
	}
	return id, nil
}

// raetEstates starts a main estate and n others (fast profile) on
// loopback, the others joined to it.
func raetEstates(n int) (*road.Stack, []*road.Stack, error) {
	m, err := newRaetStack("main", true, raetOpts{prof: road.ProfileAuto})
	if err != nil {
		return nil, nil, err
	}
	var others []*road.Stack
	fail := func(err error) (*road.Stack, []*road.Stack, error) {
		for _, o := range others {
			o.Close()
		}
		m.Close()
		return nil, nil, err
	}
	for i := range n {
		o, err := newRaetStack(fmt.Sprintf("e%d", i+1), false, raetOpts{prof: road.ProfileAuto})
		if err != nil {
			return fail(err)
		}
		others = append(others, o)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_, err = o.Join(ctx, m.Addr().String())
		cancel()
		if err != nil {
			return fail(fmt.Errorf("join: %w", err))
		}
	}
	return m, others, nil
}

// busNodes makes a node over each stack (no heartbeats: the benchmark
// measures the patterns), appending the adapters to roads.
func busNodes(stacks []*road.Stack, roads *[]*bus.Road) ([]*bus.Node, error) {
	var out []*bus.Node
	for _, s := range stacks {
		r := bus.NewRoad(s)
		*roads = append(*roads, r)
		n, err := bus.New(r, &bus.Config{Heartbeat: -1, HistoryLast: 16, DefaultHWM: 1 << 16})
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

func closeBus(stacks []*road.Stack, roads []*bus.Road, nodes ...*bus.Node) {
	for _, n := range nodes {
		if n != nil {
			n.Close()
		}
	}
	for _, r := range roads {
		r.Close()
	}
	for _, s := range stacks {
		s.Close()
	}
}

// ---- fan-out.

// A fanout publishes from one goroutine; every subscriber's deliveries go
// to the deliver function the peer was dialled with, from any goroutine.
type fanout interface {
	publish(id uint64, payload []byte) error
	close()
}

type deliverFunc func(sub int, id uint64, payload []byte)

type fanPeer struct {
	name string
	dial func(subs int, deliver deliverFunc) (fanout, error)
}

func fanPeers() []fanPeer {
	return []fanPeer{
		{"nats core", dialNATSFanout},
		{"zeromq pub/sub", dialZMQFanout},
		{"raet fast Send", dialRaetFanout},
		{"raet bus pub/sub", dialBusFanout},
	}
}

// measureFanout publishes messages of size bytes for dur to subs
// subscribers, window in flight, and waits for every delivery.
func measureFanout(p fanPeer, size, subs, window int, dur, timeout time.Duration) result {
	r := result{Peer: p.name, Size: size, Mode: modeFanout, Subs: subs}
	cpu0 := cpuTime()
	payload := bytes.Repeat([]byte("x"), size)
	var mu sync.Mutex
	starts := map[uint64]time.Time{}
	left := map[uint64]int{}
	var lats []time.Duration
	bad := 0
	sem := make(chan struct{}, window)
	deliver := func(sub int, id uint64, got []byte) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		st, ok := starts[id]
		if !ok || !bytes.Equal(got, payload) {
			bad++ // unknown, repeated or damaged
			return
		}
		lats = append(lats, now.Sub(st))
		if left[id]--; left[id] == 0 {
			delete(starts, id)
			delete(left, id)
			<-sem
		}
	}
	f, err := p.dial(subs, deliver)
	if err != nil {
		r.Errors, r.ErrorText = 1, err.Error()
		return r
	}
	t0 := time.Now()
	var id uint64
	deadline := time.After(dur + timeout)
publishing:
	for time.Since(t0) < dur || id == 0 {
		select {
		case sem <- struct{}{}:
		case <-deadline:
			r.ErrorText = "timeout waiting for room"
			break publishing
		}
		mu.Lock()
		starts[id], left[id] = time.Now(), subs
		mu.Unlock()
		if err := f.publish(id, payload); err != nil {
			r.ErrorText = "publish: " + err.Error()
			break
		}
		id++
	}
	for held := 0; held < window && r.ErrorText == ""; { // every slot free: all delivered
		select {
		case sem <- struct{}{}:
			held++
		case <-deadline:
			r.ErrorText = "timeout waiting for deliveries"
		}
	}
	el := time.Since(t0)
	f.close()
	mu.Lock()
	defer mu.Unlock()
	missing := 0
	for _, n := range left {
		missing += n
	}
	r = summarize(r, lats, missing+bad, el, cpuTime()-cpu0)
	if bad > 0 && r.ErrorText == "" {
		r.ErrorText = fmt.Sprintf("%d deliveries unknown, repeated or damaged", bad)
	}
	return r
}

// runFanout measures every fan-out peer at every size and subscriber
// count, runs times, and returns the medians.
func runFanout(ps []fanPeer, sizes, subs []int, window, runs int, dur time.Duration, log io.Writer) []result {
	var out []result
	for _, n := range subs {
		for _, size := range sizes {
			for _, p := range ps {
				var all []result
				for range runs {
					r := measureFanout(p, size, n, window, dur, 30*time.Second)
					if log != nil {
						json.NewEncoder(log).Encode(r)
					}
					all = append(all, r)
				}
				out = append(out, median(all))
			}
		}
	}
	return out
}

func printFanout(w io.Writer, res []result, window, runs int, dur time.Duration) {
	fmt.Fprintf(w, "%s, loopback, window %d messages (each until every subscriber has it), %v per run, medians of %d runs; ratios against raet fast Send\n",
		modeFanout, window, dur, runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "subs\tsize\tpeer\tdelivered/s\tCPU µs/delivery\tp50 µs\tp99 µs\tdelivered ×Send\tCPU ×Send\tp50 ×Send\terrors\t")
	base := map[[2]int]result{}
	for _, r := range res {
		if r.Peer == "raet fast Send" {
			base[[2]int{r.Subs, r.Size}] = r
		}
	}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, r := range res {
		b := base[[2]int{r.Subs, r.Size}]
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f\t%.2f\t%.1f\t%.1f\t%s\t%s\t%s\t%d\t\n", r.Subs, sizeName(r.Size), r.Peer, r.MsgsPerS,
			r.CPUusPerMsg, r.RTTP50us, r.RTTP99us, ratio(r.MsgsPerS, b.MsgsPerS), ratio(r.CPUusPerMsg, b.CPUusPerMsg),
			ratio(r.RTTP50us, b.RTTP50us), r.Errors)
	}
	tw.Flush()
	for _, r := range res {
		if r.ErrorText != "" {
			fmt.Fprintf(w, "%d subs %s %s: %s\n", r.Subs, sizeName(r.Size), r.Peer, r.ErrorText)
		}
	}
}

// ---- NATS core: a publisher connection and one connection per subscriber.

type natsFanout struct {
	env *natsEnv
	pub *nats.Conn
}

func dialNATSFanout(subs int, deliver deliverFunc) (fanout, error) {
	env, err := startNATS()
	if err != nil {
		return nil, err
	}
	pub, err := env.connect("pub")
	if err != nil {
		env.close()
		return nil, err
	}
	f := natsFanout{env, pub}
	for i := range subs {
		sc, err := env.connect(fmt.Sprint("sub", i))
		if err != nil {
			env.close()
			return nil, err
		}
		sub, err := sc.Subscribe("bench.fan", func(m *nats.Msg) {
			if id, p, err := natsUnframe(m); err == nil {
				deliver(i, id, p)
			}
		})
		if err == nil {
			err = sub.SetPendingLimits(-1, -1)
		}
		if err == nil {
			err = sc.Flush()
		}
		if err != nil {
			env.close()
			return nil, fmt.Errorf("nats subscribe: %w", err)
		}
	}
	return f, nil
}

func (f natsFanout) publish(id uint64, p []byte) error {
	return f.pub.Publish("bench.fan", natsFrame(id, p))
}

func (f natsFanout) close() { f.env.close() }

// ---- ZeroMQ PUB/SUB: the server a PUB socket, one SUB socket per
// subscriber, each read by its own goroutine. A subscription takes a
// moment to reach the publisher (the "slow joiner"): probes go out until
// every subscriber has one.

type zmqFanout struct {
	p    *zmqPair
	stop chan struct{}
	wg   sync.WaitGroup
}

const zmqProbe = 1<<64 - 1

func dialZMQFanout(subs int, deliver deliverFunc) (fanout, error) {
	p, err := newZMQPair(zmq.PUB, zmq.SUB)
	if err != nil {
		return nil, err
	}
	for len(p.clients) < subs {
		if _, err := p.dialClient(zmq.SUB); err != nil {
			p.close()
			return nil, err
		}
	}
	f := &zmqFanout{p: p, stop: make(chan struct{})}
	var ready sync.WaitGroup
	ready.Add(subs)
	for i, s := range p.clients {
		err := s.SetSubscribe("")
		if err == nil {
			err = s.SetRcvtimeo(50 * time.Millisecond) // wake to see whether to stop
		}
		if err != nil {
			close(f.stop)
			p.close()
			return nil, fmt.Errorf("zmq option: %w", err)
		}
		f.wg.Add(1)
		go func() { // the socket is this goroutine's
			defer f.wg.Done()
			probed := false
			for {
				id, b, err := zmqRecv(s, 0)
				if err != nil {
					if zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) {
						select {
						case <-f.stop:
							return
						default:
							continue
						}
					}
					return
				}
				if id == zmqProbe {
					if !probed {
						probed = true
						ready.Done()
					}
					continue
				}
				deliver(i, id, b)
			}
		}()
	}
	all := make(chan struct{})
	go func() { ready.Wait(); close(all) }()
	for t0 := time.Now(); ; {
		if err := zmqSend(p.server, zmqProbe, nil); err != nil {
			f.close()
			return nil, err
		}
		select {
		case <-all:
			return f, nil
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(t0) > 10*time.Second {
			f.close()
			return nil, errors.New("zmq: subscribers not connected in 10s")
		}
	}
}

func (f *zmqFanout) publish(id uint64, p []byte) error { return zmqSend(f.p.server, id, p) }

func (f *zmqFanout) close() {
	close(f.stop)
	f.wg.Wait()
	f.p.close()
}

// ---- the road stack's own Send to each subscriber estate (the baseline
// of the pattern layer): each message is one Send per subscriber, each in
// its goroutine, done when that subscriber's stack says so.

type raetFanout struct {
	m      *road.Stack
	others []*road.Stack
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
	data   string
}

func dialRaetFanout(subs int, deliver deliverFunc) (fanout, error) {
	m, others, err := raetEstates(subs)
	if err != nil {
		return nil, err
	}
	f := &raetFanout{m: m, others: others, errs: make(chan error, 1)}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	for i, o := range others {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				select {
				case msg := <-o.Receive():
					id, err := bodyID(msg.Body)
					data, _ := msg.Body["data"].(string)
					if err == nil {
						deliver(i, id, []byte(data))
					}
				case <-f.ctx.Done():
					return
				}
			}
		}()
	}
	return f, nil
}

func (f *raetFanout) publish(id uint64, p []byte) error {
	select {
	case err := <-f.errs:
		return err
	default:
	}
	if len(f.data) != len(p) {
		f.data = string(p)
	}
	body := map[string]any{"id": id, "data": f.data}
	for _, o := range f.others {
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			if err := f.m.Send(f.ctx, o.Name(), body); err != nil && f.ctx.Err() == nil {
				select {
				case f.errs <- err:
				default:
				}
			}
		}()
	}
	return nil
}

func (f *raetFanout) close() {
	f.cancel()
	f.wg.Wait()
	for _, o := range f.others {
		o.Close()
	}
	f.m.Close()
}

// ---- bus pub/sub: the main estate's node publishes, every other's
// subscribes to ">" (Block policy: nothing is dropped).

type busFanout struct {
	stacks []*road.Stack
	roads  []*bus.Road
	nodes  []*bus.Node
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	data   string
}

func dialBusFanout(subs int, deliver deliverFunc) (fanout, error) {
	m, others, err := raetEstates(subs)
	if err != nil {
		return nil, err
	}
	f := &busFanout{stacks: append([]*road.Stack{m}, others...)}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if f.nodes, err = busNodes(f.stacks, &f.roads); err != nil {
		f.close()
		return nil, err
	}
	for i, n := range f.nodes[1:] {
		s, err := n.Subscribe("main", []string{">"}, &bus.SubOptions{Buffer: 1024})
		if err != nil {
			f.close()
			return nil, err
		}
		select {
		case <-s.Ready():
		case <-time.After(10 * time.Second):
			f.close()
			return nil, errors.New("bus: a subscription was not confirmed in 10s")
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			for {
				select {
				case d := <-s.Messages():
					if b, ok := d.Body.(map[string]any); ok && d.Kind == bus.DeliveryMessage {
						if id, err := bodyID(b); err == nil {
							data, _ := b["data"].(string)
							deliver(i, id, []byte(data))
						}
					}
				case <-f.ctx.Done():
					return
				}
			}
		}()
	}
	return f, nil
}

func (f *busFanout) publish(id uint64, p []byte) error {
	if len(f.data) != len(p) {
		f.data = string(p)
	}
	_, err := f.nodes[0].Publish(f.ctx, bus.Pub{Subject: "bench.fan", Body: map[string]any{"id": id, "data": f.data}})
	return err
}

func (f *busFanout) close() {
	f.cancel()
	f.wg.Wait()
	closeBus(f.stacks, f.roads, f.nodes...)
}
