package main

import (
	"container/heap"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/raet-go/raet/netsim"
)

// bridgePriority is the real-time priority of the bridge's threads: above
// every normal thread, below the kernel's own real-time threads (50+).
// All three share it (a thread waiting for a lock must not outrank its
// holder). Threads of one SCHED_FIFO priority do not preempt each other,
// so a reader yields after readBatch packets, lest two busy readers on two
// cores keep the forwarder from writing what is due. No thread spins: the
// Go scheduler may park a goroutine at any point, and only the process's
// lower-priority threads run it again.
const bridgePriority = 40

// readBatch is how many packets a reader takes before it yields.
const readBatch = 32

// lateBucket and lateBuckets make the histogram of how late packets leave
// the bridge: 10 µs buckets up to 100 ms, then one for everything later.
const (
	lateBucket  = 10 * time.Microsecond
	lateBuckets = 10001
)

// way is one direction of the bridge: packets read from one TUN device,
// impaired by netsim's engine and written into the other.
type way struct {
	name     string
	from, to *end
	fates    *netsim.Fates
	limit    int // packets this way may hold at once (Impairment.Limit)

	// pending is a new impairment for the reader thread to apply: only
	// that thread touches fates' lock, so that no normal-priority thread
	// holding it can stall the bridge.
	pending atomic.Pointer[netsim.Impairment]

	held       int // packets held now; guarded by bridge.mu
	read       atomic.Uint64
	readBytes  atomic.Uint64
	written    atomic.Uint64
	wroteBytes atomic.Uint64
	limitDrops atomic.Uint64
	writeFails atomic.Uint64
}

// parcel is a packet held until it is due.
type parcel struct {
	due  time.Time
	seq  uint64
	data []byte
	way  *way
}

type parcels []parcel

func (h parcels) Len() int { return len(h) }
func (h parcels) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h parcels) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *parcels) Push(x any)   { *h = append(*h, x.(parcel)) }
func (h *parcels) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = parcel{}
	*h = old[:len(old)-1]
	return x
}

// bridge moves packets between two ends: a reader thread per way stamps
// each packet and asks netsim when its copies are due; one forwarder
// thread writes them when they are. All three run locked to OS threads
// with SCHED_FIFO when the kernel grants it, and wait in ppoll, so that a
// busy machine delays them as little as it can.
type bridge struct {
	ways [2]*way
	wake int // eventfd: a packet earlier than the forwarder's wait arrived
	stop int // eventfd: stop every thread

	mu    sync.Mutex // taken by the bridge's threads only
	queue parcels
	seq   uint64
	free  [][]byte // packet buffers to reuse, guarded by mu

	late  [lateBuckets]atomic.Uint64 // written by the forwarder only
	lateN atomic.Uint64

	base [2]wayCounts // the ways' counts when the report starts

	fifo    atomic.Int32 // threads granted SCHED_FIFO
	fifoErr atomic.Value // error: why one was not
	tidMu   sync.Mutex
	tids    map[int]uint32 // the bridge's threads and their priorities
	started sync.WaitGroup
	wg      sync.WaitGroup
}

func newBridge(a, b *end, sc *netsim.Scenario) (*bridge, error) {
	br := &bridge{wake: -1, stop: -1}
	var err error
	if br.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	if br.stop, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		_ = unix.Close(br.wake)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	bToA := sc.BToA
	bToA.Seed ^= 0xb2a // the two ways draw different sequences from one seed
	for i, w := range []struct {
		name     string
		from, to *end
		imp      netsim.Impairment
	}{{"a_to_b", a, b, sc.AToB}, {"b_to_a", b, a, bToA}} {
		f, err := netsim.NewFates(w.imp)
		if err != nil {
			br.closeFDs()
			return nil, err
		}
		limit := w.imp.Limit
		if limit == 0 {
			limit = netsim.DefaultLimit
		}
		br.ways[i] = &way{name: w.name, from: w.from, to: w.to, fates: f, limit: limit}
	}
	return br, nil
}

func (br *bridge) closeFDs() {
	_ = unix.Close(br.wake)
	_ = unix.Close(br.stop)
}

// start starts the reader and forwarder threads, once each has asked for
// its priority.
func (br *bridge) start() {
	br.wg.Add(3)
	br.started.Add(3)
	go br.forward()
	for _, w := range br.ways {
		go br.readWay(w)
	}
	br.started.Wait()
}

// close stops the threads and waits for them.
func (br *bridge) close() {
	one := [8]byte{1}
	_, _ = unix.Write(br.stop, one[:])
	br.wg.Wait()
	br.closeFDs()
}

// processPriority is the real-time priority of every other thread of the
// process. The bridge's threads are goroutines: the Go scheduler preempts
// a goroutine that has run for 10 ms, and only another thread of this
// process can schedule it again. At normal priority those threads wait
// behind every busy process of the machine (a forwarding thread stalled
// for up to a second on a loaded 2-core machine); at real-time priority
// they do not. Threads inherit it; programs run over the link get normal
// priority back (resetPriority).
const processPriority = 1

