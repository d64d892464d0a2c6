package road

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"testing"
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
	return c, newPacketIO(c)
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
				ds = append(ds, datagram{b: fmt.Appendf(nil, "datagram %03d %s", i, bytes.Repeat([]byte{'x'}, i*7)), to: to})
			}
			failed, err := tio.write(ds)
			if err != nil || failed != 0 {
				t.Fatalf("write: %d failed, %v", failed, err)
			}
			got, from, calls := readAll(t, rio, n)
			for i, d := range ds {
				if !bytes.Equal(got[i], d.b) {
					t.Fatalf("datagram %d: got %q, want %q", i, got[i], d.b)
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
		{b: []byte("one"), to: good},
		{b: []byte("to an IPv6 peer from an IPv4 socket"), to: netip.MustParseAddrPort("[::1]:9")},
		{b: make([]byte, 70000), to: good}, // larger than any datagram
		{b: []byte("two"), to: good},
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
	if _, err := io.write([]datagram{{b: []byte("x"), to: netip.MustParseAddrPort("127.0.0.1:9")}}); err == nil {
		t.Fatal("write on a closed socket: no error")
	}
}

// ioRig sends a batch of 1 KiB datagrams from one packetIO to another
// and reads them back, with every buffer made once.
type ioRig struct {
	rio, tio packetIO
	ds       []datagram
	bufs     [ioBatch][]byte
	ns       [ioBatch]int
	froms    [ioBatch]netip.AddrPort
}

func newIORig(rio, tio packetIO, to netip.AddrPort, n int) *ioRig {
	r := &ioRig{rio: rio, tio: tio, ds: make([]datagram, n)}
	for i := range r.ds {
		r.ds[i] = datagram{b: make([]byte, 1024), to: to}
	}
	for i := range r.bufs {
		r.bufs[i] = make([]byte, 2048)
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
// nothing.
func TestPacketIONoAllocs(t *testing.T) {
	rc, rio := listenIO(t, "127.0.0.1:0")
	_, tio := listenIO(t, "127.0.0.1:0")
	rig := newIORig(rio, tio, localAP(rc), 8)
	if allocs := testing.AllocsPerRun(200, func() { rig.pass(t) }); allocs != 0 {
		t.Errorf("%.1f allocations per batch of %d datagrams, want 0", allocs, len(rig.ds))
	}
}

// BenchmarkPacketIO compares batched and one-by-one socket I/O for 1 KiB
// datagrams over loopback.
func BenchmarkPacketIO(b *testing.B) {
	for _, batched := range []bool{true, false} {
		name := map[bool]string{true: "mmsg", false: "single"}[batched]
		b.Run(name, func(b *testing.B) {
			rc, rio := listenIO(b, "127.0.0.1:0")
			tc, tio := listenIO(b, "127.0.0.1:0")
			if !batched {
				rio, tio = udpIO{rc}, udpIO{tc}
			}
			rig := newIORig(rio, tio, localAP(rc), 16)
			b.SetBytes(int64(len(rig.ds) * 1024))
			for b.Loop() {
				rig.pass(b)
			}
			b.ReportMetric(float64(b.N*len(rig.ds))/b.Elapsed().Seconds(), "datagrams/s")
		})
	}
}
