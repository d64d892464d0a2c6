package metrics_test

import (
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/raet-go/raet/metrics"
	"github.com/raet-go/raet/road"
)

// A road stack's counters in a registry of the application's; serve it
// with promhttp.HandlerFor where the application serves HTTP.
func ExampleNewRoad() {
	stack, err := road.New(&road.Config{Name: "alpha", Listen: "127.0.0.1:0", AlivePeriod: -1})
	if err != nil {
		log.Fatal(err)
	}
	if err := stack.Start(); err != nil {
		log.Fatal(err)
	}
	defer stack.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewRoad(stack, &metrics.RoadOptions{TopRemotes: 10}))
	fams, err := reg.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "raet_road_remotes" {
			for _, m := range f.GetMetric() {
				fmt.Println(m.GetLabel()[1].GetValue(), m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// alive 0
	// dead 0
	// joined 0
	// reaped 0
	// unjoined 0
}
