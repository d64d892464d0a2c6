package road

import (
	"context"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"
)

// The readers let go of the buffers of a burst's batches: once the stack
// is quiet again, no more are live than the reader whose turn it is offers
// its next read (minReadBatch after reads of one datagram) and one the
// owner may hold. A reader that kept the slices of its largest batch (its
// buffers array, beside the pointers it gives back) held up to ioBatch
// buffers each for good: a main that a fleet's fan-in left kept ~19 KB
// more than before it came.
func TestReadersLetBurstBuffersGo(t *testing.T) {
	s, err := New(&Config{Name: "rx", Listen: "127.0.0.1:0", AlivePeriod: -1})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		made []weak.Pointer[byte]
	)
	rx := recvSize(s.cfg)
	s.bufs.New = func() any {
		b := make([]byte, rx)
		mu.Lock()
		made = append(made, weak.Make(&b[0]))
		mu.Unlock()
		return &b
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	junk := []byte("junk, not a RAET packet")
	for range 20 { // bursts: the socket holds more than a batch at times
		for range 500 {
			if _, err := c.Write(junk); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Millisecond)
	}
	// Then quiet: reads of one datagram each, too long to read (counted
	// apart from the junk, so that the last of them counted says the
	// readers and the owner are done with the bursts).
	const quiet = 16
	long := make([]byte, rx+1)
	ctx := context.Background()
	for i := range quiet {
		if _, err := c.Write(long); err != nil {
			t.Fatal(err)
		}
		for try := 0; ; try++ {
			cs, err := s.Counters(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if cs.Drops["unreadable"] > uint64(i) {
				break
			}
			if try == 10_000 {
				t.Fatalf("the stack counted %d of %d unreadable datagrams", cs.Drops["unreadable"], i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	runtime.GC()
	runtime.GC() // the second empties the pool
	live := 0
	mu.Lock()
	for _, p := range made {
		if p.Value() != nil {
			live++
		}
	}
	total := len(made)
	mu.Unlock()
	if want := minReadBatch + 1; live > want {
		t.Errorf("%d of the %d read buffers made are live once the stack is quiet, want at most %d", live, total, want)
	}
	t.Logf("%d of %d read buffers live", live, total)
}
