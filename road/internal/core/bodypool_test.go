package core

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// bodiesGiven counts the body buffers given back to the pool.
var bodiesGiven atomic.Int64

// spoilt fills what a buffer given back holds.
const spoilt = 0xEE

// Every body buffer the core gives back is spoilt before the pool keeps
// it, in every test of the package: a body read after its buffer went back
// (resent, bundled again, relaunched in a new session) then arrives
// spoilt, and its test fails. One given back twice is all spoilt already.
func init() {
	bodies.given = func(b *[]byte) {
		all := (*b)[:cap(*b)]
		if bytes.Count(all, []byte{spoilt}) == len(all) {
			panic("core: a body buffer was given back twice")
		}
		for i := range all {
			all[i] = spoilt
		}
		bodiesGiven.Add(1)
	}
}

// A body's pooled buffer goes back once its message has its outcome, each
// exactly once, and no sooner: every message arrives whole though its
// first datagrams were lost (so resent from the body), whether it travels
// bundled or in segments, and though a new session came while it was
// under way (saved and sent again); a message to an unknown remote, or
// failed by Shutdown, gives its buffer back too.
func TestBodyBuffersGivenBackAtOutcome(t *testing.T) {
	for _, tp := range profiles {
		for _, size := range []int{100, 5000} {
			t.Run(fmt.Sprintf("%s/%d", tp.name, size), func(t *testing.T) {
				p := joinedPair(t, tp)
				given := bodiesGiven.Load()
				want := map[string]string{}
				var res []chan error
				send := func(n int) {
					for range n {
						tag := fmt.Sprint("m", len(want))
						want[tag] = strings.Repeat(tag[len(tag)-1:], size)
						b, err := p.other.marshal(map[string]any{"tag": tag, "data": want[tag]})
						if err != nil {
							t.Fatal(err)
						}
						ch := make(chan error, 1)
						sendPooled(p.other, "main", b, MsgID{}, ch, p.now)
						res = append(res, ch)
					}
				}
				// The first two datagrams of messages lost: sent again.
				lost := 2
				p.cut = func(w wired) bool {
					if lost > 0 && w.from == p.other {
						lost--
						return true
					}
					return false
				}
				send(4)
				p.pump()
				p.advance(5 * time.Second)
				if p.other.stats.c.Retransmits == 0 {
					t.Fatal("nothing was sent again")
				}
				// Under way when a new session comes: saved, sent again.
				p.underWayAcrossAllow(func() { send(3) })
				p.advance(5 * time.Second)
				for i, ch := range res {
					if err, ok := outcome(ch); !ok || err != nil {
						t.Fatalf("message %d: %v (outcome %v)", i, err, ok)
					}
				}
				got := map[string]int{}
				for _, m := range p.delivered[p.main] {
					tag, _ := m.Body["tag"].(string)
					if want[tag] == "" || m.Body["data"] != want[tag] {
						t.Fatalf("delivered a spoilt or unknown body: %.80v", m.Body)
					}
					got[tag]++
				}
				for tag := range want {
					if got[tag] != 1 {
						t.Fatalf("%s delivered %d times", tag, got[tag])
					}
				}
				if n := bodiesGiven.Load() - given; n != int64(len(want)) {
					t.Fatalf("%d body buffers given back for %d messages", n, len(want))
				}

				// To an unknown remote, and failed by Shutdown.
				given = bodiesGiven.Load()
				unknown, shut := make(chan error, 1), make(chan error, 1)
				b, _ := p.other.marshal(map[string]any{"n": 1})
				sendPooled(p.other, "nobody", b, MsgID{}, unknown, p.now)
				p.cut = func(wired) bool { return true }
				sendPooled(p.other, "main", b, MsgID{}, shut, p.now)
				p.pump()
				p.other.Shutdown()
				if err, _ := outcome(unknown); !errors.Is(err, ErrUnknownRemote) {
					t.Fatalf("to an unknown remote: %v", err)
				}
				if err, _ := outcome(shut); !errors.Is(err, ErrClosed) {
					t.Fatalf("at Shutdown: %v", err)
				}
				if n := bodiesGiven.Load() - given; n != 2 {
					t.Fatalf("%d body buffers given back for the unknown remote's and Shutdown's, want 2", n)
				}
			})
		}
	}
}
