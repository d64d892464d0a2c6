package bus_test

import (
	"errors"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
)

// What reaches a transport before its node attaches (the peer's first
// hello and a request, here) is handed to the node when it does: a hello
// left in the unread channel was never answered, and with heartbeats off
// nothing asked again (TestRequestReply/lane failed 9 of 40 runs so).
func TestMessagesBeforeAttach(t *testing.T) {
	for _, k := range []netKind{roadKind(0), laneKind()} {
		t.Run(k.name, func(t *testing.T) {
			trs := k.make(t, "client", "server")
			client := newNode(t, trs[0], &bus.Config{Heartbeat: -1})
			ctx := ctxT(t, 30*time.Second)
			got := make(chan error, 1)
			go func() {
				_, err := client.Request(ctx, "server", "nobody.home", map[string]any{})
				got <- err
			}()
			// The hello and the request wait in the server's channel.
			for i := 0; len(trs[1].Receive()) < 2; i++ {
				if i == 3000 {
					t.Fatalf("%d messages queued at the server after 30 s", len(trs[1].Receive()))
				}
				time.Sleep(10 * time.Millisecond)
			}
			newNode(t, trs[1], &bus.Config{Heartbeat: -1})
			var re *bus.RemoteError
			if err := <-got; !errors.As(err, &re) {
				t.Fatalf("the request queued before the server's node: %v, want its answer that nobody serves it", err)
			}
			for i := 0; ; i++ {
				if rtt, _ := client.RTT("server"); rtt.Count > 0 {
					break
				}
				if i == 3000 {
					t.Fatal("the client's first hello was never answered")
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
