package dissect_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
	"github.com/raet-go/raet/road/roadtest"
)

// The golden captures in testdata are made by our own stacks, tapped with
// dissect.PcapngWriter (go test ./dissect -run TestGolden -capture), except
// lane.pcapng and bad.pcapng, whose frames are built here. Each capture
// comes with the keeps and key log of its stacks and with the JSON raetdump
// shows for it (<name>.golden.jsonl, long strings of bodies shortened to
// their digest) and the summary (<name>.golden.summary).
var (
	update    = flag.Bool("update", false, "rewrite the golden files from the captures in testdata")
	recapture = flag.Bool("capture", false, "make the captures in testdata again with our stacks (implies -update)")
)

type scenario struct {
	name    string
	keeps   []string // subdirectories of testdata/<name>.keeps
	keylog  bool
	capture func(t *testing.T, dir string) // writes testdata files under dir
}

var scenarios = []scenario{
	{name: "road", keeps: []string{"main", "other", "third"}, keylog: true, capture: captureRoad},
	{name: "segmented", keeps: []string{"main", "other"}, keylog: true, capture: captureSegmented},
	{name: "lane", capture: captureLane},
	{name: "bad", capture: captureBad},
}

func testdata(name string) string { return filepath.Join("testdata", name) }

// stackKit makes stacks that share one tap and remember their key logs.
type stackKit struct {
	t      *testing.T
	dir    string
	pw     *dissect.PcapngWriter
	keylog map[string]*lockedBuffer
	stacks []*road.Stack
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (k *stackKit) stack(cfg road.Config, tap bool) *road.Stack {
	k.t.Helper()
	cfg.Listen = "127.0.0.1:0"
	cfg.Auto = keep.AutoAlways
	cfg.KeepDir = filepath.Join(k.dir, "keeps", cfg.Name)
	kl := &lockedBuffer{}
	k.keylog[cfg.Name] = kl
	cfg.KeyLog = kl
	if tap {
		cfg.Tap = func(p road.TapPacket) { k.pw.Tap(dissect.RoadPacket(p)) }
	}
	if cfg.AlivePeriod == 0 {
		cfg.AlivePeriod = -1
	}
	s := roadtest.Start(k.t, cfg)
	k.stacks = append(k.stacks, s)
	return s
}

func (k *stackKit) closeAll() {
	for _, s := range k.stacks {
		s.Close()
	}
}

func newKit(t *testing.T) (*stackKit, *bytes.Buffer) {
	var buf bytes.Buffer
	pw, err := dissect.NewPcapngWriter(&buf, &dissect.WriterOptions{Application: "raet-go dissect tests"})
	if err != nil {
		t.Fatal(err)
	}
	return &stackKit{t: t, dir: t.TempDir(), pw: pw, keylog: map[string]*lockedBuffer{}}, &buf
}

// save writes the capture, the key log lines of names and the keeps.
func (k *stackKit) save(name string, pcap *bytes.Buffer, keylogNames ...string) {
	t := k.t
	if err := k.pw.Err(); err != nil {
		t.Fatal(err)
	}
	write(t, testdata(name+".pcapng"), pcap.Bytes())
	var kl strings.Builder
	kl.WriteString("# the key logs of the stacks of " + name + ".pcapng\n")
	for _, n := range keylogNames {
		kl.WriteString("# " + n + "\n" + k.keylog[n].String())
	}
	write(t, testdata(name+".keylog"), []byte(kl.String()))
	keeps := testdata(name + ".keeps")
	if err := os.RemoveAll(keeps); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(keeps, os.DirFS(filepath.Join(k.dir, "keeps"))); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func recv(t *testing.T, s *road.Stack) road.Message {
	t.Helper()
	select {
	case m := <-s.Receive():
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("%s received nothing", s.Name())
	}
	return road.Message{}
}

// captureRoad: other (JSON heads, msgpack bodies) and third (binary heads,
// CBOR bodies) join main (native heads, JSON bodies), allow, exchange
// messages, and main checks they are alive; tapped at main.
func captureRoad(t *testing.T, _ string) {
	k, buf := newKit(t)
	main := k.stack(road.Config{Name: "main", Main: true, AlivePeriod: 300 * time.Millisecond}, true)
	other := k.stack(road.Config{Name: "other", HeadKind: codec.HeadKindJSON, BodyKind: codec.BodyKindMsgpack}, false)
	third := k.stack(road.Config{Name: "third", HeadKind: codec.HeadKindBinary, BodyKind: codec.BodyKindCBOR}, false)
	c := ctx(t)
	if _, err := other.Join(c, main.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := other.Send(c, "main", packet.OrderedMap{{Key: "subject", Value: "hello main"}, {Key: "n", Value: 1}}); err != nil {
		t.Fatal(err)
	}
	recv(t, main)
	if err := main.Send(c, "other", packet.OrderedMap{{Key: "subject", Value: "hello other"}, {Key: "list", Value: []any{1, "two", 3.5, nil, true}}}); err != nil {
		t.Fatal(err)
	}
	recv(t, other)
	if _, err := third.Join(c, main.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := third.Send(c, "main", packet.OrderedMap{{Key: "subject", Value: "binary head, cbor body"}, {Key: "bytes", Value: []byte{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	recv(t, main)
	time.Sleep(700 * time.Millisecond) // a few alives
	k.closeAll()
	k.save("road", buf, "main", "other", "third")
}

// dropConn drops the first transmission of some message segments.
type dropConn struct {
	net.PacketConn
	drop map[uint16]bool
	mu   sync.Mutex
}

func (d *dropConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	var p packet.Packet
	if packet.Parse(b, &p) == nil && p.Head.TransactionKind == codec.TransactionKindMessage &&
		p.Head.PacketKind == codec.PacketKindMessage && p.Head.Segment() && !p.Head.Again() {
		d.mu.Lock()
		drop := d.drop[p.Head.SegmentNumber]
		delete(d.drop, p.Head.SegmentNumber)
		d.mu.Unlock()
		if drop {
			return len(b), nil
		}
	}
	return d.PacketConn.WriteTo(b, addr)
}

// captureSegmented: other sends main a message of 100 kB; segments 3, 4, 5
// and 40 are lost on their first way, so main asks for them again; tapped
// at main.
func captureSegmented(t *testing.T, _ string) {
	k, buf := newKit(t)
	main := k.stack(road.Config{Name: "main", Main: true}, true)
	uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	dc := &dropConn{PacketConn: uc, drop: map[uint16]bool{3: true, 4: true, 5: true, 40: true}}
	other := k.stack(road.Config{Name: "other", PacketConn: dc}, false)
	c := ctx(t)
	if _, err := other.Join(c, main.Addr().String()); err != nil {
		t.Fatal(err)
	}
	blob := strings.Repeat("0123456789abcdef", 100_000/16)
	if err := other.Send(c, "main", packet.OrderedMap{{Key: "subject", Value: "100 kB"}, {Key: "blob", Value: blob}}); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, main); m.Body["blob"] != blob {
		t.Fatal("main got a different blob")
	}
	k.closeAll()
	k.save("segmented", buf, "main", "other")
}

// lanePage builds a lane page.
func lanePage(t *testing.T, h codeclane.Head, body []byte) []byte {
	b, err := codeclane.Append(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, body...)
}

// captureLane writes lane records: pages between two yards in JSON and
// msgpack, and a book of three pages, as a lane stack's tap would.
func captureLane(t *testing.T, _ string) {
	var buf bytes.Buffer
	pw, err := dissect.NewPcapngWriter(&buf, &dissect.WriterOptions{Application: "raet-go dissect tests"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	alpha, beta := "/tmp/raet/lane.alpha.uxd", "/tmp/raet/lane.beta.uxd"
	h := codeclane.Head{Version: 0, PackKind: codec.PackKindJSON, Source: "alpha", Destination: "beta",
		SessionID: "661752e96abf6110ed", BookID: 1, PageNumber: 0, PageCount: 1}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(pw.WriteLane(at, alpha, beta, true, lanePage(t, h, []byte(`{"subject":"lane hello","n":1}`))))
	mp, err := packet.MsgpackBody{}.Marshal(nil, packet.OrderedMap{{Key: "subject", Value: "msgpack reply"}, {Key: "ok", Value: true}})
	must(err)
	hb := codeclane.Head{Version: 0, PackKind: codec.PackKindPack, Source: "beta", Destination: "alpha",
		SessionID: "661752e96abf6110ee", BookID: 1, PageNumber: 0, PageCount: 1}
	must(pw.WriteLane(at.Add(time.Millisecond), beta, alpha, false, lanePage(t, hb, mp)))
	book := []byte(`{"subject":"a book of three pages","text":"` + strings.Repeat("lane ", 30) + `"}`)
	third := (len(book) + 2) / 3
	for i := 0; i < 3; i++ {
		h.BookID, h.PageNumber, h.PageCount = 2, uint16(i), 3
		must(pw.WriteLane(at.Add(time.Duration(2+i)*time.Millisecond), alpha, beta, true,
			lanePage(t, h, book[i*third:min((i+1)*third, len(book))])))
	}
	write(t, testdata("lane.pcapng"), buf.Bytes())
}

// badDatagram is one frame of bad.pcapng and what it shows.
type badDatagram struct {
	why  string
	data []byte
}

// nativeHead encodes a native head for h with a coat and no foot.
func nativeDatagram(t *testing.T, h codec.Head, coat []byte) []byte {
	t.Helper()
	c, err := codec.Lookup(codec.HeadKindRaet)
	if err != nil {
		t.Fatal(err)
	}
	pk := packet.Packer{Codec: c, Foot: packet.NadaFoot{}}
	b, err := pk.Pack(nil, &h, coat)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// captureBad writes frames that raetdump must show as errors, among them
// the inputs that crash the reference's service loop (raet-protocol.md §13).
func captureBad(t *testing.T, _ string) {
	var buf bytes.Buffer
	pw, err := dissect.NewPcapngWriter(&buf, &dissect.WriterOptions{Application: "raet-go dissect tests"})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	a, b := netip.MustParseAddrPort("127.0.0.1:40001"), netip.MustParseAddrPort("127.0.0.1:7530")
	var h codec.Head
	h.Reset()
	h.PacketKind, h.SourceID, h.DestinationID, h.TransactionID = codec.PacketKindRequest, 5, 0, 1
	h.TransactionKind, h.BodyKind = codec.TransactionKindJoin, codec.BodyKindJSON
	good := nativeDatagram(t, h, []byte(`{"name":"x"}`))
	badJSON := nativeDatagram(t, h, []byte(`{"name":`))
	var seg codec.Head
	seg.Reset()
	seg.SourceID, seg.DestinationID, seg.SessionID, seg.TransactionID = 5, 6, 1, 9
	seg.SegmentNumber, seg.SegmentCount, seg.MessageLength = 5, 2, 100
	seg.SetSegment(true)
	badSeg := nativeDatagram(t, seg, bytes.Repeat([]byte{'x'}, 50))
	var fh codec.Head
	fh.Reset()
	fh.FootKind = codec.FootKindCRC64
	nc, _ := codec.Lookup(codec.HeadKindRaet)
	unknownFoot, err := nc.Append(nil, &fh)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.SetPacketLength(unknownFoot, len(unknownFoot)); err != nil {
		t.Fatal(err)
	}
	frames := []badDatagram{
		{"a good join request, for contrast", good},
		{"not RAET: other UDP traffic on port 7530", []byte("hello, world\n")},
		{"a head line with two spaces (crashes the reference)", []byte("ri RAET\npl 0027\nhl 27\nfg 00\nbk  1\n\n")},
		{"a head with the key bl (crashes the reference)", []byte("ri RAET\npl 0027\nhl 27\nfg 00\nbl 1\n\n")},
		{"a JSON body that does not parse (crashes the reference)", badJSON},
		{"a segment numbered beyond its count (crashes the reference)", badSeg},
		{"pl larger than the datagram", good[:len(good)-3]},
		{"an unknown foot kind", unknownFoot},
		{"a JSON head with a bad value type", []byte(`{"ri":"RAET","pl":"0000039","hl":"39","fg":"00","hk":"1"}` + "\r\n\r\n")},
		{"an empty datagram", nil},
	}
	for i, f := range frames {
		if err := pw.WriteRoad(at.Add(time.Duration(i)*time.Millisecond), a, b, f.data); err != nil {
			t.Fatal(err)
		}
	}
	n := len(frames)
	next := func() time.Time { n++; return at.Add(time.Duration(n) * time.Millisecond) }
	// A frame the capture cut short: 20 of its bytes are missing.
	ipUDP := rawUDP(a, b, good)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(pw.WriteRecord(dissect.Record{Time: next(), LinkType: dissect.LinkTypeRaw, Data: ipUDP[:len(ipUDP)-20], Length: len(ipUDP)}))
	// A lane record with a bad magic, and one whose page head is bad.
	must(pw.WriteRecord(dissect.Record{Time: next(), LinkType: dissect.LinkTypeLane, Data: []byte("NOPE\x01\x00\x00\x00\x00\x00ri RAET\n")}))
	must(pw.WriteLane(next(), "/tmp/a.uxd", "/tmp/b.uxd", true, []byte("ri RAET\nvn 0\npk 9\n\n{}")))
	// An IPv4 frame whose UDP header is cut, and a raw frame of IP version 5.
	must(pw.WriteRecord(dissect.Record{Time: next(), LinkType: dissect.LinkTypeRaw, Data: ipUDP[:24]}))
	must(pw.WriteRecord(dissect.Record{Time: next(), LinkType: dissect.LinkTypeRaw, Data: []byte{0x50, 1, 2, 3}}))
	// UDP to another port: not RAET, skipped and counted.
	must(pw.WriteRoad(next(), a, netip.MustParseAddrPort("127.0.0.1:53"), []byte("dns?")))
	write(t, testdata("bad.pcapng"), buf.Bytes())
}

// rawUDP is an IPv4/UDP frame of data from a to b, made the way the
// writer makes them.
func rawUDP(a, b netip.AddrPort, data []byte) []byte {
	var buf bytes.Buffer
	pw, _ := dissect.NewPcapngWriter(&buf, nil)
	_ = pw.WriteRoad(time.Unix(0, 0), a, b, data)
	cr, err := dissect.NewCaptureReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		panic(err)
	}
	rec, err := cr.Next()
	if err != nil {
		panic(err)
	}
	return append([]byte(nil), rec.Data...)
}

// keyRing loads the keeps and the key log of a scenario.
func keyRing(t testing.TB, sc scenario, only func(line string) bool) *dissect.KeyRing {
	k := dissect.NewKeyRing()
	for _, name := range sc.keeps {
		if err := k.AddKeep(filepath.Join(testdata(sc.name+".keeps"), name)); err != nil {
			t.Fatal(err)
		}
	}
	if sc.keylog {
		data, err := os.ReadFile(testdata(sc.name + ".keylog"))
		if err != nil {
			t.Fatal(err)
		}
		if only != nil {
			var keep []string
			for _, l := range strings.Split(string(data), "\n") {
				if only(l) {
					keep = append(keep, l)
				}
			}
			data = []byte(strings.Join(keep, "\n"))
		}
		if err := k.AddKeyLog(bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// dissectFile dissects a capture file into JSON lines and the summary.
func dissectFile(t testing.TB, path string, keys *dissect.KeyRing) ([]string, *dissect.Stats) {
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
	d := dissect.NewDissector(&dissect.Config{Keys: keys})
	var lines []string
	var p dissect.Packet
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d.DecodeInto(rec, &p) {
			lines = append(lines, string(p.AppendJSON(nil)))
		}
	}
	d.Flush()
	return lines, d.Stats()
}

// longString matches a JSON string literal of more than 200 characters.
var longString = regexp.MustCompile(`"(?:[^"\\]|\\.){200,}"`)

// goldenLine checks that a line is one JSON object and shortens its long
// strings (the bodies of big messages) to their length and digest.
func goldenLine(t testing.TB, line string) string {
	if !json.Valid([]byte(line)) {
		t.Fatalf("invalid JSON: %s", line)
	}
	return longString.ReplaceAllStringFunc(line, func(q string) string {
		var s string
		if err := json.Unmarshal([]byte(q), &s); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(s))
		return fmt.Sprintf(`"<%d bytes, sha256 %s>"`, len(s), hex.EncodeToString(sum[:8]))
	})
}

func TestGolden(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			if *recapture {
				sc.capture(t, "testdata")
			}
			lines, st := dissectFile(t, testdata(sc.name+".pcapng"), keyRing(t, sc, nil))
			var got strings.Builder
			for _, l := range lines {
				got.WriteString(goldenLine(t, l))
				got.WriteByte('\n')
			}
			var sum strings.Builder
			st.WriteText(&sum)
			checkGolden(t, testdata(sc.name+".golden.jsonl"), got.String())
			checkGolden(t, testdata(sc.name+".golden.summary"), sum.String())
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update || *recapture {
		write(t, path, []byte(got))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs at line %d (run with -update if the change is right):\n got: %s\nwant: %s", path, i+1, g, w)
			}
		}
	}
}
