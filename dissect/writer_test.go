package dissect_test

import (
	"bytes"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/dissect"
)

// The tap takes datagrams from many goroutines; every one is read back,
// with its addresses, in IPv4 and IPv6.
func TestPcapngTap(t *testing.T) {
	var buf bytes.Buffer
	pw, err := dissect.NewPcapngWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(vectorRaw)
	v4l, v4r := netip.MustParseAddrPort("127.0.0.1:7530"), netip.MustParseAddrPort("127.0.0.1:40001")
	v6l, v6r := netip.MustParseAddrPort("[::1]:7530"), netip.MustParseAddrPort("[::1]:40001")
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				l, r := v4l, v4r
				if g%2 == 1 {
					l, r = v6l, v6r
				}
				pw.Tap(dissect.RoadPacket{Out: i%2 == 0, Local: l, Remote: r, Time: time.Now(), Data: payload})
			}
		}()
	}
	wg.Wait()
	if err := pw.Err(); err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(nil)
	var n4, n6, out int
	for _, rec := range readAll(t, bytes.NewReader(buf.Bytes())) {
		p := d.Decode(rec)
		if p == nil || p.Err != nil || string(p.Data) != string(payload) {
			t.Fatalf("frame: %+v", p)
		}
		switch {
		case p.Src.Addr().Is4():
			n4++
		default:
			n6++
		}
		if p.Src.Port() == 7530 {
			out++
		}
	}
	if n4 != 400 || n6 != 400 || out != 400 {
		t.Fatalf("v4 %d v6 %d out %d", n4, n6, out)
	}
}

type failWriter struct{ after int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("disk full")
	}
	f.after--
	return len(p), nil
}

// A write error is kept and reported; later taps are dropped.
func TestPcapngWriterErrors(t *testing.T) {
	pw, err := dissect.NewPcapngWriter(&failWriter{after: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddrPort("127.0.0.1:1")
	pw.Tap(dissect.RoadPacket{Local: a, Remote: a, Data: []byte("x")})
	pw.Tap(dissect.RoadPacket{Local: a, Remote: a, Data: []byte("x")})
	if err := pw.Err(); err == nil || err.Error() != "disk full" {
		t.Fatalf("err %v", err)
	}
	var buf bytes.Buffer
	pw, _ = dissect.NewPcapngWriter(&buf, nil)
	if err := pw.WriteRoad(time.Now(), a, a, make([]byte, 70000)); !errors.Is(err, dissect.ErrTooLarge) {
		t.Fatalf("large datagram: %v", err)
	}
}
