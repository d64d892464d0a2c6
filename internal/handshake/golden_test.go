package handshake

import (
	"bytes"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raet-go/raet/keys"
)

var update = flag.Bool("update", false, "rewrite testdata/allow.hex from the makers")

// The golden handshake uses the keys of raet-protocol.md §7.4: "other" is
// the initiator I and "main" the correspondent R, with the short-term keys
// captured there. The uids are those of the captured join (§8.2): main's uid
// for other is 0x66, other's uid for main is 0xca.
const (
	goldenILongPri  = "fb47b518e7ecdc67b5a197a7f189c77ad0ffc71d302fb1f6a60aaab5e3bfb56c"
	goldenRLongPri  = "8985d11cb2e2fecb083005f376c829b18d8f76ef7e22354a639e5682876562c5"
	goldenIShortPri = "211f3b713dfa4e8c79327b7a17a775eec955823d76af31047a5e0930eb0574f0"
	goldenRShortPri = "714f9552809f71545c6efe6b24a8e8b3d2a2e2e6c928f5920c748dc1e38e1f58"
	goldenSEID      = 0x66
	goldenDEID      = 0xca
	goldenFQDN      = "main.example.com"
)

// goldenRandom is the whole random input of one handshake, in the order the
// makers draw it: hello nonce, cookie oreo, cookie nonce, vouch nonce,
// initiate nonce. Bytes 0x00, 0x01, ... 0x77, so each value is easy to spot
// in the dump; a sixth draw would fail with io.EOF.
func goldenRandom() *bytes.Reader {
	b := make([]byte, 5*24)
	for k := range b {
		b[k] = byte(k)
	}
	return bytes.NewReader(b)
}

