package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/dissect"
)

var update = flag.Bool("update", false, "rewrite the golden outputs in testdata")

func TestMain(m *testing.M) {
	time.Local = time.UTC // times in the golden outputs
	code := m.Run()
	if buildDir != "" { // the programs tools built
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

const captures = "../../dissect/testdata/"

// raetdump runs the command with args and returns its exit status, stdout
// and stderr.
func raetdump(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, bytes.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func keyArgs(name string, keeps ...string) []string {
	var a []string
	for _, k := range keeps {
		a = append(a, "-keep", captures+name+".keeps/"+k)
	}
	return append(a, "-keylog", captures+name+".keylog")
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Fatalf("%s differs (go test -update if the change is right):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// The text views of the captures, as golden files: one line per packet
// with the summary, -v, -x, and the transaction view -T.
func TestTextViews(t *testing.T) {
	roadKeys := keyArgs("road", "main", "other", "third")
	segKeys := keyArgs("segmented", "main", "other")
	cases := []struct {
		golden string
		args   []string
		status int
	}{
		{"road.txt", append([]string{"-r", captures + "road.pcapng"}, roadKeys...), 0},
		{"road-v.txt", append([]string{"-r", captures + "road.pcapng", "-v", "-c", "14", "-q"}, roadKeys...), 0},
		{"road-nokeys.txt", []string{"-r", captures + "road.pcapng"}, 0},
		{"segmented-T.txt", append([]string{"-r", captures + "segmented.pcapng", "-T"}, segKeys...), 0},
		{"segmented.txt", append([]string{"-r", captures + "segmented.pcapng"}, segKeys...), 0},
		{"lane-v.txt", []string{"-r", captures + "lane.pcapng", "-v"}, 0},
		{"bad-x.txt", []string{"-r", captures + "bad.pcapng", "-x"}, 1},
	}
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			code, out, stderr := raetdump(t, nil, c.args...)
			if code != c.status {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.status, stderr)
			}
			golden(t, c.golden, out)
		})
	}
}

var longString = regexp.MustCompile(`"(?:[^"\\]|\\.){200,}"`)

// shorten is the golden files' shortening of long strings (see package
// dissect's tests).
func shorten(line string) string {
	return longString.ReplaceAllStringFunc(line, func(q string) string {
		var s string
		json.Unmarshal([]byte(q), &s)
		sum := sha256.Sum256([]byte(s))
		return fmt.Sprintf(`"<%d bytes, sha256 %s>"`, len(s), hex.EncodeToString(sum[:8]))
	})
}

// -json prints what package dissect's golden files hold, one object a
// line, the summary going to stderr.
func TestJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		keys []string
	}{{"road", keyArgs("road", "main", "other", "third")}, {"segmented", keyArgs("segmented", "main", "other")},
		{"lane", nil}, {"bad", nil}} {
		t.Run(c.name, func(t *testing.T) {
			_, out, stderr := raetdump(t, nil, append([]string{"-r", captures + c.name + ".pcapng", "-json"}, c.keys...)...)
			want, err := os.ReadFile(captures + c.name + ".golden.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
				got.WriteString(shorten(l) + "\n")
			}
			if got.String() != string(want) {
				t.Fatalf("-json differs from %s.golden.jsonl", c.name)
			}
			if !strings.Contains(stderr, "summary:") {
				t.Fatalf("no summary on stderr: %q", stderr)
			}
		})
	}
}