// realtimeProcess gives every thread of the process processPriority.
func realtimeProcess() error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// The bridge's own threads are higher already: leave them.
		if cur, err := unix.SchedGetAttr(tid, 0); err == nil && cur.Policy == unix.SCHED_FIFO && cur.Priority >= processPriority {
			continue
		}
		attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: processPriority}
		if err := unix.SchedSetAttr(tid, &attr, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("sched_setattr SCHED_FIFO thread %d: %w", tid, err)
		}
	}
	return nil
}

// resetPriority gives process pid (a program just started over the link)
// the normal scheduling policy back.
func resetPriority(pid int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	return unix.SchedSetAttr(pid, &attr, 0)
}

// realtime locks the calling goroutine to its thread and asks for
// SCHED_FIFO, counting whether it was granted.
func (br *bridge) realtime(priority uint32) {
	runtime.LockOSThread()
	defer br.started.Done()
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: priority}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		br.fifoErr.Store(fmt.Errorf("sched_setattr SCHED_FIFO: %w", err))
		return
	}
	br.fifo.Add(1)
	br.tidMu.Lock()
	if br.tids == nil {
		br.tids = make(map[int]uint32)
	}
	br.tids[unix.Gettid()] = priority
	br.tidMu.Unlock()
}

// realtimeGranted reports whether all three threads run with SCHED_FIFO
// at their priorities now, and why not.
func (br *bridge) realtimeGranted() (bool, error) {
	if err, _ := br.fifoErr.Load().(error); err != nil {
		return false, err
	}
	br.tidMu.Lock()
	defer br.tidMu.Unlock()
	for tid, want := range br.tids {
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			return false, fmt.Errorf("sched_getattr thread %d: %w", tid, err)
		}
		if attr.Policy != unix.SCHED_FIFO || attr.Priority != want {
			return false, fmt.Errorf("thread %d has policy %d priority %d, want SCHED_FIFO %d", tid, attr.Policy, attr.Priority, want)
		}
	}
	return len(br.tids) == 3, nil
}

// readWay reads w's packets until stopped.
func (br *bridge) readWay(w *way) {
	defer br.wg.Done()
	br.realtime(bridgePriority)
	defer runtime.UnlockOSThread()
	buf := make([]byte, 65536)
	fds := []unix.PollFd{{Fd: int32(w.from.tun), Events: unix.POLLIN}, {Fd: int32(br.stop), Events: unix.POLLIN}}
	var delays []time.Duration
	for {
		if err := ppollRaw(fds, maxWait); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		for taken := 1; ; taken++ {
			if taken%readBatch == 0 {
				_, _, _ = unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
			}
			n, err := readRaw(w.from.tun, buf)
			if err != nil || n <= 0 {
				break // EAGAIN: drained
			}
			now := time.Now()
			w.read.Add(1)
			w.readBytes.Add(uint64(n))
			if imp := w.pending.Swap(nil); imp != nil {
				_ = w.fates.Set(*imp) // validated by set
			}
			delays = w.fates.NextAt(delays[:0], now, n)
			for _, d := range delays {
				br.hold(parcel{due: now.Add(d), data: br.buffer(buf[:n]), way: w})
			}
		}
	}
}

// hold queues p for the forwarder, or drops it when its way holds its
// limit already.
func (br *bridge) hold(p parcel) {
	br.mu.Lock()
	if p.way.held >= p.way.limit {
		br.free = append(br.free, p.data[:0])
		br.mu.Unlock()
		p.way.limitDrops.Add(1)
		return
	}
	p.way.held++
	br.seq++
	p.seq = br.seq
	heap.Push(&br.queue, p)
	first := br.queue[0].seq == p.seq
	br.mu.Unlock()
	if first {
		one := [8]byte{1}
		_ = writeRaw(br.wake, one[:])
	}
}

// forward writes held packets when they fall due, until stopped.
func (br *bridge) forward() {
	defer br.wg.Done()
	br.realtime(bridgePriority)
	defer runtime.UnlockOSThread()
	fds := []unix.PollFd{{Fd: int32(br.wake), Events: unix.POLLIN}, {Fd: int32(br.stop), Events: unix.POLLIN}}
	var due []parcel
	var drain [8]byte
	for {
		br.mu.Lock()
		now := time.Now()
		for len(br.queue) > 0 && !br.queue[0].due.After(now) {
			p := heap.Pop(&br.queue).(parcel)
			p.way.held--
			due = append(due, p)
		}
		timeout := maxWait
		if len(br.queue) > 0 {
			timeout = min(timeout, br.queue[0].due.Sub(now))
		}
		br.mu.Unlock()
		if len(due) > 0 {
			for _, p := range due {
				if err := writeRaw(p.way.to.tun, p.data); err != nil {
					p.way.writeFails.Add(1)
				} else {
					p.way.written.Add(1)
					p.way.wroteBytes.Add(uint64(len(p.data)))
				}
			}
			done := time.Now()
			br.mu.Lock()
			for _, p := range due {
				br.late[min(int(done.Sub(p.due)/lateBucket), lateBuckets-1)].Add(1)
				if cap(p.data) == packetBuffer {
					br.free = append(br.free, p.data[:0])
				}
			}
			br.mu.Unlock()
			br.lateN.Add(uint64(len(due)))
			clear(due)
			due = due[:0]
			continue
		}
		if err := ppollRaw(fds, timeout); err != nil && err != unix.EINTR {
			return
		}
		if fds[1].Revents != 0 {
			return
		}
		if fds[0].Revents != 0 {
			_, _ = readRaw(br.wake, drain[:])
		}
	}
}

