package road

import (
	"net/netip"
	"runtime"
	"time"

	"github.com/raet-go/raet/road/internal/core"
)

// rxDatagram is a datagram a reader parsed and, for an Ed25519 foot,
// checked, in its read buffer.
type rxDatagram struct {
	buf *[]byte
	in  core.Inbound
}

// maxReaders bounds the reader goroutines: one per core, up to four.
const maxReaders = 4

// readerTurns are the tokens that let a reader goroutine read the socket
// and push what it read to the owner. The readers pass both round a ring,
// so they read batches in turn, check signatures at the same time, and
// hand the batches to the owner in the order they were read: a burst of
// segments is not reordered on its way in. A reader keeps both turns, and
// reads again itself, while what it reads is light (fewer datagrams than
// it offered buffers for, and the batch before had no signature to
// check): then nothing waits that another reader could take on at the
// same time, and passing the turns on would cost each datagram two
// wake-ups (the next reader's, to find the socket empty, and the
// turn's way back).
type readerTurns struct {
	read, push chan struct{}
}

// startReaders starts the reader goroutines, one per GOMAXPROCS up to
// maxReaders, the first holding both turns.
func (s *Stack) startReaders() {
	readers := min(runtime.GOMAXPROCS(0), maxReaders)
	turns := make([]readerTurns, readers)
	for i := range turns {
		turns[i] = readerTurns{read: make(chan struct{}, 1), push: make(chan struct{}, 1)}
	}
	turns[0].read <- struct{}{}
	turns[0].push <- struct{}{}
	s.wg.Add(readers)
	feet := core.NewFootChecker(&s.verifies) // one memory of checked feet for all readers
	s.core.OwnFeet(feet)                     // sized to the remotes: given back as they go
	for i := range readers {
		if i > 0 {
			feet = feet.Twin()
		}
		go s.readLoop(turns[i], turns[(i+1)%readers], feet)
	}
}

// take waits for a turn; false when the stack is closing.
func (s *Stack) take(turn chan struct{}) bool {
	select {
	case <-turn:
		return true
	case <-s.closing:
		return false
	}
}

func (s *Stack) readLoop(mine, next readerTurns, feet *core.FootChecker) {
	defer s.wg.Done()
	var (
		ptrs [ioBatch]*[]byte
		// bufs[i] is *ptrs[i] while this reader holds it and nil once it
		// is handed on: a slice left behind keeps its buffer live (for
		// good, beyond the last batch as large).
		bufs  [ioBatch][]byte
		ns    [ioBatch]int
		froms [ioBatch]netip.AddrPort
		ds    [ioBatch]rxDatagram
		fails int // transient read errors in a row
	)
	defer func() {
		for _, bp := range ptrs {
			if bp != nil {
				s.bufs.Put(bp)
			}
		}
	}()
	want := minReadBatch // the buffers of the next read
	holding := false     // this reader holds both turns (it reads alone)
	heavy := false       // the last batch had signatures to check
	for {
		if !holding && !s.take(mine.read) {
			return
		}
		// Only the reader whose turn it is holds empty buffers, as many as
		// twice what the last read took: the others, and an idle stack,
		// hold few.
		for i := range want {
			if ptrs[i] == nil {
				ptrs[i] = s.bufs.Get().(*[]byte)
				bufs[i] = *ptrs[i]
			}
		}
		n, err := s.io.read(bufs[:want], ns[:want], froms[:want])
		for i := n; i < len(ptrs); i++ {
			if ptrs[i] != nil { // unused: for the next reader
				s.bufs.Put(ptrs[i])
				ptrs[i], bufs[i] = nil, nil
			}
		}
		share := err != nil || n == want || heavy
		want = min(ioBatch, max(minReadBatch, 2*n))
		if share {
			next.read <- struct{}{}
		}
		if err != nil {
			n = 0
			select {
			case <-s.closing:
				return
			default:
			}
			if !transient(err) {
				s.fail(err)
				return
			}
			// A transient error (ICMP unreachable and such): wait a little
			// more after each one in a row, and still take the push turn,
			// to pass it on.
			fails++
			if !s.pause(fails) {
				return
			}
		} else {
			fails = 0
		}
		k := 0
		feet.Shed = n == ioBatch
		verified := s.verifies.Load()
		for i := range n {
			if ns[i] < 0 {
				s.unreadable.Add(1)
				continue
			}
			b := bufs[i][:ns[i]]
			if s.cfg.Tap != nil {
				s.cfg.Tap(TapPacket{Local: s.addr, Remote: froms[i], Time: time.Now(), Data: b})
			}
			// Parse and verify here, off the owner goroutine, so that the
			// signature checks of received packets run beside the owner's
			// work; the owner never verifies them again. A full batch says
			// the socket holds more: presence is shed (FootChecker.Shed).
			ds[k].buf = ptrs[i]
			ptrs[i], bufs[i] = nil, nil
			feet.Parse(&ds[k].in, b, froms[i], s.keys)
			k++
		}
		heavy = s.verifies.Load() != verified
		if !holding && !s.take(mine.push) {
			for i := range k {
				s.bufs.Put(ds[i].buf)
			}
			return
		}
		for i := range k {
			select {
			case s.inbound <- ds[i]:
			case <-s.closing:
				for _, d := range ds[i:k] {
					s.bufs.Put(d.buf)
				}
				return
			}
			ds[i] = rxDatagram{}
		}
		if holding = !share; share {
			next.push <- struct{}{}
		}
	}
}

// pause waits after the nth transient read error in a row: 1ms, doubling
// up to 100ms, so a socket that keeps failing is not spun on. It reports
// false when the stack is stopping.
func (s *Stack) pause(n int) bool {
	t := time.NewTimer(min(time.Millisecond<<min(n-1, 7), 100*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.closing:
		return false
	}
}
