package main

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// Report is what a run shows.
type Report struct {
	Clients, Changes int            // clients, and changes made by each
	Version          uint64         // the host document's last version
	Echoes           map[string]int // per client: its own deltas that came back and were discarded
	Applied          map[string]int // per client: other clients' deltas applied
	Converged        bool           // every replica equals the host's document
}

// estate starts a road estate on loopback and its bus node.
func estate(name string, main bool) (*road.Stack, *bus.Road, *bus.Node, error) {
	s, err := road.New(&road.Config{Name: name, Main: main, Listen: "127.0.0.1:0", Auto: keep.AutoAlways})
	if err != nil {
		return nil, nil, nil, err
	}
	if err := s.Start(); err != nil {
		return nil, nil, nil, err
	}
	t := bus.NewRoad(s)
	// Replicas converge only if they miss no delta: the host lets its
	// subscribers hold Publish (Block), for as long as a slow client may
	// take, rather than drop.
	n, err := bus.New(t, &bus.Config{Policies: []bus.Policy{bus.Block}, BlockTimeout: time.Minute})
	if err != nil {
		t.Close()
		s.Close()
		return nil, nil, nil, err
	}
	return s, t, n, nil
}

// host keeps the document: it pulls the clients' changes and publishes
// each as a delta on doc.main.delta with the changing client as origin.
// It runs up to 4 changes of a client at once (Pull's credit), so it may
// take a client's edits of one key out of their order: each change carries
// its client's sequence number, and a change older than the last applied
// to its key leaves the newer value, which its delta carries again. So the
// host, and every replica, ends with each client's last edit of each key.
type host struct {
	node *bus.Node
	mu   sync.Mutex
	doc  map[string]any
	seqs map[string]int64 // per key: the seq of the change its value is
	ver  uint64
}

// seqOf reads a change's sequence number (an integer, as the serializer
// decoded it).
func seqOf(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case uint64:
		return int64(n), n <= 1<<62
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}

func (h *host) apply(ctx context.Context, j *bus.Job) (any, error) {
	ch, ok := j.Body.(map[string]any)
	key, _ := ch["key"].(string)
	seq, seqOK := seqOf(ch["seq"])
	if !ok || key == "" || !seqOK {
		return nil, fmt.Errorf("a change needs a key and a seq")
	}
	h.mu.Lock()
	defer h.mu.Unlock() // one at a time: versions follow the published order
	h.ver++
	if old, seen := h.seqs[key]; !seen || seq > old {
		h.doc[key], h.seqs[key] = ch["value"], seq
	}
	delta := map[string]any{"key": key, "value": h.doc[key], "version": h.ver}
	if _, err := h.node.Publish(ctx, bus.Pub{Subject: "doc.main.delta", Origin: j.From, Body: delta}); err != nil {
		return nil, err
	}
	return map[string]any{"version": h.ver}, nil
}

// client keeps a replica: it applies its own changes at once, pushes them
// to the host, and applies the deltas of others, discarding its own echoes
// by their origin.
type client struct {
	name    string
	node    *bus.Node
	mu      sync.Mutex
	doc     map[string]any
	echoes  int
	applied int
}

func (c *client) follow(ctx context.Context, s *bus.Subscription, want int, done func()) {
	defer done()
	for seen := 0; seen < want; {
		select {
		case d := <-s.Messages():
			if d.Kind != bus.DeliveryMessage {
				continue // no drops or gaps with the default policy (block)
			}
			seen++
			c.mu.Lock()
			if d.Origin == c.name {
				c.echoes++
			} else {
				delta := d.Body.(map[string]any)
				c.doc[delta["key"].(string)] = delta["value"]
				c.applied++
			}
			c.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

// Run starts a host and n clients on loopback; each client makes m changes
// to keys of its own (so that last-writer-wins needs no arbitration) and
// the run ends when every client has seen every delta.
func Run(ctx context.Context, n, m int) (Report, error) {
	rep := Report{Clients: n, Changes: m, Echoes: map[string]int{}, Applied: map[string]int{}}
	var cleanup []func()
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	hs, ht, hn, err := estate("host", true)
	if err != nil {
		return rep, err
	}
	cleanup = append(cleanup, func() { hn.Close(); ht.Close(); hs.Close() })
	h := &host{node: hn, doc: map[string]any{}, seqs: map[string]int64{}}

	var clients []*client
	var names []string
	for i := range n {
		name := fmt.Sprintf("client%d", i+1)
		s, t, node, err := estate(name, false)
		if err != nil {
			return rep, err
		}
		cleanup = append(cleanup, func() { node.Close(); t.Close(); s.Close() })
		if _, err := s.Join(ctx, hs.Addr().String()); err != nil {
			return rep, fmt.Errorf("%s joins the host: %w", name, err)
		}
		clients = append(clients, &client{name: name, node: node, doc: map[string]any{}})
		names = append(names, name)
	}
	// The host takes up to 4 changes at once from each client.
	if _, err := hn.Pull(names, 4, h.apply); err != nil {
		return rep, err
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		s, err := c.node.Subscribe("host", []string{"doc.*.delta"}, nil)
		if err != nil {
			return rep, err
		}
		select {
		case <-s.Ready():
		case <-ctx.Done():
			return rep, ctx.Err()
		}
		wg.Add(1)
		go c.follow(ctx, s, n*m, wg.Done)
	}
	// Every client edits at once.
	errs := make(chan error, n)
	for _, c := range clients {
		go func() {
			for i := range m {
				key := fmt.Sprintf("%s.p%d", c.name, i%3) // a client's own paragraphs, edited again and again
				value := fmt.Sprintf("%s edit %d", c.name, i)
				c.mu.Lock()
				c.doc[key] = value // optimistic: applied locally at once
				c.mu.Unlock()
				if _, err := c.node.Push(ctx, "doc.change", map[string]any{"key": key, "value": value, "seq": i}); err != nil {
					errs <- err
					return
				}
			}
			for range m { // the host's acknowledgements
				select {
				case r := <-c.node.Results():
					if r.Err != "" {
						errs <- fmt.Errorf("%s: change %d failed: %s", c.name, r.ID, r.Err)
						return
					}
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			return rep, err
		}
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	rep.Version = h.ver
	rep.Converged = true
	for _, c := range clients {
		c.mu.Lock()
		rep.Echoes[c.name], rep.Applied[c.name] = c.echoes, c.applied
		if !maps.Equal(c.doc, h.doc) {
			rep.Converged = false
		}
		c.mu.Unlock()
	}
	return rep, nil
}
