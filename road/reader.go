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
	r := &reader{s: s, feet: feet}
	defer r.release()
	want := minReadBatch // the buffers of the next read
	holding := false     // this reader holds both turns (it reads alone)
	heavy := false       // the last batch had signatures to check
	fails := 0           // transient read errors in a row
	for {
		if !holding && !s.take(mine.read) {
			return
		}
		n, err := r.read(want)
		share := err != nil || n == want || heavy
		want = min(ioBatch, max(minReadBatch, 2*n))
		if share {
			next.read <- struct{}{}
		}
		if err != nil {
			n = 0
			if fails++; !s.readFailed(err, fails) {
				return
			}
		} else {
			fails = 0
		}
		verified := s.verifies.Load()
		k := r.parse(n)
		heavy = s.verifies.Load() != verified
		if !holding && !s.take(mine.push) {
			r.drop(0, k)
			return
		}
		if !r.push(k) {
			return
		}
		if holding = !share; share {
			next.push <- struct{}{}
		}
	}
}

// reader is a reader goroutine's memory: the read buffers it holds, and
// the datagrams of its last read.
type reader struct {
	s    *Stack
	feet *core.FootChecker
	ptrs [ioBatch]*[]byte
	// bufs[i] is *ptrs[i] while this reader holds it and nil once it is
	// handed on: a slice left behind keeps its buffer live (for good,
	// beyond the last batch as large).
	bufs  [ioBatch][]byte
	ns    [ioBatch]int
	froms [ioBatch]netip.AddrPort
	ds    [ioBatch]rxDatagram
}

// read reads a batch into want buffers. Only the reader whose turn it is
// holds empty buffers, as many as twice what the last read took: the
// others, and an idle stack, hold few.
func (r *reader) read(want int) (int, error) {
	for i := range want {
		if r.ptrs[i] == nil {
			r.ptrs[i] = r.s.bufs.Get().(*[]byte)
			r.bufs[i] = *r.ptrs[i]
		}
	}
	n, err := r.s.io.read(r.bufs[:want], r.ns[:want], r.froms[:want])
	for i := n; i < len(r.ptrs); i++ {
		if r.ptrs[i] != nil { // unused: for the next reader
			r.s.bufs.Put(r.ptrs[i])
			r.ptrs[i], r.bufs[i] = nil, nil
		}
	}
	return n, err
}

// readFailed reports whether the reader goes on after its fails-th read
// error in a row: a transient one (ICMP unreachable and such) waits a
// little more after each one in a row, and the reader still takes the
// push turn, to pass it on; any other fails the stack.
func (s *Stack) readFailed(err error, fails int) bool {
	select {
	case <-s.closing:
		return false
	default:
	}
	if !transient(err) {
		s.fail(err)
		return false
	}
	return s.pause(fails)
}

// parse parses and verifies the n datagrams read, into ds, and returns how
// many it kept. It runs here, off the owner goroutine, so that the
// signature checks of received packets run beside the owner's work; the
// owner never verifies them again. A full batch says the socket holds
// more: presence is shed (FootChecker.Shed).
func (r *reader) parse(n int) int {
	s := r.s
	k := 0
	r.feet.Shed = n == ioBatch
	for i := range n {
		if r.ns[i] < 0 {
			s.unreadable.Add(1)
			continue
		}
		b := r.bufs[i][:r.ns[i]]
		if s.cfg.Tap != nil {
			s.cfg.Tap(TapPacket{Local: s.addr, Remote: r.froms[i], Time: time.Now(), Data: b})
		}
		r.ds[k].buf = r.ptrs[i]
		r.ptrs[i], r.bufs[i] = nil, nil
		r.feet.Parse(&r.ds[k].in, b, r.froms[i], s.keys)
		k++
	}
	return k
}

// push hands the first k datagrams to the owner, in order; false when the
// stack is closing (the rest are dropped).
func (r *reader) push(k int) bool {
	for i := range k {
		select {
		case r.s.inbound <- r.ds[i]:
		case <-r.s.closing:
			r.drop(i, k)
			return false
		}
		r.ds[i] = rxDatagram{}
	}
	return true
}

// drop gives back the buffers of datagrams i to k, not handed on.
func (r *reader) drop(i, k int) {
	for j := i; j < k; j++ {
		r.s.bufs.Put(r.ds[j].buf)
		r.ds[j] = rxDatagram{}
	}
}

// release gives back the empty buffers the reader holds as it stops.
func (r *reader) release() {
	for _, bp := range r.ptrs {
		if bp != nil {
			r.s.bufs.Put(bp)
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
