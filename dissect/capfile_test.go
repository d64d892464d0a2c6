package dissect_test

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/raet-go/raet/dissect"
)

func gzipped(t testing.TB, b []byte) []byte {
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// drain reads a capture to its end, dissecting every record, and returns
// the number of records and the final error (nil at a clean end).
func drain(data []byte) (int, error) {
	cr, err := dissect.NewCaptureReader(bytes.NewReader(data))
	if err != nil {
		return 0, err
	}
	d := dissect.NewDissector(nil)
	var p dissect.Packet
	for n := 0; ; n++ {
		rec, err := cr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			// The error is sticky.
			if _, again := cr.Next(); !errors.Is(again, err) && again.Error() != err.Error() {
				panic("the reader's error changed")
			}
			return n, err
		}
		if len(rec.Data) > dissect.MaxCaptureLength {
			panic("record beyond MaxCaptureLength")
		}
		for ok := d.DecodeInto(rec, &p); ok; ok = d.Next(&p) {
			p.AppendJSON(nil)
		}
	}
}

func captureErr(t *testing.T, err error, reason error) {
	t.Helper()
	var ce *dissect.CaptureError
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *CaptureError", err, err)
	}
	if reason != nil && !errors.Is(err, reason) {
		t.Fatalf("error %v, want %v", err, reason)
	}
}

