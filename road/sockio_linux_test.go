package road

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// listenIO opens a UDP socket on addr and its packetIO.
func listenIO(t testing.TB, addr string) (*net.UDPConn, packetIO) {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Skipf("no %s socket here: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetReadBuffer(socketBuffer)
	return c, newPacketIO(c, false)
}

func localAP(c *net.UDPConn) netip.AddrPort {
	ap := c.LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// readAll reads until n datagrams have come, in as many calls as it takes.
func readAll(t testing.TB, io packetIO, n int) (got [][]byte, from []netip.AddrPort, calls int) {
	t.Helper()
	var bufs [ioBatch][]byte
	for i := range bufs {
		bufs[i] = make([]byte, maxDatagram)
	}
	var ns [ioBatch]int
	var froms [ioBatch]netip.AddrPort
	for len(got) < n {
		k, err := io.read(bufs[:], ns[:], froms[:])
		if err != nil {
			t.Fatal(err)
		}
		calls++
		for i := range k {
			if ns[i] >= 0 {
				got = append(got, bytes.Clone(bufs[i][:ns[i]]))
				from = append(from, froms[i])
			}
		}
	}
	return got, from, calls
}

func TestPacketIOBatches(t *testing.T) {
	for _, tc := range []struct{ name, rx, tx, dst string }{
		{"ipv4", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"},
		{"dual-stack receiver, ipv4 sender", "[::]:0", "127.0.0.1:0", "127.0.0.1"},
		{"ipv6", "[::1]:0", "[::1]:0", "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, rio := listenIO(t, tc.rx)
			tc2, tio := listenIO(t, tc.tx)
			if _, ok := rio.(*mmsgIO); !ok {
				t.Fatalf("a UDP socket on Linux got %T, want the recvmmsg reader", rio)
			}
			to := netip.AddrPortFrom(netip.MustParseAddr(tc.dst), localAP(rc).Port())
			const n = 3*ioBatch + 5 // more than one batch, and a part batch
			var ds []datagram
			for i := range n {
				ds = append(ds, datagram{B: fmt.Appendf(nil, "datagram %03d %s", i, bytes.Repeat([]byte{'x'}, i*7)), To: to})
			}
			failed, err := tio.write(ds)
			if err != nil || failed != 0 {
				t.Fatalf("write: %d failed, %v", failed, err)
			}
			got, from, calls := readAll(t, rio, n)
			for i, d := range ds {
				if !bytes.Equal(got[i], d.B) {
					t.Fatalf("datagram %d: got %q, want %q", i, got[i], d.B)
				}
				if from[i] != localAP(tc2) {
					t.Fatalf("datagram %d from %v, want %v", i, from[i], localAP(tc2))
				}
			}
			if calls >= n {
				t.Errorf("%d datagrams took %d reads: no batching", n, calls)
			}
		})
	}
}

func TestPacketIOWriteRefusals(t *testing.T) {
	rc, rio := listenIO(t, "127.0.0.1:0")
	_, tio := listenIO(t, "127.0.0.1:0")
	good := localAP(rc)
	ds := []datagram{
		{B: []byte("one"), To: good},
		{B: []byte("to an IPv6 peer from an IPv4 socket"), To: netip.MustParseAddrPort("[::1]:9")},
		{B: make([]byte, 70000), To: good}, // larger than any datagram
		{B: []byte("two"), To: good},
	}
	failed, err := tio.write(ds)
	if err != nil {
		t.Fatal(err)
	}
	if failed != 2 {
		t.Errorf("failed = %d, want 2", failed)
	}
	got, _, _ := readAll(t, rio, 2)
	if string(got[0]) != "one" || string(got[1]) != "two" {
		t.Errorf("got %q, want the two good datagrams around the refused ones", got)
	}
}

func TestPacketIOClosed(t *testing.T) {
	c, io := listenIO(t, "127.0.0.1:0")
	done := make(chan error, 1)
	go func() {
		var bufs [1][]byte
		bufs[0] = make([]byte, 64)
		var ns [1]int
		var froms [1]netip.AddrPort
		_, err := io.read(bufs[:], ns[:], froms[:])
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("read on a closed socket: no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("read did not return after Close")
	}
	if _, err := io.write([]datagram{{B: []byte("x"), To: netip.MustParseAddrPort("127.0.0.1:9")}}); err == nil {
		t.Fatal("write on a closed socket: no error")
	}
}

// ioRig sends a batch of datagrams (of one size, the last one half) from one packetIO to another
// and reads them back, with every buffer made once.
type ioRig struct {
	rio, tio packetIO
	ds       []datagram
	bufs     [ioBatch][]byte
	ns       [ioBatch]int
	froms    [ioBatch]netip.AddrPort
}

func newIORig(rio, tio packetIO, to netip.AddrPort, n, size int) *ioRig {
	r := &ioRig{rio: rio, tio: tio, ds: make([]datagram, n)}
	for i := range r.ds {
		r.ds[i] = datagram{B: make([]byte, size), To: to}
	}
	r.ds[n-1].B = r.ds[n-1].B[:size/2]
	for i := range r.bufs {
		r.bufs[i] = make([]byte, 2*size)
	}
	return r
}

// pass writes the batch and reads until all of it has come.
func (r *ioRig) pass(tb testing.TB) {
	if _, err := r.tio.write(r.ds); err != nil {
		tb.Fatal(err)
	}
	for got := 0; got < len(r.ds); {
		n, err := r.rio.read(r.bufs[:], r.ns[:], r.froms[:])
		if err != nil {
			tb.Fatal(err)
		}
		got += n
	}
}

// TestPacketIONoAllocs: a steady write and read of a batch allocates
// nothing, with segmentation offload and without.
func TestPacketIONoAllocs(t *testing.T) {
	for _, offload := range []bool{true, false} {
		rc, rio := listenIO(t, "127.0.0.1:0")
		_, tio := listenIO(t, "127.0.0.1:0")
		for _, m := range []packetIO{rio, tio} {
			if err := m.(*mmsgIO).offload(offload, offload); err != nil {
				t.Fatal(err)
			}
		}
		rig := newIORig(rio, tio, localAP(rc), 8, 1024)
		if allocs := testing.AllocsPerRun(200, func() { rig.pass(t) }); allocs != 0 {
			t.Errorf("offload %v: %.1f allocations per batch of %d datagrams, want 0", offload, allocs, len(rig.ds))
		}
	}
}

// BenchmarkPacketIO compares socket I/O over loopback for bursts of 16
// datagrams to one destination: 1 KiB ones (a burst of small messages) and
// a segmented message's (8 KiB ones, the fast profile's size on loopback,
// the last shorter): one by one, batched (sendmmsg/recvmmsg), and batched
// with UDP_SEGMENT and UDP_GRO. It reports datagrams/s and the system calls
// per datagram of each side.
func BenchmarkPacketIO(b *testing.B) {
	for _, size := range []int{1024, 8192} {
		for _, mode := range []string{"single", "mmsg", "mmsg+gso+gro"} {
			b.Run(fmt.Sprintf("%dB/%s", size, mode), func(b *testing.B) {
				rc, rio := listenIO(b, "127.0.0.1:0")
				tc, tio := listenIO(b, "127.0.0.1:0")
				rm, tm := rio.(*mmsgIO), tio.(*mmsgIO)
				if mode == "single" {
					rio, tio = udpIO{rc}, udpIO{tc}
				}
				if mode == "mmsg" {
					for _, m := range []*mmsgIO{rm, tm} {
						if err := m.offload(false, false); err != nil {
							b.Fatal(err)
						}
					}
				}
				rig := newIORig(rio, tio, localAP(rc), 16, size)
				b.SetBytes(int64(len(rig.ds) * size))
				sends, recvs := tm.w.calls.Load(), rm.r.calls.Load()
				for b.Loop() {
					rig.pass(b)
				}
				n := float64(b.N * len(rig.ds))
				b.ReportMetric(n/b.Elapsed().Seconds(), "datagrams/s")
				if mode != "single" {
					b.ReportMetric(float64(tm.w.calls.Load()-sends)/n, "sendcalls/datagram")
					b.ReportMetric(float64(rm.r.calls.Load()-recvs)/n, "recvcalls/datagram")
				}
			})
		}
	}
}

// segmentedRun is what a segmented message looks like to the socket: n
// datagrams of size bytes to one destination, the last one shorter, each
// with its index in the first bytes.
func segmentedRun(to netip.AddrPort, n, size int) []datagram {
	ds := make([]datagram, n)
	for i := range ds {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		if i == n-1 {
			b = b[:size/3]
		}
		copy(b, fmt.Sprintf("%04d", i))
		ds[i] = datagram{B: b, To: to}
	}
	return ds
}

// TestPacketIOOffload sends a segmented message's datagrams, then a few of
// other sizes, with UDP_SEGMENT and UDP_GRO on and off at either end, over
// IPv4, IPv6 and from a dual-stack socket to an IPv4 one, and checks that
// each way delivers the same datagrams in the same order, and that with
// both on the kernel is called once per run, not per datagram.
func TestPacketIOOffload(t *testing.T) {
	type family struct{ rx, tx, dst string }
	v4 := family{"127.0.0.1:0", "127.0.0.1:0", "127.0.0.1"}
	for _, tc := range []struct {
		name     string
		gso, gro bool
		family
	}{
		{"gso and gro", true, true, v4},
		{"gso and gro, ipv6", true, true, family{"[::1]:0", "[::1]:0", "::1"}},
		{"gso and gro, dual-stack sender", true, true, family{"127.0.0.1:0", "[::]:0", "127.0.0.1"}},
		{"gso only", true, false, v4},
		{"gro only", false, true, v4},
		{"neither (the fallback)", false, false, v4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, rio := listenIO(t, tc.rx)
			tc2, tio := listenIO(t, tc.tx)
			rm, tm := rio.(*mmsgIO), tio.(*mmsgIO)
			if !rm.gso || rm.gro == nil {
				t.Fatalf("this kernel (loopback) should offer UDP_SEGMENT and UDP_GRO: gso %v, gro %v", rm.gso, rm.gro != nil)
			}
			if err := tm.offload(tc.gso, false); err != nil {
				t.Fatal(err)
			}
			if err := rm.offload(false, tc.gro); err != nil {
				t.Fatal(err)
			}
			to := netip.AddrPortFrom(netip.MustParseAddr(tc.dst), localAP(rc).Port())
			ds := segmentedRun(to, 20, 1200)
			ds = append(ds, datagram{B: []byte("after the run"), To: to}, datagram{B: []byte("and another"), To: to})
			sends := tm.w.calls.Load()
			if failed, err := tio.write(ds); err != nil || failed != 0 {
				t.Fatalf("write: %d failed, %v", failed, err)
			}
			sends = tm.w.calls.Load() - sends
			recvs := rm.r.calls.Load()
			got, from, _ := readAll(t, rio, len(ds))
			recvs = rm.r.calls.Load() - recvs
			for i, d := range ds {
				// On loopback the sender's address is the one it sent to.
				if !bytes.Equal(got[i], d.B) || from[i] != netip.AddrPortFrom(to.Addr(), localAP(tc2).Port()) {
					t.Fatalf("datagram %d: got %d bytes %q… from %v, want %d bytes %q…", i, len(got[i]), got[i][:min(8, len(got[i]))],
						from[i], len(d.B), d.B[:min(8, len(d.B))])
				}
			}
			if sends != 1 {
				t.Errorf("%d datagrams took %d sendmmsg calls, want 1", len(ds), sends)
			}
			if tc.gso && tc.gro && recvs > 2 {
				t.Errorf("a GSO run to a GRO socket took %d recvmmsg calls", recvs)
			}
			t.Logf("%d datagrams: %d sendmmsg, %d recvmmsg", len(ds), sends, recvs)
		})
	}
}

// A UDP_GRO socket waiting for datagrams holds none of its 64 KiB buffers,
// and one whose datagrams were all handed out has given them back (to
// the pool: a socket read now and then keeps no free list).
func TestGROIdleHoldsNoBuffer(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // the pool's victims too
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	const n = 8
	before := heap()
	ios := make([]*mmsgIO, n)
	conns := make([]*net.UDPConn, n)
	for i := range ios {
		c, io := listenIO(t, "127.0.0.1:0")
		conns[i], ios[i] = c, io.(*mmsgIO)
		if ios[i].gro == nil {
			t.Fatal("this kernel (loopback) should offer UDP_GRO")
		}
	}
	// One datagram each, read: the buffers go back once handed out.
	for i, m := range ios {
		if _, err := conns[(i+1)%n].WriteToUDPAddrPort([]byte("hello"), localAP(conns[i])); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := readAll(t, m, 1); string(got[0]) != "hello" {
			t.Fatalf("read %q", got[0])
		}
		for _, a := range m.gro.arrs {
			if a != nil {
				t.Fatal("a buffer kept after its datagrams were handed out")
			}
		}
	}
	waits := make([]uint64, n)
	for i, m := range ios {
		waits[i] = m.waits.Load()
	}
	done := make(chan error, n)
	for _, m := range ios {
		go func() {
			var bufs [1][]byte
			bufs[0] = make([]byte, 2048)
			var ns [1]int
			var froms [1]netip.AddrPort
			_, err := m.read(bufs[:], ns[:], froms[:])
			done <- err
		}()
	}
	for j, m := range ios { // until each waits for its socket
		for i := 0; m.waits.Load() == waits[j]; i++ {
			if i > 10_000 {
				t.Fatal("a reader never waited")
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, m := range ios { // read now and then: not busy
		if _, listed, _ := m.gro.free.state(); listed != 0 {
			t.Errorf("a GRO socket read now and then lists %d buffers", listed)
		}
	}
	if grown := int64(heap()) - int64(before); grown > n*maxDatagram/2 {
		t.Errorf("%d GRO sockets, read from and waiting, hold %d KiB of heap", n, grown>>10)
	}
	for _, c := range conns {
		c.Close()
	}
	for range n {
		if err := <-done; err == nil {
			t.Error("a read on a closed socket succeeded")
		}
	}
}

// A GRO socket's free list keeps the buffers while the socket is busy,
// across garbage collections (from a sync.Pool alone, emptied by each,
// the reads made them again), and as much as the reads need: a tick keeps
// what one read since the last took. A socket read now and then keeps
// none, and a busy one gives them all back at the first tick with few
// reads.
func TestGROFreeListDecays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &groFree{keep: groKeep}
		var out [8]*[maxDatagram]byte
		reads := func(k, bufs int) {
			for i := range k {
				f.get(out[:bufs])
				if i%16 == 0 {
					runtime.GC()
				}
				f.put(out[:bufs])
				clear(out[:])
			}
		}
		tick := func() {
			time.Sleep(groKeep)
			synctest.Wait()
		}
		reads(1, 1) // now and then: nothing kept
		if _, n, armed := f.state(); n != 0 || !armed {
			t.Fatalf("after a read: %d listed (armed %v), want none, armed", n, armed)
		}
		tick()
		if _, n, armed := f.state(); n != 0 || armed {
			t.Fatalf("after a quiet tick: %d listed (armed %v), want none, no tick", n, armed)
		}
		reads(groBusy, 8) // busy
		tick()
		out0, _, _ := f.state()
		reads(groBusy, 8) // busy: the reads of 8 take the list's
		if outside, n, _ := f.state(); n != 8 || outside != out0+8 {
			t.Fatalf("busy reads of 8: %d listed, %d taken from the pool; want 8 and 8", n, outside-out0)
		}
		tick()
		reads(groBusy, 2) // still busy, but reads of 2
		if _, n, _ := f.state(); n != 8 {
			t.Fatalf("after a busy tick: %d listed, want 8", n)
		}
		tick()
		if _, n, armed := f.state(); n != 2 || !armed {
			t.Fatalf("after a busy tick whose reads took 2: %d listed (armed %v), want 2, armed", n, armed)
		}
		reads(3, 2) // few reads
		tick()
		if _, n, armed := f.state(); n != 0 || armed {
			t.Fatalf("after a tick with few reads: %d listed (armed %v), want none", n, armed)
		}
		f.close()
		reads(1, 1)
		if _, n, armed := f.state(); n != 0 || armed {
			t.Fatalf("a closed list holds %d buffers (armed %v)", n, armed)
		}
	})
}

// state is how many buffers f took from groPool, lists (every slot past
// it nil) and whether its tick is armed, read under its lock (the tick
// runs on its own goroutine).
func (f *groFree) state() (outside, listed int, armed bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, a := range f.arrs {
		if (a != nil) != (i < f.n) {
			panic(fmt.Sprintf("free list slot %d of %d listed is %v", i, f.n, a != nil))
		}
	}
	return f.outside, f.n, f.armed
}

// Bursts of GRO reads (each of several buffers: datagrams from several
// senders), with garbage collections between, reuse the buffers of the
// first once the socket is busy: the reader takes no 64 KiB array from
// the pool (which each collection empties) once the socket's list holds
// what its reads take; a tick with no read gives them all back.
func TestGROReadsReuseBuffers(t *testing.T) {
	rc, rio := listenIO(t, "127.0.0.1:0")
	m := rio.(*mmsgIO)
	if m.gro == nil {
		t.Fatal("this kernel (loopback) should offer UDP_GRO")
	}
	m.gro.free.keep = time.Hour // no tick here: TestGROFreeListDecays has them
	const senders = 8
	tx := make([]*net.UDPConn, senders)
	for i := range tx {
		tx[i], _ = listenIO(t, "127.0.0.1:0")
	}
	burst := func() {
		for _, c := range tx {
			if _, err := c.WriteToUDPAddrPort([]byte("burst"), localAP(rc)); err != nil {
				t.Fatal(err)
			}
		}
		readAll(t, m, senders)
	}
	for range groBusy { // at least groBusy reads: busy at the tick
		burst()
	}
	m.gro.free.decay() // the tick (its timer's is an hour away)
	for range 4 {      // the list fills with what the reads take
		burst()
	}
	out0, _, _ := m.gro.free.state()
	for range 32 {
		runtime.GC()
		runtime.GC()
		burst()
	}
	if got, _, _ := m.gro.free.state(); got != out0 {
		t.Errorf("32 more bursts, with collections between, took %d GRO buffers from the pool", got-out0)
	}
	m.gro.free.decay() // busy still: it keeps what one read took
	if _, listed, _ := m.gro.free.state(); listed == 0 || listed > groBufs {
		t.Errorf("a busy GRO socket lists %d buffers after a tick", listed)
	}
	m.gro.free.decay() // no read since: all given back
	if _, listed, armed := m.gro.free.state(); listed != 0 || armed {
		t.Errorf("a GRO socket no longer busy lists %d buffers (tick armed %v)", listed, armed)
	}
	burst()
	rc.Close() // a read of the closed socket drops the list and stops its tick
	var bufs [1][]byte
	bufs[0] = make([]byte, 64)
	if _, err := m.read(bufs[:], make([]int, 1), make([]netip.AddrPort, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a read of a closed socket: %v", err)
	}
	if _, listed, armed := m.gro.free.state(); listed != 0 || armed {
		t.Errorf("a closed GRO socket lists %d buffers (tick armed %v)", listed, armed)
	}
}
