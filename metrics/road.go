package metrics

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raet-go/raet/road"
)

// RoadOptions tune a road collector; the zero value is the defaults.
type RoadOptions struct {
	// TopRemotes is how many remotes get per-remote series (srtt, rttvar,
	// retransmits, transactions): those with the most retransmissions,
	// then the most transactions under way. 0 exports none.
	TopRemotes int
	// Timeout bounds a scrape's wait for the stack's goroutine; 0 is one
	// second.
	Timeout time.Duration
}

// Road collects a road stack's counters at scrape time.
type Road struct {
	s    *road.Stack
	opts RoadOptions
	d    roadDescs
}

type roadDescs struct {
	packets, bytes, drops, retransmits, spurious, duplicates, messagesIn, messagesOut, events *prometheus.Desc
	eventDrops, sendErrors, verifications, reassembling, reassemblyBytes, rtt                 *prometheus.Desc
	receiveQueue, eventQueue, waiting, remotes                                                *prometheus.Desc
	srtt, rttvar, remoteRetransmits, remoteTxns                                               *prometheus.Desc
}

// RemoteState is the one state a road collector files a remote under
// (raet_road_remotes{state}): reaped, alive (allowed and answering),
// dead (allowed, its alive timed out), joined (not allowed) or unjoined.
func RemoteState(r road.Remote) string {
	switch {
	case r.Reaped:
		return "reaped"
	case r.Allowed && r.Alive:
		return "alive"
	case r.Allowed:
		return "dead"
	case r.Joined:
		return "joined"
	}
	return "unjoined"
}

var remoteStates = [...]string{"alive", "dead", "joined", "unjoined", "reaped"}

// NewRoad returns a collector of s's counters (opts nil: the defaults).
func NewRoad(s *road.Stack, opts *RoadOptions) *Road {
	c := &Road{s: s}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Timeout <= 0 {
		c.opts.Timeout = time.Second
	}
	l := prometheus.Labels{"estate": s.Name()}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("raet_road_"+name, help, labels, l)
	}
	kind := []string{"direction", "transaction", "packet"}
	c.d = roadDescs{
		packets:           d("packets_total", "Road packets by direction (in, out) and transaction and packet kind; packets sent again are in raet_road_retransmits_total.", kind...),
		bytes:             d("bytes_total", "Bytes of raet_road_packets_total, by the same labels.", kind...),
		drops:             d("drops_total", "Received datagrams dropped, by reason.", "reason"),
		retransmits:       d("retransmits_total", "Packets sent again (redo timers and resend requests)."),
		spurious:          d("spurious_retransmits_total", "Messages sent again whose done then came sooner after the copy than any round trip took: the copy was not needed (the sender's view)."),
		duplicates:        d("duplicates_total", "Message segments (and messages) received again while held: spurious retransmissions of the sender, or network duplicates."),
		messagesIn:        d("messages_received_total", "Messages delivered to the application."),
		messagesOut:       d("messages_sent_total", "Messages sent, by result: done (the remote has it) or failed.", "result"),
		events:            d("events_total", "Remote events (joined, pending, rejected, allowed, alive, dead, ...) by kind and reason: the outcomes of joins and allows.", "event", "reason"),
		eventDrops:        d("event_drops_total", "Events lost because Events() was not read."),
		sendErrors:        d("send_errors_total", "Datagrams the system refused to send."),
		verifications:     d("verifications_total", "Ed25519 signatures checked."),
		reassembling:      d("reassembling", "Segmented messages being reassembled."),
		reassemblyBytes:   d("reassembly_bytes", "Memory charged for the messages being reassembled."),
		rtt:               d("message_rtt_seconds", "Message round trips, from the first packet to the done."),
		receiveQueue:      d("receive_queue", "Messages received and not yet read by the application."),
		eventQueue:        d("event_queue", "Events not yet read by the application."),
		waiting:           d("waiting_messages", "Messages held back, waiting to start (send windows, new sessions)."),
		remotes:           d("remotes", "Remote estates by state (alive, dead, joined, unjoined, reaped).", "state"),
		srtt:              d("remote_srtt_seconds", "Smoothed round-trip estimate of a remote (top remotes only, see RoadOptions.TopRemotes).", "remote"),
		rttvar:            d("remote_rttvar_seconds", "Round-trip variation estimate of a remote (top remotes only).", "remote"),
		remoteRetransmits: d("remote_retransmits_total", "Packets of a remote's messages and alives sent again (top remotes only).", "remote"),
		remoteTxns:        d("remote_transactions", "A remote's transactions under way (top remotes only), by what: all, or messages waiting to start.", "remote", "state"),
	}
	return c
}

