// Package metrics exposes the counters of road stacks, lane stacks and bus
// nodes as Prometheus collectors (github.com/prometheus/client_golang).
//
// A collector reads the stack's own counters (road.Stack.Counters and
// Remotes, lane.Stack.Counters, bus.Node.Stats and Subscribers) when it is
// scraped, so it costs nothing on the packet path: no Prometheus counter is
// incremented per packet. The package starts no HTTP server; register the
// collectors and serve the registry where the application wants it:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.NewRoad(stack, nil), metrics.NewBus(node, nil))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// Every series carries a constant label naming its stack (estate, yard or
// node), so that several stacks share a registry.
//
// # Cardinality
//
// The labels take values from fixed sets (packet kinds, drop reasons, event
// kinds and reasons, remote states) except remote, which names a remote
// estate: the per-remote series (srtt, rttvar, retransmits, transactions) are
// off by default and, with RoadOptions.TopRemotes = N, cover at most N
// remotes, the ones with the most retransmissions (then the most transactions,
// then by name), so a main with 10000 remotes exports at most N of each.
//
// The metric names and what they count are listed in docs/metrics.md.
package metrics
