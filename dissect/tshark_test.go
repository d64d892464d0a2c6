package dissect_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/raet-go/raet/dissect"
)

// luaDissector is the Wireshark dissector raetgen writes from the spec.
const luaDissector = "../docs/wireshark/raet.lua"

// needTshark returns the path of tshark. Without it the test fails in CI
// (CI set), where .ci/run installs it, and is skipped elsewhere.
func needTshark(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("tshark is needed (Debian: apt-get install tshark); CI must install it")
		}
		t.Skip("tshark not installed (Debian: apt-get install tshark); skipping the comparison with the Lua dissector")
	}
	return path
}

// tsharkFields runs tshark with the generated dissector over a capture and
// returns, per frame number, the values of the fields.
func tsharkFields(t *testing.T, tshark, capture string, fields []string) map[int][]string {
	t.Helper()
	args := []string{"-n", "-X", "lua_script:" + luaDissector, "-r", capture, "-T", "fields",
		"-E", "separator=\t", "-E", "occurrence=f", "-e", "frame.number"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Lua: Error") || strings.Contains(stderr.String(), "lua_script") {
		t.Fatalf("tshark could not load the Lua dissector:\n%s", stderr.String())
	}
	rows := map[int][]string{}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		cols := strings.Split(line, "\t")
		n, err := strconv.Atoi(cols[0])
		if err != nil {
			t.Fatalf("tshark line %q", line)
		}
		for len(cols) < len(fields)+1 {
			cols = append(cols, "")
		}
		rows[n] = cols[1:]
	}
	return rows
}

