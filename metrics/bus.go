package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raet-go/raet/bus"
)

// Bus collects a bus node's counters at scrape time.
type Bus struct {
	n                                                  *bus.Node
	ignored, peers, published, subscriptions, hwmDrops *prometheus.Desc
	cuts, refused, historyErrors, queued               *prometheus.Desc
	requests, requestsPending, jobs, jobsNow           *prometheus.Desc
}

// NewBus returns a collector of n's counters.
func NewBus(n *bus.Node) *Bus {
	l := prometheus.Labels{"node": n.Name()}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("raet_bus_"+name, help, labels, l)
	}
	return &Bus{n: n,
		ignored:         d("ignored_total", "Envelopes ignored or not sent, by reason (not_envelope, bad_envelope, unknown_kind, control_drop, peer_event_drop, peer_limit).", "reason"),
		peers:           d("peers", "Peers by state (up, down).", "state"),
		published:       d("published_total", "Messages published."),
		subscriptions:   d("subscriptions", "Subscriptions to this node now."),
		hwmDrops:        d("hwm_drops_total", "Messages dropped for subscribers at their high-water mark, all subscriptions."),
		cuts:            d("cuts_total", "Subscribers cut off (policy cut)."),
		refused:         d("subscriptions_refused_total", "Subscriptions refused (bad filters, too many)."),
		historyErrors:   d("history_errors_total", "Messages a durable history failed to keep."),
		queued:          d("subscriber_queued", "Messages held for subscribers now, all subscriptions."),
		requests:        d("requests_total", "Requests by result: sent, replied, timeout, late (a reply after its request gave up), retried (a group request sent to another member).", "result"),
		requestsPending: d("requests_pending", "Requests waiting for their reply."),
		jobs:            d("jobs_total", "Jobs pushed, done, reassigned, duplicate (done reports for jobs already done).", "result"),
		jobsNow:         d("jobs", "Jobs now: waiting for a puller, or in flight.", "state"),
	}
}

// Describe sends the descriptions of every series Collect makes.
func (c *Bus) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.ignored, c.peers, c.published, c.subscriptions, c.hwmDrops, c.cuts,
		c.refused, c.historyErrors, c.queued, c.requests, c.requestsPending, c.jobs, c.jobsNow)
}

// Collect reads the node's counters.
func (c *Bus) Collect(ch chan<- prometheus.Metric) {
	s := c.n.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) { counter(ch, d, v, labels...) }
	gauge := func(d *prometheus.Desc, v int, labels ...string) { gauge(ch, d, v, labels...) }
	counter(c.ignored, s.NotEnvelope, "not_envelope")
	counter(c.ignored, s.BadEnvelope, "bad_envelope")
	counter(c.ignored, s.UnknownKind, "unknown_kind")
	counter(c.ignored, s.ControlDrops, "control_drop")
	counter(c.ignored, s.PeerEventDrops, "peer_event_drop")
	counter(c.ignored, s.PeerLimit, "peer_limit")
	up := 0
	peers := c.n.Peers()
	for _, ok := range peers {
		if ok {
			up++
		}
	}
	gauge(c.peers, up, "up")
	gauge(c.peers, len(peers)-up, "down")
	p := s.Publisher
	counter(c.published, p.Published)
	gauge(c.subscriptions, p.Subscriptions)
	counter(c.hwmDrops, p.Drops)
	counter(c.cuts, p.Cuts)
	counter(c.refused, p.Refused)
	counter(c.historyErrors, p.HistoryErrors)
	queued := 0
	for _, sub := range c.n.Subscribers() {
		queued += sub.Queued
	}
	gauge(c.queued, queued)
	r := s.Requester
	counter(c.requests, r.Requests, "sent")
	counter(c.requests, r.Replies, "replied")
	counter(c.requests, r.Timeouts, "timeout")
	counter(c.requests, r.Late, "late")
	counter(c.requests, r.Retried, "retried")
	gauge(c.requestsPending, r.Pending)
	j := s.Pusher
	counter(c.jobs, j.Pushed, "pushed")
	counter(c.jobs, j.Done, "done")
	counter(c.jobs, j.Reassigned, "reassigned")
	counter(c.jobs, j.Duplicates, "duplicate")
	gauge(c.jobsNow, j.Waiting, "waiting")
	gauge(c.jobsNow, j.InFlight, "in_flight")
}
