package bus_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
)

// subjects cycles through subjects of one to three tokens.
var subjects = []string{"orders.eu.new", "orders.us.new", "orders.eu.paid", "stock", "stock.eu", "audit.orders.eu.new"}

// Each subscriber gets exactly the messages matching its filters, once, in
// order, and the publisher sends nothing else to it.
func TestPubSubExactlyOnceInOrder(t *testing.T) {
	for _, k := range allKinds() {
		t.Run(k.name, func(t *testing.T) {
			n := 240
			if k.name == "road/loss30%" {
				n = 90
			}
			trs := k.make(t, "pub", "s1", "s2", "s3")
			ns := nodes(t, trs, &bus.Config{Heartbeat: -1})
			filters := [][]string{{"orders.>"}, {"*.eu.*", "stock"}, {">"}}
			var subs []*bus.Subscription
			for i, f := range filters {
				s, err := ns[i+1].Subscribe("pub", f, nil)
				if err != nil {
					t.Fatal(err)
				}
				ready(t, s)
				subs = append(subs, s)
			}
			ctx := ctxT(t, 2*time.Minute)
			for i := range n {
				if _, err := ns[0].Publish(ctx, bus.Pub{Subject: subjects[i%len(subjects)], Body: map[string]any{"i": i}}); err != nil {
					t.Fatal(err)
				}
			}
			for si, s := range subs {
				var want []int
				for i := range n {
					if matchAnyOf(filters[si], subjects[i%len(subjects)]) {
						want = append(want, i)
					}
				}
				msgs, all := collect(t, s, len(want), 2*time.Minute)
				if len(all) != len(msgs) {
					t.Fatalf("s%d: reports besides messages: %+v", si+1, all)
				}
				for j, m := range msgs {
					if m.Seq != uint64(want[j]+1) || fmt.Sprint(m.Body.(map[string]any)["i"]) != fmt.Sprint(want[j]) ||
						m.Subject != subjects[want[j]%len(subjects)] || m.Publisher != "pub" {
						t.Fatalf("s%d message %d: %+v, want #%d", si+1, j, m, want[j])
					}
				}
				quiet(t, s, 20*time.Millisecond)
				if st := s.Stats(); st.Messages != uint64(len(want)) || st.Gaps != 0 {
					t.Fatalf("s%d stats %+v", si+1, st)
				}
			}
			// The publisher sent each subscriber the matching messages only
			// (its count of sends done may lag the subscriber's by a moment).
			eventually(t, func() error {
				for _, st := range ns[0].Subscribers() {
					if st.Ended != "" {
						continue
					}
					want := 0
					for i := range n {
						if matchAnyOf(st.Filters, subjects[i%len(subjects)]) {
							want++
						}
					}
					if st.Sent != uint64(want) {
						return fmt.Errorf("publisher sent %d items to %s, want the %d matching", st.Sent, st.Peer, want)
					}
				}
				return nil
			})
		})
	}
}

func matchAnyOf(filters []string, subject string) bool {
	for _, f := range filters {
		if bus.Match(f, subject) {
			return true
		}
	}
	return false
}