// tsharkText is how tshark -T fields prints a head value of ours.
func tsharkText(key string, v any) string {
	switch x := v.(type) {
	case uint64:
		if key == "fg" {
			return fmt.Sprintf("0x%02x", x)
		}
		return strconv.FormatUint(x, 10)
	case bool:
		if x {
			return "1"
		}
		return "0"
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

func sameValue(key, got, want string) bool {
	if got == want {
		return true
	}
	if key == "dt" {
		g, err1 := strconv.ParseFloat(got, 64)
		w, err2 := strconv.ParseFloat(want, 64)
		return err1 == nil && err2 == nil && (g == w || math.Abs(g-w) < 1e-9*math.Abs(w))
	}
	return false
}

// TestTsharkAgrees reads every golden capture with tshark and the Lua
// dissector raetgen wrote, and compares every head field of every packet
// with what the Go dissector decodes; packets the Go side refuses must be
// errors in Lua too.
func TestTsharkAgrees(t *testing.T) {
	tshark := needTshark(t)
	var fields []string
	for _, k := range dissect.HeadFields {
		fields = append(fields, "raet."+k)
	}
	fields = append(fields, "raet.error")
	laneAt := len(fields)
	for _, k := range dissect.LaneFields {
		fields = append(fields, "raet_lane."+k)
	}
	fields = append(fields, "raet_lane.src", "raet_lane.dst", "raet_lane.error")
	captures := []string{"road", "segmented", "lane", "bad"}
	for _, name := range captures {
		t.Run(name, func(t *testing.T) {
			path := testdata(name + ".pcapng")
			rows := tsharkFields(t, tshark, path, fields)
			compareWithTshark(t, path, rows, laneAt)
		})
	}
	t.Run("linktypes", func(t *testing.T) {
		dir := t.TempDir()
		for _, lt := range []int{dissect.LinkTypeEthernet, dissect.LinkTypeLinuxSLL2, dissect.LinkTypeNull} {
			path := fmt.Sprintf("%s/road-%d.pcapng", dir, lt)
			rewrap(t, testdata("road.pcapng"), path, lt)
			compareWithTshark(t, path, tsharkFields(t, tshark, path, fields), laneAt)
		}
	})
}

func compareWithTshark(t *testing.T, path string, rows map[int][]string, laneAt int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := dissect.NewCaptureReader(f)
	if err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(nil)
	checked := 0
	for n := 1; ; n++ {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		row, ok := rows[n]
		if !ok {
			t.Fatalf("frame %d: tshark printed nothing", n)
		}
		roadVals, laneVals := row[:laneAt], row[laneAt:]
		p := d.Decode(rec)
		anyRoad := strings.Join(roadVals, "") != ""
		switch {
		case p == nil:
			if anyRoad {
				t.Errorf("frame %d: not RAET for Go, RAET for Lua: %q", n, roadVals)
			}
		case p.Lane:
			checkLane(t, n, p, laneVals)
		case len(p.Data) == 0 || !p.Src.IsValid():
			// An empty datagram, or a frame whose UDP layer is broken:
			// tshark hands nothing to the RAET dissector.
		case !p.HeadOK:
			if roadVals[len(roadVals)-1] == "" {
				t.Errorf("frame %d: Go refuses the head (%v); Lua shows no error: %q", n, p.Err, roadVals)
			}
		default:
			if e := roadVals[len(roadVals)-1]; e != "" {
				t.Errorf("frame %d: Lua error %q; Go decodes the head", n, e)
				continue
			}
			for i, k := range dissect.HeadFields {
				want := tsharkText(k, dissect.HeadValue(&p.Head, k))
				if !sameValue(k, roadVals[i], want) {
					t.Errorf("frame %d: raet.%s is %q in tshark, %q in Go", n, k, roadVals[i], want)
				}
			}
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no frames compared")
	}
}

func checkLane(t *testing.T, n int, p *dissect.Packet, vals []string) {
	errCol := vals[len(vals)-1]
	if !p.HeadOK {
		if errCol == "" {
			t.Errorf("frame %d: Go refuses the lane page (%v); Lua shows no error", n, p.Err)
		}
		return
	}
	if errCol != "" {
		t.Errorf("frame %d: Lua lane error %q; Go decodes it", n, errCol)
		return
	}
	h := &p.LaneHead
	want := []string{"RAET", fmt.Sprint(h.Version), fmt.Sprint(uint8(h.PackKind)), h.Source, h.Destination, h.SessionID,
		fmt.Sprint(h.BookID), fmt.Sprint(h.PageNumber), fmt.Sprint(h.PageCount), p.SrcPath, p.DstPath}
	for i, w := range want {
		if vals[i] != w {
			t.Errorf("frame %d: lane field %d is %q in tshark, %q in Go", n, i, vals[i], w)
		}
	}
}

// TestTsharkBundle compares the Lua dissector with the Go one on a capture
// of bundles and answers packets made with the packet-level code: every
// head field, and each bundled message's ti and length and each answered
// range.
func TestTsharkBundle(t *testing.T) {
	tshark := needTshark(t)
	path := bundleCapture(t)
	var fields []string
	for _, k := range dissect.HeadFields {
		fields = append(fields, "raet."+k)
	}
	fields = append(fields, "raet.error")
	laneAt := len(fields)
	for _, k := range dissect.LaneFields {
		fields = append(fields, "raet_lane."+k)
	}
	fields = append(fields, "raet_lane.src", "raet_lane.dst", "raet_lane.error")
	compareWithTshark(t, path, tsharkFields(t, tshark, path, fields), laneAt)

	extra := []string{"raet.bundle.ti", "raet.bundle.len", "raet.answers.pk", "raet.answers.first", "raet.answers.count", "raet.bundle.error"}
	args := []string{"-n", "-X", "lua_script:" + luaDissector, "-r", path, "-T", "fields",
		"-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, f := range extra {
		args = append(args, "-e", f)
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := dissect.NewCaptureReader(f)
	if err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(nil)
	n := 0
	for ; ; n++ {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := d.Decode(rec)
		var ti, ln, pk, first, count []string
		for _, m := range p.Bundle {
			ti = append(ti, strconv.FormatUint(uint64(m.TI), 10))
			ln = append(ln, strconv.Itoa(m.Len))
		}
		for _, r := range p.Answers {
			pk = append(pk, strconv.Itoa(int(r.Kind)))
			first = append(first, strconv.FormatUint(uint64(r.First), 10))
			count = append(count, strconv.FormatUint(uint64(r.Count), 10))
		}
		want := []string{strings.Join(ti, ","), strings.Join(ln, ","), strings.Join(pk, ","), strings.Join(first, ","), strings.Join(count, ","), ""}
		if n >= len(lines) {
			t.Fatalf("frame %d: tshark printed nothing", n+1)
		}
		got := strings.Split(lines[n], "\t")
		for len(got) < len(want) {
			got = append(got, "")
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("frame %d: %s is %q in tshark, %q in Go", n+1, extra[i], got[i], want[i])
			}
		}
	}
	if n == 0 {
		t.Fatal("no frames")
	}
}