// -w saves what was read; reading the saved file shows the same packets.
func TestWriteAndReadBack(t *testing.T) {
	out := filepath.Join(t.TempDir(), "copy.pcapng")
	code, stdout, stderr := raetdump(t, nil, "-r", captures+"road.pcapng", "-w", out)
	if code != 0 || stdout != "" || !strings.Contains(stderr, "34 road packets") {
		t.Fatalf("-w: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	_, a, _ := raetdump(t, nil, "-r", captures+"road.pcapng", "-json", "-q")
	_, b, _ := raetdump(t, nil, "-r", out, "-json", "-q")
	if a != b || a == "" {
		t.Fatal("the saved capture reads differently")
	}
	// And from stdin, with -c.
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	code, c, _ := raetdump(t, data, "-r", "-", "-json", "-q", "-c", "5")
	if code != 0 || strings.Count(c, "\n") != 5 || !strings.HasPrefix(a, c) {
		t.Fatalf("stdin -c 5: exit %d, %d lines", code, strings.Count(c, "\n"))
	}
}

// Bad input is reported with reasons and a status; raetdump never crashes.
func TestBadInput(t *testing.T) {
	good, err := os.ReadFile(captures + "road.pcapng")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cut := filepath.Join(dir, "cut.pcapng")
	os.WriteFile(cut, good[:len(good)-100], 0o644)
	junk := filepath.Join(dir, "junk")
	os.WriteFile(junk, []byte("this is not a capture"), 0o644)
	cases := []struct {
		args   []string
		status int
		stderr string
		stdout string
	}{
		{[]string{"-r", cut}, 1, "capture file truncated", "errors by reason: capture: capture file truncated 1"},
		{[]string{"-r", junk}, 3, "not a pcap or pcapng file", ""},
		{[]string{"-r", filepath.Join(dir, "nope")}, 3, "no such file", ""},
		{[]string{}, 2, "give exactly one of -r FILE and -i INTERFACE", ""},
		{[]string{"-r", cut, "-i", "lo"}, 2, "give exactly one", ""},
		{[]string{"-r", cut, "-p", "70000"}, 2, "bad port", ""},
		{[]string{"-r", cut, "-keep", filepath.Join(dir, "nokeep")}, 3, "no such file", ""},
		{[]string{"-r", cut, "-keylog", junk}, 1, "key log line 1", ""},
		{[]string{"-nosuchflag"}, 2, "flag provided but not defined", ""},
	}
	if !liveCapture {
		cases = append(cases, struct {
			args   []string
			status int
			stderr string
			stdout string
		}{[]string{"-r", cut, "udp", "port", "7530"}, 2, "rebuild with -tags pcap", ""},
			struct {
				args   []string
				status int
				stderr string
				stdout string
			}{[]string{"-i", "lo"}, 3, "rebuild with -tags pcap", ""})
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, stderr := raetdump(t, nil, c.args...)
			if code != c.status || !strings.Contains(stderr, c.stderr) || !strings.Contains(out, c.stdout) {
				t.Fatalf("exit %d (want %d)\nstderr %q (want %q)\nstdout %q (want %q)", code, c.status, stderr, c.stderr, out, c.stdout)
			}
		})
	}
}

func TestParsePorts(t *testing.T) {
	got, err := parsePorts("7531, 40000-40002,9")
	if err != nil || !slices.Equal(got, []uint16{7531, 40000, 40001, 40002, 9}) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "0", "x", "5-3", "1-70000", "65536"} {
		if _, err := parsePorts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Of a cooked frame on loopback, only the sent copy is dropped: a frame
// received, or sent on another device, is shown.
func TestSentOnLoopback(t *testing.T) {
	sll := func(pkttype, hatype uint16) dissect.Record {
		d := make([]byte, 16+20)
		binary.BigEndian.PutUint16(d[0:], pkttype)
		binary.BigEndian.PutUint16(d[2:], hatype)
		return dissect.Record{LinkType: dissect.LinkTypeLinuxSLL, Data: d}
	}
	sll2 := func(pkttype uint8, hatype uint16) dissect.Record {
		d := make([]byte, 20+20)
		binary.BigEndian.PutUint16(d[8:], hatype)
		d[10] = pkttype
		return dissect.Record{LinkType: dissect.LinkTypeLinuxSLL2, Data: d}
	}
	for _, c := range []struct {
		name string
		rec  dissect.Record
		want bool
	}{
		{"sll sent on lo", sll(4, 772), true},
		{"sll received on lo", sll(0, 772), false},
		{"sll sent on ethernet", sll(4, 1), false},
		{"sll2 sent on lo", sll2(4, 772), true},
		{"sll2 received on lo", sll2(0, 772), false},
		{"sll2 sent on ethernet", sll2(4, 1), false},
		{"ethernet", dissect.Record{LinkType: dissect.LinkTypeEthernet, Data: make([]byte, 40)}, false},
		{"short sll", dissect.Record{LinkType: dissect.LinkTypeLinuxSLL, Data: []byte{0, 4, 3, 4}}, false},
	} {
		if got := sentOnLoopback(c.rec); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