// Describe sends the descriptions of every series Collect makes.
func (c *Road) Describe(ch chan<- *prometheus.Desc) {
	d := &c.d
	describe(ch, d.packets, d.bytes, d.drops, d.retransmits, d.spurious, d.duplicates, d.messagesIn, d.messagesOut,
		d.events, d.eventDrops, d.sendErrors, d.verifications, d.reassembling, d.reassemblyBytes, d.rtt,
		d.receiveQueue, d.eventQueue, d.waiting, d.remotes, d.srtt, d.rttvar, d.remoteRetransmits, d.remoteTxns)
}

// Collect reads the stack's counters and remotes. A closed stack yields
// nothing; a stack that does not answer within the timeout fails the
// scrape.
func (c *Road) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	n, err := c.s.Counters(ctx)
	if err != nil {
		c.fail(ch, err)
		return
	}
	rs, err := c.s.Remotes(ctx)
	if err != nil {
		c.fail(ch, err)
		return
	}
	d := &c.d
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) { counter(ch, desc, v, labels...) }
	gauge := func(desc *prometheus.Desc, v int, labels ...string) { gauge(ch, desc, v, labels...) }
	byKind := func(desc *prometheus.Desc, dir string, m map[string]uint64) {
		for k, v := range m {
			t, p, _ := strings.Cut(k, "/")
			counter(desc, v, dir, t, p)
		}
	}
	byKind(d.packets, "in", n.PacketsIn)
	byKind(d.packets, "out", n.PacketsOut)
	byKind(d.bytes, "in", n.BytesIn)
	byKind(d.bytes, "out", n.BytesOut)
	for r, v := range n.Drops {
		counter(d.drops, v, r)
	}
	for k, v := range n.Events {
		e, why, _ := strings.Cut(k, "/")
		counter(d.events, v, e, why)
	}
	counter(d.retransmits, n.Retransmits)
	counter(d.spurious, n.SpuriousRetransmits)
	counter(d.duplicates, n.Duplicates)
	counter(d.messagesIn, n.MessagesIn)
	counter(d.messagesOut, n.MessagesOut, "done")
	counter(d.messagesOut, n.MessageFails, "failed")
	counter(d.eventDrops, n.EventDrops)
	counter(d.sendErrors, n.SendErrors)
	counter(d.verifications, n.Verifications)
	gauge(d.reassembling, n.Reassembling)
	gauge(d.reassemblyBytes, n.ReassemblyMemory)
	ch <- prometheus.MustNewConstSummary(d.rtt, n.RTT.Count, n.RTT.Avg.Seconds()*float64(n.RTT.Count), nil)
	gauge(d.receiveQueue, n.ReceiveQueue)
	gauge(d.eventQueue, n.EventQueue)

	var states [len(remoteStates)]int
	waiting := 0
	for _, r := range rs {
		states[slices.Index(remoteStates[:], RemoteState(r))]++
		waiting += r.Waiting
	}
	for i, s := range remoteStates {
		gauge(d.remotes, states[i], s)
	}
	gauge(d.waiting, waiting)
	for _, r := range TopRemotes(rs, c.opts.TopRemotes) {
		ch <- prometheus.MustNewConstMetric(d.srtt, prometheus.GaugeValue, r.SRTT.Seconds(), r.Name)
		ch <- prometheus.MustNewConstMetric(d.rttvar, prometheus.GaugeValue, r.RTTVar.Seconds(), r.Name)
		counter(d.remoteRetransmits, r.Retransmits, r.Name)
		gauge(d.remoteTxns, r.Transactions, r.Name, "under_way")
		gauge(d.remoteTxns, r.Waiting, r.Name, "waiting")
	}
}

func (c *Road) fail(ch chan<- prometheus.Metric, err error) {
	if errors.Is(err, road.ErrClosed) {
		return
	}
	ch <- prometheus.NewInvalidMetric(c.d.packets, err)
}

// TopRemotes returns at most n of rs (sorted in place): the most
// retransmissions first, then the most transactions under way and
// waiting, then by name.
func TopRemotes(rs []road.Remote, n int) []road.Remote {
	if n <= 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b road.Remote) int {
		return cmp.Or(cmp.Compare(b.Retransmits, a.Retransmits),
			cmp.Compare(b.Transactions+b.Waiting, a.Transactions+a.Waiting),
			strings.Compare(a.Name, b.Name))
	})
	return rs[:min(n, len(rs))]
}

// counter and gauge send one constant series of a collector.
func counter(ch chan<- prometheus.Metric, d *prometheus.Desc, v uint64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, v int, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
}

// describe sends ds (a collector's Describe).
func describe(ch chan<- *prometheus.Desc, ds ...*prometheus.Desc) {
	for _, d := range ds {
		ch <- d
	}
}
