package dissect_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/raet-go/raet/dissect"
)

// readRecords reads every record of a capture (copying the data).
func readRecords(t testing.TB, path string) []dissect.Record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readAll(t, f)
}

func readAll(t testing.TB, r io.Reader) []dissect.Record {
	t.Helper()
	cr, err := dissect.NewCaptureReader(r)
	if err != nil {
		t.Fatal(err)
	}
	var out []dissect.Record
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		rec.Data = append([]byte(nil), rec.Data...)
		out = append(out, rec)
	}
}

// wrap puts a raw IP frame into a frame of link type lt.
func wrap(t testing.TB, ip []byte, lt int) []byte {
	v6 := ip[0]>>4 == 6
	et := []byte{0x08, 0x00}
	if v6 {
		et = []byte{0x86, 0xdd}
	}
	var h []byte
	switch lt {
	case dissect.LinkTypeEthernet:
		h = append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1}, et...)
	case dissect.LinkTypeEthernet + 1000: // Ethernet with an 802.1Q tag
		h = append([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x00, 0x07}, et...)
	case dissect.LinkTypeNull:
		h = binary.LittleEndian.AppendUint32(nil, 2)
		if v6 {
			h = binary.LittleEndian.AppendUint32(nil, 24)
		}
	case dissect.LinkTypeLoop:
		h = binary.BigEndian.AppendUint32(nil, 2)
		if v6 {
			h = binary.BigEndian.AppendUint32(nil, 24)
		}
	case dissect.LinkTypeLinuxSLL:
		h = []byte{0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0}
		h = append(h, et...)
	case dissect.LinkTypeLinuxSLL2:
		h = append([]byte{}, et...)
		h = append(h, 0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0)
	case dissect.LinkTypeRaw, dissect.LinkTypeIPv4, dissect.LinkTypeIPv6:
	default:
		t.Fatalf("no wrapper for link type %d", lt)
	}
	return append(h, ip...)
}

// rewrap writes the raw-IP capture src again with link type lt.
func rewrap(t testing.TB, src, dst string, lt int) {
	var buf bytes.Buffer
	pw, err := dissect.NewPcapngWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range readRecords(t, src) {
		if rec.LinkType != dissect.LinkTypeRaw {
			t.Fatalf("%s: link type %d", src, rec.LinkType)
		}
		out := lt
		if lt == dissect.LinkTypeEthernet+1000 {
			out = dissect.LinkTypeEthernet
		}
		if err := pw.WriteRecord(dissect.Record{Time: rec.Time, LinkType: out, Data: wrap(t, rec.Data, lt)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pcapFile writes records as a (legacy) pcap file of link type lt.
func pcapFile(recs []dissect.Record, lt int, bo binary.AppendByteOrder, nano bool) []byte {
	magic := uint32(0xa1b2c3d4)
	if nano {
		magic = 0xa1b23c4d
	}
	var b []byte
	b = bo.AppendUint32(b, magic)
	b = bo.AppendUint16(b, 2)
	b = bo.AppendUint16(b, 4)
	b = bo.AppendUint32(b, 0)
	b = bo.AppendUint32(b, 0)
	b = bo.AppendUint32(b, 65535)
	b = bo.AppendUint32(b, uint32(lt))
	for _, r := range recs {
		frac := r.Time.Nanosecond()
		if !nano {
			frac /= 1000
		}
		b = bo.AppendUint32(b, uint32(r.Time.Unix()))
		b = bo.AppendUint32(b, uint32(frac))
		b = bo.AppendUint32(b, uint32(len(r.Data)))
		b = bo.AppendUint32(b, uint32(max(r.Length, len(r.Data))))
		b = append(b, r.Data...)
	}
	return b
}

func jsonLines(t testing.TB, recs []dissect.Record, keys *dissect.KeyRing) []string {
	d := dissect.NewDissector(&dissect.Config{Keys: keys})
	var out []string
	for _, r := range recs {
		if p := d.Decode(r); p != nil {
			out = append(out, string(p.AppendJSON(nil)))
		}
	}
	return out
}

// Every link type and both file formats give the same packets.
func TestLinkTypesAndFormats(t *testing.T) {
	sc := scenarios[0]
	keys := keyRing(t, sc, nil)
	recs := readRecords(t, testdata("road.pcapng"))
	want := jsonLines(t, recs, keys)
	if len(want) == 0 {
		t.Fatal("no packets")
	}
	for _, lt := range []int{dissect.LinkTypeEthernet, dissect.LinkTypeEthernet + 1000, dissect.LinkTypeNull,
		dissect.LinkTypeLoop, dissect.LinkTypeLinuxSLL, dissect.LinkTypeLinuxSLL2, dissect.LinkTypeIPv4} {
		out := lt
		if lt == dissect.LinkTypeEthernet+1000 {
			out = dissect.LinkTypeEthernet
		}
		wrapped := make([]dissect.Record, len(recs))
		for i, r := range recs {
			wrapped[i] = dissect.Record{Time: r.Time, LinkType: out, Data: wrap(t, r.Data, lt), Length: 0}
		}
		// pcap, both byte orders, micro and nano seconds, and gzip.
		for _, v := range []struct {
			bo   binary.AppendByteOrder
			nano bool
		}{{binary.LittleEndian, true}, {binary.BigEndian, true}, {binary.LittleEndian, false}} {
			file := pcapFile(wrapped, out, v.bo, v.nano)
			got := jsonLines(t, readAll(t, bytes.NewReader(file)), keys)
			if !v.nano {
				got = jsonLines(t, readAll(t, bytes.NewReader(file)), keys)
				if len(got) != len(want) {
					t.Fatalf("link %d, microsecond pcap: %d packets, want %d", lt, len(got), len(want))
				}
				continue // the times differ
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("link type %d (pcap %v): packets differ:\n got %s\nwant %s", lt, v.bo, first(got), first(want))
			}
		}
		var ng bytes.Buffer
		pw, _ := dissect.NewPcapngWriter(&ng, nil)
		for _, r := range wrapped {
			if err := pw.WriteRecord(r); err != nil {
				t.Fatal(err)
			}
		}
		if got := jsonLines(t, readAll(t, bytes.NewReader(gzipped(t, ng.Bytes()))), keys); strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("link type %d (gzipped pcapng): packets differ", lt)
		}
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return s[0]
}
