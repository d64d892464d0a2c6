package dissect_test

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/dissect"
)

// gsoCapture rewrites a capture as a capture on lo sees a sender using UDP
// GSO: each run of datagrams from one address to another of one length,
// with the next shorter one of the pair if it follows, becomes one
// super-datagram. It returns the new file and the number of runs joined.
func gsoCapture(t *testing.T, path string) (string, int) {
	t.Helper()
	recs := readRecords(t, path)
	out := filepath.Join(t.TempDir(), "gso.pcapng")
	var buf bytes.Buffer
	w, err := dissect.NewPcapngWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	ld := dissect.NewLinkDecoder()
	ld.Heuristic = true
	type dg struct {
		at       time.Time
		src, dst netip.AddrPort
		data     []byte
	}
	var dgs []dg
	for _, rec := range recs {
		f := ld.Decode(rec.LinkType, rec.Data, rec.Length)
		if f.Kind != dissect.FrameRoad {
			t.Fatalf("a frame of kind %v", f.Kind)
		}
		dgs = append(dgs, dg{rec.Time, f.Src, f.Dst, append([]byte(nil), f.Payload...)})
	}
	runs := 0
	for i := 0; i < len(dgs); {
		j := i + 1
		for j < len(dgs) && dgs[j].src == dgs[i].src && dgs[j].dst == dgs[i].dst && len(dgs[j].data) == len(dgs[i].data) {
			j++
		}
		if j < len(dgs) && j > i+1 && dgs[j].src == dgs[i].src && dgs[j].dst == dgs[i].dst && len(dgs[j].data) < len(dgs[i].data) {
			j++
		}
		var joined []byte
		for _, d := range dgs[i:j] {
			joined = append(joined, d.data...)
		}
		if j > i+1 {
			runs++
		}
		if err := w.WriteRoad(dgs[i].at, dgs[i].src, dgs[i].dst, joined); err != nil {
			t.Fatal(err)
		}
		i = j
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return out, runs
}

// packetsOf dissects a capture, every packet of each super-datagram
// included, into one line per packet: its head, body and transaction
// event.
func packetsOf(t *testing.T, path string, keys *dissect.KeyRing) ([]string, *dissect.Stats) {
	t.Helper()
	d := dissect.NewDissector(&dissect.Config{Keys: keys})
	var lines []string
	var p dissect.Packet
	for _, rec := range readRecords(t, path) {
		for ok := d.DecodeInto(rec, &p); ok; ok = d.Next(&p) {
			if p.Err != nil {
				t.Fatalf("%s: record %d (gso %d): %v", path, p.N, p.GSO, p.Err)
			}
			lines = append(lines, fmt.Sprintf("%v %v > %v %+v body %v %v event %q", p.Parsed, p.Src, p.Dst, p.Head, p.HasBody, p.Body, p.Note.Event))
			if js := string(p.AppendJSON(nil)); (p.GSO > 0) != strings.Contains(js, fmt.Sprintf(`,"gso":%d,`, p.GSO)) {
				t.Fatalf("record %d, gso %d: %s", p.N, p.GSO, js)
			}
		}
	}
	d.Flush()
	return lines, d.Stats()
}

// A capture on lo sees the datagrams a stack sends with UDP GSO before the
// kernel cuts them: the dissector splits each by its heads' packet lengths
// and reads the same packets, bodies and transactions as from the capture
// of the datagrams one by one.
func TestDissectGSO(t *testing.T) {
	sc := scenarios[1]
	orig := testdata(sc.name + ".pcapng")
	gso, runs := gsoCapture(t, orig)
	if runs == 0 {
		t.Fatal("no run of equal datagrams to join")
	}
	want, wst := packetsOf(t, orig, keyRing(t, sc, nil))
	got, gst := packetsOf(t, gso, keyRing(t, sc, nil))
	if len(got) != len(want) {
		t.Fatalf("%d packets from the GSO capture, %d from the original", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("packet %d:\n got %s\nwant %s", i+1, got[i], want[i])
		}
	}
	if gst.GSO != runs || wst.GSO != 0 || gst.Road != wst.Road || gst.Records >= wst.Records || gst.Errors != 0 {
		t.Fatalf("GSO %d (runs %d), packets %d/%d, records %d/%d, errors %d", gst.GSO, runs, gst.Road, wst.Road, gst.Records, wst.Records, gst.Errors)
	}
}

// What is not a super-datagram stays whole and is refused as it is: a
// packet followed by bytes that are not a packet, or by a longer packet.
func TestDissectGSONot(t *testing.T) {
	recs := readRecords(t, testdata("segmented.pcapng"))
	first := recs[0].Data[28:]
	var long []byte
	for _, r := range recs {
		if len(r.Data)-28 > len(first) {
			long = r.Data[28:]
			break
		}
	}
	if long == nil {
		t.Fatal("no longer datagram")
	}
	at := time.Unix(1700000000, 0)
	for name, data := range map[string][]byte{
		"junk after":        append(append([]byte(nil), first...), "junk"...),
		"longer after":      append(append([]byte(nil), first...), long...),
		"truncated packet":  append(append([]byte(nil), first...), first[:len(first)-1]...),
		"a head, no packet": append(append([]byte(nil), first...), first[:10]...),
	} {
		d := dissect.NewDissector(nil)
		p := d.Decode(udpRecord(data, at))
		if p.Err == nil || p.GSO != 0 || d.Next(p) || d.Stats().GSO != 0 {
			t.Errorf("%s: err %v, gso %d", name, p.Err, p.GSO)
		}
	}
}