// A capture cut anywhere gives the records before the cut and then a
// truncation error (or a clean end at a record boundary), never a panic.
func TestTruncatedCaptures(t *testing.T) {
	ng, err := os.ReadFile(testdata("road.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, testdata("road.pcapng"))
	pcap := pcapFile(recs, dissect.LinkTypeRaw, binary.LittleEndian, true)
	for _, f := range []struct {
		name string
		data []byte
	}{{"pcapng", ng}, {"pcap", pcap}} {
		whole, err := drain(f.data)
		if err != nil || whole != len(recs) {
			t.Fatalf("%s whole: %d records, %v", f.name, whole, err)
		}
		truncated := 0
		step := 1
		for cut := 0; cut < len(f.data); cut += step {
			if cut > 1500 {
				step = 7 // every offset of the first blocks, then a sample
			}
			n, err := drain(f.data[:cut])
			if n > whole {
				t.Fatalf("%s cut at %d: %d records", f.name, cut, n)
			}
			if err != nil {
				var ce *dissect.CaptureError
				if !errors.As(err, &ce) {
					t.Fatalf("%s cut at %d: %v (%T)", f.name, cut, err, err)
				}
				if errors.Is(err, dissect.ErrTruncated) {
					truncated++
				}
			}
		}
		if truncated == 0 {
			t.Errorf("%s: no cut was reported as truncated", f.name)
		}
	}
}

// Random corruption of a capture never panics and never makes the reader
// allocate beyond its bounds (drain panics if it sees either).
func TestCorruptCaptures(t *testing.T) {
	ng, err := os.ReadFile(testdata("segmented.pcapng"))
	if err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, testdata("road.pcapng"))
	pcap := pcapFile(recs, dissect.LinkTypeRaw, binary.BigEndian, false)
	r := rand.New(rand.NewPCG(1, 2))
	errs := 0
	for _, data := range [][]byte{ng[:20000], pcap} {
		for i := 0; i < 1000; i++ {
			c := append([]byte(nil), data...)
			for j := 0; j < 1+r.IntN(4); j++ {
				c[r.IntN(len(c))] = byte(r.Uint32())
			}
			if _, err := drain(c); err != nil {
				errs++
			}
		}
	}
	if errs == 0 {
		t.Error("no corruption was noticed")
	}
}

// ngBlock builds a little-endian pcapng block.
func ngBlock(typ uint32, body []byte) []byte {
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	n := uint32(12 + len(body))
	b := binary.LittleEndian.AppendUint32(nil, typ)
	b = binary.LittleEndian.AppendUint32(b, n)
	b = append(b, body...)
	return binary.LittleEndian.AppendUint32(b, n)
}

func shb() []byte {
	body := binary.LittleEndian.AppendUint32(nil, 0x1A2B3C4D)
	body = binary.LittleEndian.AppendUint16(body, 1)
	body = binary.LittleEndian.AppendUint16(body, 0)
	body = append(body, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	return ngBlock(0x0A0D0D0A, body)
}

func idb(link uint16, snaplen uint32, opts ...[]byte) []byte {
	body := binary.LittleEndian.AppendUint16(nil, link)
	body = binary.LittleEndian.AppendUint16(body, 0)
	body = binary.LittleEndian.AppendUint32(body, snaplen)
	for _, o := range opts {
		body = append(body, o...)
	}
	return ngBlock(1, body)
}

func opt(code uint16, v []byte) []byte {
	b := binary.LittleEndian.AppendUint16(nil, code)
	b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func epb(ifid, caplen uint32, data []byte) []byte {
	body := binary.LittleEndian.AppendUint32(nil, ifid)
	body = append(body, 0, 0, 0, 0, 0, 0, 0, 0)
	body = binary.LittleEndian.AppendUint32(body, caplen)
	body = binary.LittleEndian.AppendUint32(body, caplen)
	return ngBlock(6, append(body, data...))
}

// The inputs on which pcapgo v1.1.19 alone panics or allocates without
// bound are refused with reasons.
func TestPcapgoTraps(t *testing.T) {
	frame := []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1}
	cases := []struct {
		name string
		data []byte
	}{
		{"if_tsresol 10^-64 (pcapgo divides by zero)", append(append(shb(), idb(101, 0, opt(9, []byte{64}))...), epb(0, 20, frame)...)},
		{"if_tsresol 2^-64", append(append(shb(), idb(101, 0, opt(9, []byte{0x80 | 64}))...), epb(0, 20, frame)...)},
		{"empty if_tsresol (pcapgo reads a stale byte)", append(shb(), idb(101, 0, opt(9, nil))...)},
		{"empty if_filter (pcapgo slices out of range)", append(shb(), idb(101, 0, opt(11, nil))...)},
		{"short if_tsoffset", append(shb(), idb(101, 0, opt(14, []byte{1, 2}))...)},
		{"short statistics time", append(append(shb(), idb(101, 0)...), ngBlock(5, append(make([]byte, 12), opt(2, []byte{1})...))...)},
		{"caplen of 4 GiB (pcapgo allocates it)", append(append(shb(), idb(101, 0)...), epb(0, 0xfffffff0, frame)...)},
		{"packet of an interface that does not exist", append(append(shb(), idb(101, 0)...), epb(3, 20, frame)...)},
		{"option overrunning its block", append(shb(), idb(101, 0, []byte{2, 0, 200, 0})...)},
		{"block length not a multiple of 4", append(shb(), 1, 0, 0, 0, 13, 0, 0, 0)},
		{"packet before any interface", append(shb(), epb(0, 20, frame)...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := drain(c.data)
			captureErr(t, err, dissect.ErrCorrupt)
		})
	}
	// A snap length of 4 GiB is clamped, not allocated: the file reads.
	ok := append(append(shb(), idb(101, 0xffffffff)...), epb(0, 20, frame)...)
	if n, err := drain(ok); err != nil || n != 1 {
		t.Fatalf("huge snaplen: %d records, %v", n, err)
	}
	// A pcap file whose snap length is 4 GiB and a record longer than the
	// limit.
	recs := []dissect.Record{{Data: bytes.Repeat([]byte{0}, dissect.MaxCaptureLength+1)}}
	big := pcapFile(recs, dissect.LinkTypeRaw, binary.LittleEndian, true)
	binary.LittleEndian.PutUint32(big[16:], 0xffffffff)
	_, err := drain(big)
	captureErr(t, err, dissect.ErrCorrupt)
	// Not a capture at all.
	for _, data := range [][]byte{nil, []byte("RA"), []byte("not a capture file"), gzipped(t, []byte("nope"))} {
		_, err := drain(data)
		captureErr(t, err, dissect.ErrFormat)
	}
}

// FuzzCaptureReader reads arbitrary files: the reader and the dissector
// must never panic (drain panics on the reader's broken promises).
func FuzzCaptureReader(f *testing.F) {
	for _, name := range []string{"road", "lane", "bad"} {
		b, err := os.ReadFile(testdata(name + ".pcapng"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b[:min(len(b), 1024)])
	}
	recs := readRecords(f, testdata("road.pcapng"))
	f.Add(pcapFile(recs[:3], dissect.LinkTypeRaw, binary.LittleEndian, true))
	f.Add(pcapFile(recs[:2], dissect.LinkTypeLinuxSLL2, binary.BigEndian, false))
	f.Fuzz(func(t *testing.T, data []byte) {
		drain(data)
	})
}