func mustBox(t testing.TB, prihex string) keys.Box {
	t.Helper()
	pri, err := keys.ParsePrivateKey(prihex)
	if err != nil {
		t.Fatal(err)
	}
	b, err := keys.NewBox(pri)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type goldenParties struct{ iLong, rLong, iShort, rShort keys.Box }

func loadGoldenParties(t testing.TB) goldenParties {
	return goldenParties{
		iLong: mustBox(t, goldenILongPri), rLong: mustBox(t, goldenRLongPri),
		iShort: mustBox(t, goldenIShortPri), rShort: mustBox(t, goldenRShortPri),
	}
}

// section is one named byte string of the golden file and its regions.
type section struct {
	name    string
	comment string
	data    []byte
	regions []struct {
		name     string
		from, to int
	}
}

func (s *section) region(name string, from, to int) *section {
	s.regions = append(s.regions, struct {
		name     string
		from, to int
	}{name, from, to})
	return s
}

// makeGolden runs the makers on the golden inputs and returns the bodies,
// plus the two inner stuffs (opened back out of their boxes) for review.
func makeGolden(t *testing.T) []*section {
	t.Helper()
	p := loadGoldenParties(t)
	rnd := goldenRandom()
	hello, _, err := MakeHello(rnd, p.iShort, p.rLong.Public)
	if err != nil {
		t.Fatal(err)
	}
	cookie, oreo, err := MakeCookie(rnd, boxKey(p.rLong.Private, p.iShort.Public), p.rShort.Public, goldenSEID, goldenDEID)
	if err != nil {
		t.Fatal(err)
	}
	initiate, _, err := MakeInitiate(rnd, p.iShort, p.iLong, p.rShort.Public, p.rLong.Public, oreo, goldenFQDN)
	if err != nil {
		t.Fatal(err)
	}
	if rnd.Len() != 0 {
		t.Fatalf("%d random bytes left over", rnd.Len())
	}
	cstuff, err := open(cookie[:80], cookie[80:], boxKey(p.iShort.Private, p.rLong.Public), StepCookie, "box")
	if err != nil {
		t.Fatal(err)
	}
	istuff, err := open(initiate[56:304], initiate[304:], boxKey(p.rShort.Private, p.iShort.Public), StepInitiate, "box")
	if err != nil {
		t.Fatal(err)
	}
	return []*section{
		(&section{name: "hello", data: hello,
			comment: "I -> R, pk=6. box = crypto_box(plain; I short pri, R long pub)."}).
			region("plain", 0, 64).region("I short pub", 64, 96).
			region("box: tag 16 | 64", 96, 176).region("nonce", 176, 200),
		(&section{name: "cookie", data: cookie,
			comment: "R -> I, pk=7. box = crypto_box(cookie stuff; R long pri, I short pub)."}).
			region("box: tag 16 | 64", 0, 80).region("nonce", 80, 104),
		(&section{name: "cookie stuff", data: cstuff,
			comment: "Inside the cookie box; not on the wire as such."}).
			region("R short pub", 0, 32).region("seid, u32 big-endian", 32, 36).
			region("deid, u32 big-endian", 36, 40).region("oreo", 40, 64),
		(&section{name: "initiate", data: initiate,
			comment: "I -> R, pk=8. box = crypto_box(initiate stuff; I short pri, R short pub)."}).
			region("I short pub", 0, 32).region("oreo", 32, 56).
			region("box: tag 16 | 232", 56, 304).region("nonce", 304, 328),
		(&section{name: "initiate stuff", data: istuff,
			comment: "Inside the initiate box. vouch = crypto_box(I short pub; I long pri, R long pub)."}).
			region("I long pub", 0, 32).region("vouch: tag 16 | 32", 32, 80).
			region("vouch nonce", 80, 104).region("fqdn, space-padded", 104, 232),
	}
}

const goldenHeader = `# The allow handshake (raet-protocol.md §8.3) with fixed inputs, as
# internal/handshake makes it; go test -run TestGolden -update rewrites it.
# Keys (§7.4): I = "other", long prihex fb47b518..., short prihex 211f3b71...;
# R = "main", long prihex 8985d11c..., short prihex 714f9552....
# seid 0x66 (R's uid for I), deid 0xca (I's uid for R), fqdn "main.example.com".
# Random source: bytes 00 01 02 ... 77, drawn in order: hello nonce, cookie
# oreo, cookie nonce, vouch nonce, initiate nonce.
# Every box is crypto_box (XSalsa20-Poly1305): 16-byte tag, then the
# encrypted bytes; its nonce follows it. Cross-checked against libsodium
# (crypto_box_easy) with testdata/libsodium_allow.py, which builds the same
# bodies independently from the layout.
`

// formatGolden writes the sections as an annotated hexdump: "## name" starts
// a section, "# ..." lines are comments, and each region starts a new row.
func formatGolden(secs []*section) []byte {
	var b strings.Builder
	b.WriteString(goldenHeader)
	for _, s := range secs {
		fmt.Fprintf(&b, "\n## %s (%d bytes)\n# %s\n", s.name, len(s.data), s.comment)
		for _, r := range s.regions {
			fmt.Fprintf(&b, "# %s: bytes %d..%d (%d)\n", r.name, r.from, r.to, r.to-r.from)
			for k := r.from; k < r.to; k += 16 {
				row := s.data[k:min(k+16, r.to)]
				hx := make([]string, len(row))
				asc := make([]byte, len(row))
				for j, c := range row {
					hx[j] = hex.EncodeToString([]byte{c})
					asc[j] = '.'
					if c >= 0x20 && c < 0x7f {
						asc[j] = c
					}
				}
				// Trailing spaces trimmed, so editors leave the file alone.
				line := fmt.Sprintf("%-47s  # %s", strings.Join(hx, " "), asc)
				b.WriteString(strings.TrimRight(line, " "))
				b.WriteByte('\n')
			}
		}
	}
	return []byte(b.String())
}

// parseGolden reads the sections of an annotated hexdump.
func parseGolden(t *testing.T, text []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var cur string
	for n, line := range strings.Split(string(text), "\n") {
		if name, ok := strings.CutPrefix(line, "## "); ok {
			cur, _, _ = strings.Cut(name, " (")
			out[cur] = []byte{}
			continue
		}
		line, _, _ = strings.Cut(line, "#")
		line = strings.ReplaceAll(strings.TrimSpace(line), " ", "")
		if line == "" {
			continue
		}
		if cur == "" {
			t.Fatalf("line %d: bytes before the first section", n+1)
		}
		b, err := hex.DecodeString(line)
		if err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		out[cur] = append(out[cur], b...)
	}
	return out
}

func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "allow.hex")
	secs := makeGolden(t)
	text := formatGolden(secs)
	if *update {
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden := parseGolden(t, raw)
	for _, s := range secs {
		if g, ok := golden[s.name]; !ok || !bytes.Equal(g, s.data) {
			t.Errorf("%s differs from %s:\n got %x\nwant %x", s.name, path, s.data, g)
		}
	}
	if !bytes.Equal(raw, text) {
		t.Errorf("%s: annotations are stale; run go test -run TestGolden -update", path)
	}

	// The golden bytes themselves, read against the layout, independently of
	// the code that wrote them.
	p := loadGoldenParties(t)
	hello, cookie, cstuff := golden["hello"], golden["cookie"], golden["cookie stuff"]
	initiate, istuff := golden["initiate"], golden["initiate stuff"]
	seq := func(from, n int) []byte {
		b := make([]byte, n)
		for k := range b {
			b[k] = byte(from + k)
		}
		return b
	}
	checks := []struct {
		name      string
		got, want []byte
	}{
		{"hello plain", hello[:64], bytes.Repeat([]byte("0"), 64)},
		{"hello short pub", hello[64:96], p.iShort.Public[:]},
		{"hello nonce", hello[176:], seq(0x00, 24)},
		{"cookie nonce", cookie[80:], seq(0x30, 24)},
		{"cookie R short pub", cstuff[:32], p.rShort.Public[:]},
		{"cookie seid", cstuff[32:36], []byte{0, 0, 0, 0x66}},
		{"cookie deid", cstuff[36:40], []byte{0, 0, 0, 0xca}},
		{"cookie oreo", cstuff[40:], seq(0x18, 24)},
		{"initiate short pub", initiate[:32], p.iShort.Public[:]},
		{"initiate oreo", initiate[32:56], seq(0x18, 24)},
		{"initiate nonce", initiate[304:], seq(0x60, 24)},
		{"initiate long pub", istuff[:32], p.iLong.Public[:]},
		{"vouch nonce", istuff[80:104], seq(0x48, 24)},
		{"fqdn", istuff[104:], []byte(goldenFQDN + strings.Repeat(" ", 128-len(goldenFQDN)))},
	}
	for _, c := range checks {
		if !bytes.Equal(c.got, c.want) {
			t.Errorf("%s: %x, want %x", c.name, c.got, c.want)
		}
	}
	vouch, err := open(istuff[32:80], istuff[80:104], boxKey(p.rLong.Private, p.iLong.Public), StepInitiate, "vouch")
	if err != nil || !bytes.Equal(vouch, p.iShort.Public[:]) {
		t.Errorf("vouch opens to %x, %v; want I's short pub", vouch, err)
	}

	// And the openers accept them.
	if got, _, err := OpenHello(hello, p.rLong.Private); err != nil || got != p.iShort.Public {
		t.Errorf("OpenHello(golden) = %v, %v", got, err)
	}
	c, err := OpenCookie(cookie, boxKey(p.iShort.Private, p.rLong.Public), goldenSEID, goldenDEID)
	if err != nil || c.RShortPub != p.rShort.Public || c.Oreo != Oreo(seq(0x18, 24)) {
		t.Errorf("OpenCookie(golden) = %+v, %v", c, err)
	}
	in, _, err := OpenInitiate(initiate, p.rShort.Private, p.rLong.Private, InitiateWant{
		IShortPub: p.iShort.Public, Oreo: c.Oreo, ILongPub: p.iLong.Public, FQDN: goldenFQDN})
	if err != nil || !in.FQDNMatch || in.FQDN != goldenFQDN {
		t.Errorf("OpenInitiate(golden) = %+v, %v", in, err)
	}
}
