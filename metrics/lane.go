package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/raet-go/raet/lane"
)

// Lane collects a lane stack's counters at scrape time.
type Lane struct {
	s                                                     *lane.Stack
	pages, bytes, messages, drops, retries, sendErrors    *prometheus.Desc
	misaddressed, yardEvents, yards, receiveQueue, resent *prometheus.Desc
}

// NewLane returns a collector of s's counters.
func NewLane(s *lane.Stack) *Lane {
	l := prometheus.Labels{"yard": s.Lane() + "." + s.Name()}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("raet_lane_"+name, help, labels, l)
	}
	return &Lane{s: s,
		pages:        d("pages_total", "Lane pages by direction (in: read, out: written).", "direction"),
		bytes:        d("bytes_total", "Bytes of raet_lane_pages_total.", "direction"),
		messages:     d("messages_total", "Messages by direction (in: delivered, out: sent whole).", "direction"),
		drops:        d("drops_total", "Pages and unfinished books dropped, by reason.", "reason"),
		retries:      d("retries_total", "Writes retried because the destination was busy."),
		sendErrors:   d("send_errors_total", "Sends that failed."),
		misaddressed: d("misaddressed_total", "Pages addressed to another yard name (accepted, as the reference does)."),
		yardEvents:   d("remote_changes_total", "Remote yards added, removed (socket gone) or evicted (MaxYards).", "change"),
		yards:        d("remotes", "Remote yards known."),
		receiveQueue: d("receive_queue", "Messages received and not yet read by the application."),
		resent:       d("resent_total", "Messages of an earlier run sent from the queue by Start."),
	}
}

// Describe sends the descriptions of every series Collect makes.
func (c *Lane) Describe(ch chan<- *prometheus.Desc) {
	describe(ch, c.pages, c.bytes, c.messages, c.drops, c.retries, c.sendErrors,
		c.misaddressed, c.yardEvents, c.yards, c.receiveQueue, c.resent)
}

// Collect reads the stack's counters.
func (c *Lane) Collect(ch chan<- prometheus.Metric) {
	n := c.s.Counters()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) { counter(ch, d, v, labels...) }
	counter(c.pages, n.PagesIn, "in")
	counter(c.pages, n.PagesOut, "out")
	counter(c.bytes, n.BytesIn, "in")
	counter(c.bytes, n.BytesOut, "out")
	counter(c.messages, n.MessagesIn, "in")
	counter(c.messages, n.MessagesOut, "out")
	for _, r := range lane.DropReasons() {
		counter(c.drops, n.Drops[r], r.String())
	}
	counter(c.retries, n.Retries)
	counter(c.sendErrors, n.SendErrors)
	counter(c.misaddressed, n.Misaddressed)
	counter(c.yardEvents, n.YardsAdded, "added")
	counter(c.yardEvents, n.YardsRemoved, "removed")
	counter(c.yardEvents, n.YardsEvicted, "evicted")
	counter(c.resent, n.Resent)
	gauge(ch, c.yards, len(c.s.Yards()))
	gauge(ch, c.receiveQueue, len(c.s.Receive()))
}
