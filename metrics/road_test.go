package metrics_test

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/raet-go/raet/metrics"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

// scrape serves reg's /metrics and parses the text back.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).
		ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, rec.Body)
	}
	return fams
}

// value finds the series of family name with the labels given as
// "k=v" pairs (besides the constant ones); ok false when there is none.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount()), true
		}
	}
	return 0, false
}

// Messages, segmented and not, over a link that loses a fifth of the
// datagrams each way: every counter of the stacks is on /metrics with the
// same value, and the loss shows as retransmissions.
func TestRoadMetricsEqualCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, o := roadtest.LossyPair(t, 7, netsim.Impairment{Loss: 0.2, Delay: time.Millisecond},
			road.Config{Name: "main"}, road.Config{Name: "other", MessageTimeout: time.Minute})
		const n = 40
		errs := make(chan error, n)
		for i := range n {
			body := map[string]any{"n": i, "pad": strings.Repeat("x", (i%4)*1500)}
			go func() { errs <- o.Send(t.Context(), "main", body) }()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		for range n {
			<-m.Receive()
		}
		synctest.Wait()

		for _, s := range []*road.Stack{m, o} {
			reg := prometheus.NewRegistry()
			c := metrics.NewRoad(s, &metrics.RoadOptions{TopRemotes: 4})
			reg.MustRegister(c)
			fams := scrape(t, reg)
			want, err := s.Counters(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			check := func(name string, v uint64, labels ...string) {
				t.Helper()
				got, ok := value(fams, name, labels...)
				if !ok || got != float64(v) {
					t.Errorf("%s: %s%v = %v (present %v), counters say %d", s.Name(), name, labels, got, ok, v)
				}
			}
			kinds := func(name, dir string, m map[string]uint64) {
				if len(m) == 0 {
					t.Errorf("%s: no %s %s", s.Name(), name, dir)
				}
				for k, v := range m {
					tk, pk, _ := strings.Cut(k, "/")
					check(name, v, "direction="+dir, "transaction="+tk, "packet="+pk)
				}
			}
			kinds("raet_road_packets_total", "in", want.PacketsIn)
			kinds("raet_road_packets_total", "out", want.PacketsOut)
			kinds("raet_road_bytes_total", "in", want.BytesIn)
			kinds("raet_road_bytes_total", "out", want.BytesOut)
			for r, v := range want.Drops {
				check("raet_road_drops_total", v, "reason="+r)
			}
			for k, v := range want.Events {
				e, why, _ := strings.Cut(k, "/")
				check("raet_road_events_total", v, "event="+e, "reason="+why)
			}
			check("raet_road_retransmits_total", want.Retransmits)
			check("raet_road_duplicates_total", want.Duplicates)
			check("raet_road_spurious_retransmits_total", want.SpuriousRetransmits)
			check("raet_road_messages_received_total", want.MessagesIn)
			check("raet_road_messages_sent_total", want.MessagesOut, "result=done")
			check("raet_road_messages_sent_total", want.MessageFails, "result=failed")
			check("raet_road_verifications_total", want.Verifications)
			check("raet_road_message_rtt_seconds", want.RTT.Count)
			check("raet_road_reassembling", uint64(want.Reassembling))
			check("raet_road_remotes", 1, "state=alive")

			rs, err := s.Remotes(t.Context())
			if err != nil || len(rs) != 1 {
				t.Fatalf("%s: remotes %v, %v", s.Name(), rs, err)
			}
			r := rs[0]
			check("raet_road_remote_retransmits_total", r.Retransmits, "remote="+r.Name)
			check("raet_road_remote_transactions", uint64(r.Transactions), "remote="+r.Name, "state=under_way")
			check("raet_road_remote_transactions", uint64(r.Waiting), "remote="+r.Name, "state=waiting")
			if got, _ := value(fams, "raet_road_remote_srtt_seconds", "remote="+r.Name); got != r.SRTT.Seconds() || (got == 0 && s == o) {
				t.Errorf("%s: srtt %v on /metrics, %v in Remotes", s.Name(), got, r.SRTT)
			}
			if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
				t.Errorf("%s: lint: %v %v", s.Name(), problems, err)
			}
		}
		// The loss was seen and mended.
		so, _ := o.Counters(t.Context())
		sm, _ := m.Counters(t.Context())
		if so.Retransmits == 0 || so.MessagesOut != n || sm.MessagesIn != n || sm.Duplicates == 0 {
			t.Errorf("other: %d retransmits, %d done; main: %d received, %d duplicates", so.Retransmits, so.MessagesOut, sm.MessagesIn, sm.Duplicates)
		}
		if sm.Events["joined"] == 0 || so.Events["allowed"] == 0 {
			t.Errorf("join outcomes not counted: main %v other %v", sm.Events, so.Events)
		}
		m.Close()
		o.Close()
	})
}

// Per-remote series are bounded: TopRemotes keeps the remotes with the
// most retransmissions.
func TestTopRemotes(t *testing.T) {
	var rs []road.Remote
	for i := range 10 {
		rs = append(rs, road.Remote{Name: fmt.Sprint("r", i), Retransmits: uint64(i % 3), Transactions: i})
	}
	top := metrics.TopRemotes(rs, 3)
	var names []string
	for _, r := range top {
		names = append(names, r.Name)
	}
	if got := strings.Join(names, ","); got != "r8,r5,r2" {
		t.Fatalf("top 3: %s", got)
	}
	if len(metrics.TopRemotes(rs, 0)) != 0 || len(metrics.TopRemotes(rs, 20)) != 10 {
		t.Fatal("bounds")
	}
}
