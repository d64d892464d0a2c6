package road

import (
	"time"

	"github.com/raet-go/raet/road/internal/core"
)

// writeLoop is the writer goroutine. It writes what the owner flushes
// until the owner closes outbound (it has stopped: everything is written)
// or the linger of Close runs out.
func (s *Stack) writeLoop() {
	defer s.wg.Done()
	defer close(s.writerDone)
	for {
		select {
		case bp, ok := <-s.outbound:
			if !ok {
				return
			}
			if !s.write(*bp) {
				return
			}
			s.handed.Add(-1) // after the write: the owner may write the next itself
			*bp = (*bp)[:0]
			s.batches.Put(bp)
		case <-s.abort:
			return
		}
	}
}

// write signs the Ed25519 feet the owner left (core.Config.SignLater),
// writes batch and releases its datagrams; false when the socket failed
// for good (the stack stops, and the datagrams are dropped).
func (s *Stack) write(batch []core.Datagram) bool {
	for i := range batch {
		batch[i].Sign()
	}
	if s.cfg.Tap != nil {
		for _, d := range batch {
			s.cfg.Tap(TapPacket{Out: true, Local: s.addr, Remote: d.To, Time: time.Now(), Data: d.B})
		}
	}
	failed, err := s.io.write(batch)
	s.sendErrs.Add(uint64(failed))
	for i := range batch {
		batch[i].Release()
	}
	if err != nil {
		s.fail(err)
		return false
	}
	return true
}

// maxDirect is the most datagrams the owner writes itself (direct) when
// they go to several addresses, and maxDirectRun the most bytes when they
// all go to one: a segmented message of the fast profile, about what one
// UDP_SEGMENT message takes (maxGSOBytes, where Linux has GSO).
const (
	maxDirect    = 8
	maxDirectRun = 64 << 10
)

// direct writes batch on the owner goroutine, and reports whether it did:
// when nothing in it waits to be signed, it is small (a bundle of
// messages, their dones, an ack) or one run to one address (a segmented
// message: a longer flush goes to the writer, whose system calls then run
// beside the owner's work), and the writer has written everything handed
// to it (so the datagrams to a remote leave in the order the core made
// them). Such a batch costs the owner one system call, a few µs (a 16 KiB
// message's 12 segments on loopback, about 17 µs, the receiver's kernel
// work included), where handing it over costs a wake-up of the writer on
// the datagrams' way: often longer than the system call on a virtual
// machine (the writer of a 16 KiB windowed exchange waited 90 µs a wake,
// runnable, for a core), and the most of a round trip of small messages
// on a loaded machine.
func (s *Stack) direct(batch []core.Datagram) bool {
	if s.handed.Load() != 0 || (len(batch) > maxDirect && !oneRun(batch)) {
		return false
	}
	for i := range batch {
		if batch[i].Unsigned() {
			return false
		}
	}
	s.write(batch)
	return true
}

// oneRun reports whether batch goes to one address, maxDirectRun bytes at
// most.
func oneRun(batch []core.Datagram) bool {
	n := 0
	for _, d := range batch {
		if n += len(d.B); n > maxDirectRun || d.To != batch[0].To {
			return false
		}
	}
	return true
}

// handOut takes the core's datagrams and writes them (direct) or hands
// them to the writer; false when Close's linger ran out.
func (s *Stack) handOut() bool {
	bp, ok := s.batches.Get().(*[]core.Datagram)
	if !ok {
		bp = new([]core.Datagram)
	}
	*bp = s.core.TakeOut(*bp)
	if s.direct(*bp) {
		*bp = (*bp)[:0]
		s.batches.Put(bp)
		return true
	}
	s.handed.Add(1)
	select { // while closing too: Close lingers for these
	case s.outbound <- bp:
		return true
	case <-s.abort:
		return false
	}
}
