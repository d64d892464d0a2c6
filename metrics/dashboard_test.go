package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/metrics"
	"github.com/raet-go/raet/road"
)

// Every series the Grafana dashboard and docs/metrics.md query is one the
// collectors describe (a summary's _sum and _count included), and every
// collector's series is documented in docs/metrics.md.
func TestDashboardQueriesKnownSeries(t *testing.T) {
	rs, err := road.New(&road.Config{Name: "a", Listen: "127.0.0.1:0", AlivePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ls, err := lane.New(&lane.Config{Dir: t.TempDir(), Name: "y"})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	tr, err := bus.NewMemNet(0).Transport("n")
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	bn, err := bus.New(tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bn.Close()

	known := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for _, c := range []prometheus.Collector{metrics.NewRoad(rs, nil), metrics.NewLane(ls), metrics.NewBus(bn)} {
		ch := make(chan *prometheus.Desc, 100)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			name := fqName.FindStringSubmatch(d.String())[1]
			known[name] = true
			known[name+"_sum"], known[name+"_count"] = true, true
		}
	}

	b, err := os.ReadFile("../docs/grafana/raet.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	series := regexp.MustCompile(`raet_[a-z_]+`)
	queried := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			for _, name := range series.FindAllString(q.Expr, -1) {
				queried++
				if !known[name] {
					t.Errorf("panel %q queries %s, which no collector makes", p.Title, name)
				}
			}
		}
	}
	if queried == 0 {
		t.Fatal("the dashboard queries nothing")
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range known {
		if strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") {
			continue
		}
		short := name[strings.Index(name[len("raet_"):], "_")+len("raet_")+1:] // raet_road_x → x
		if !strings.Contains(string(doc), "`"+short+"`") && !strings.Contains(string(doc), short+"`") {
			t.Errorf("%s is not in docs/metrics.md", name)
		}
	}
}
