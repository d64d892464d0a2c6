package core

import (
	"runtime"
	"testing"
	"time"
)

// A main that a fleet left gives back the room its remotes took in what
// outlives them: the maps of the remotes, their names, roles and joins are
// rebuilt down to the least room a map takes (they stopped at 64 remotes
// and kept the room of up to 63: 3.2 KB here, 544 B now), and the owner's
// spare room for datagrams to send, grown by the alives of the last
// hundred and twenty, goes once they are forgotten (keptOut; it kept room
// for 157 datagrams, up to 26 KB for 256).
func TestForgottenFleetGivesBackRoom(t *testing.T) {
	const n = 2000
	c, _, now := idleMain(t, n)
	var spare []Datagram
	flush := func() { // as the owner: each flush hands the last one's room back
		if c.OutLen() > 0 {
			spare = c.TakeOut(spare)[:0]
		}
	}
	forget := func(keep int) {
		for _, r := range c.roster.remotes {
			if len(c.roster.remotes) <= keep {
				break
			}
			c.forget(r, ReasonSilent)
		}
		c.Deadline()
		c.ClearEvents()
		c.PublishKeys()
		flush()
	}
	forget(120)   // the last hundred and twenty, each sent an alive a period
	for range 4 { // an alive to each, twice
		now = now.Add(time.Second)
		c.Tick(now)
		flush()
	}

	if cap(spare) <= minKeptOut || cap(c.tx.out) <= minKeptOut {
		t.Fatalf("the alives to %d remotes took room for %d and %d datagrams: the test measures nothing", len(c.roster.remotes), cap(spare), cap(c.tx.out))
	}
	forget(0)
	if cap(c.tx.out) > minKeptOut {
		t.Errorf("the core keeps room for %d datagrams to send once its remotes are forgotten, want at most %d", cap(c.tx.out), minKeptOut)
	}
	heap := func() int64 { return int64(heapNow()) } // heap_test.go
	// What the forgetting left to collect (some of it once cleanups ran
	// after a collection) is collected first: the heap stays as it is.
	with := heap()
	for i := 0; i < 10; i++ {
		if h := heap(); h != with {
			with, i = h, 0
		}
	}
	c.roster.remotes, c.roster.byName, c.kept.roles, c.roster.joinees = nil, nil, nil, nil
	room := with - heap()
	runtime.KeepAlive(c)
	t.Logf("the emptied maps hold %d B", room)
	if room > 1<<10 {
		t.Errorf("the core's emptied maps of remotes, names, roles and joins hold %d B, want at most 1 KiB", room)
	}
}