// lateness returns the p50, p99 and p99.9 of how late packets left, and
// how many packets that counts, since the last reset.
func (br *bridge) lateness() (p50, p99, p999 time.Duration, n uint64) {
	var counts [lateBuckets]uint64
	for i := range br.late {
		counts[i] = br.late[i].Load()
		n += counts[i]
	}
	q := func(f float64) time.Duration {
		want := uint64(f * float64(n))
		var sum uint64
		for i, c := range counts {
			sum += c
			if sum > want {
				return time.Duration(i+1) * lateBucket
			}
		}
		return 0
	}
	return q(0.5), q(0.99), q(0.999), n
}

// reset forgets the lateness counted so far and starts the report's
// counts afresh (after the self-check's probes).
func (br *bridge) reset() {
	for i, w := range br.ways {
		br.base[i] = w.counts()
	}
	for i := range br.late {
		br.late[i].Store(0)
	}
	br.lateN.Store(0)
}

// set changes way i's impairment; its reader applies it before its next
// packet.
func (br *bridge) set(i int, imp netsim.Impairment) error {
	if err := imp.Validate(); err != nil {
		return err
	}
	br.ways[i].pending.Store(&imp)
	return nil
}

// packetBuffer is the size of the buffers the bridge reuses: a packet of
// the largest MTU worth reusing for.
const packetBuffer = 9216

// buffer returns a copy of b in a reused buffer (a new one when b is
// larger), so that the bridge's threads do not allocate, and with it
// contend for the Go heap's locks, once warm.
func (br *bridge) buffer(b []byte) []byte {
	if len(b) > packetBuffer {
		return append([]byte(nil), b...)
	}
	br.mu.Lock()
	var buf []byte
	if n := len(br.free); n > 0 {
		buf, br.free = br.free[n-1], br.free[:n-1]
	}
	br.mu.Unlock()
	if buf == nil {
		buf = make([]byte, 0, packetBuffer)
	}
	return append(buf, b...)
}

// wayCounts is what a way carried, for the JSON report.
type wayCounts struct {
	Way        string `json:"way"`
	Read       uint64 `json:"read"`
	ReadBytes  uint64 `json:"read_bytes"`
	Written    uint64 `json:"written"`
	WroteBytes uint64 `json:"written_bytes"`
	Lost       uint64 `json:"lost"`
	QueueDrops uint64 `json:"queue_drops"`
	LimitDrops uint64 `json:"limit_drops"`
	WriteFails uint64 `json:"write_fails"`
	Duplicated uint64 `json:"duplicated"`
}

func (w *way) counts() wayCounts {
	s := w.fates.Stats()
	return wayCounts{
		Way: w.name, Read: w.read.Load(), ReadBytes: w.readBytes.Load(),
		Written: w.written.Load(), WroteBytes: w.wroteBytes.Load(),
		Lost: s.Dropped, QueueDrops: s.ShaperDrops, LimitDrops: w.limitDrops.Load(),
		WriteFails: w.writeFails.Load(), Duplicated: s.Duplicated,
	}
}

// maxWait bounds every wait of the bridge's threads: they wait in raw
// system calls, which keep their P and which a stop-the-world pause of the
// Go runtime cannot interrupt, so none may last long.
const maxWait = 5 * time.Millisecond

// The bridge's threads make their system calls raw, without telling the Go
// scheduler: returning from an ordinary one needs a P, and on a busy
// machine the wait for it (behind threads that the kernel has not
// scheduled, real-time priority or not) was the bridge's largest delay.
// Each thread keeps a P of its own instead (main raises GOMAXPROCS).

func ppollRaw(fds []unix.PollFd, timeout time.Duration) error {
	for i := range fds {
		fds[i].Revents = 0
	}
	ts := unix.NsecToTimespec(int64(max(timeout, 0)))
	_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)),
		uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

func readRaw(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func writeRaw(fd int, b []byte) error {
	_, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return e
	}
	return nil
}

// minus returns the counts since an earlier snapshot.
func (c wayCounts) minus(old wayCounts) wayCounts {
	return wayCounts{
		Way: c.Way, Read: c.Read - old.Read, ReadBytes: c.ReadBytes - old.ReadBytes,
		Written: c.Written - old.Written, WroteBytes: c.WroteBytes - old.WroteBytes,
		Lost: c.Lost - old.Lost, QueueDrops: c.QueueDrops - old.QueueDrops,
		LimitDrops: c.LimitDrops - old.LimitDrops, WriteFails: c.WriteFails - old.WriteFails,
		Duplicated: c.Duplicated - old.Duplicated,
	}
}
