package codec_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/codec/binary"
	"github.com/raet-go/raet/codec/codectest"
	"github.com/raet-go/raet/codec/json"
	"github.com/raet-go/raet/codec/native"
)

var allCodecs = []codec.Codec{native.Codec{}, json.Codec{}, binary.Codec{}}

// typicalHead is a signed and coated message head, as the road sends them.
func typicalHead() codec.Head {
	var h codec.Head
	h.Reset()
	h.Flags = codec.FlagWait
	h.SourceID, h.DestinationID, h.SessionID, h.TransactionID = 0xca, 0x66, 2, 4
	h.BodyKind, h.CoatKind, h.FootKind, h.FootLength = codec.BodyKindJSON, codec.CoatKindNaCl, codec.FootKindNaCl, 64
	return h
}

// A random head must survive native → JSON → binary → native with the same
// values, each hop decoding the previous hop's encoding.
func TestCrossCodecProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 42))
	done := 0
	for i := 0; i < 3000; i++ {
		orig := codectest.RandomHead(r)
		cur := orig
		ok := true
		for hop := 0; hop < 4; hop++ {
			c := allCodecs[hop%3]
			pkt, err := codectest.Packet(c, &cur, 17)
			if errors.Is(err, codec.ErrTooLong) {
				ok = false // too many large values for a text head; every codec agrees below
				break
			}
			if err != nil {
				t.Fatalf("head %d hop %d (%v): %v", i, hop, c.Kind(), err)
			}
			var got codec.Head
			if _, err := c.Decode(pkt, &got); err != nil {
				t.Fatalf("head %d hop %d (%v): decode: %v", i, hop, c.Kind(), err)
			}
			want := orig
			want.PacketLength, want.HeadLength, want.HeadKind = got.PacketLength, got.HeadLength, c.Kind()
			if !got.Equal(&want) {
				t.Fatalf("head %d hop %d (%v):\n got %+v\nwant %+v", i, hop, c.Kind(), got, want)
			}
			cur = got
		}
		if ok {
			done++
		}
	}
	if done < 2700 {
		t.Fatalf("only %d of 3000 heads fit every encoding", done)
	}
}

func TestDetect(t *testing.T) {
	h := typicalHead()
	for _, c := range allCodecs {
		pkt, err := codectest.Packet(c, &h, 10)
		if err != nil {
			t.Fatal(err)
		}
		got, err := codec.Detect(pkt)
		if err != nil || got.Kind() != c.Kind() {
			t.Errorf("%v: Detect = %v, %v", c.Kind(), got, err)
		}
		for _, other := range allCodecs {
			if other.Kind() != c.Kind() && other.Detect(pkt) {
				t.Errorf("%v head detected as %v", c.Kind(), other.Kind())
			}
		}
	}
	if _, err := codec.Detect([]byte("GET / HTTP/1.1\r\n")); !errors.Is(err, codec.ErrPrefix) {
		t.Errorf("Detect(http) = %v", err)
	}
	for _, k := range []codec.HeadKind{codec.HeadKindRaet, codec.HeadKindJSON, codec.HeadKindBinary} {
		if c, err := codec.Lookup(k); err != nil || c.Kind() != k {
			t.Errorf("Lookup(%v) = %v, %v", k, c, err)
		}
	}
	if _, err := codec.Lookup(codec.HeadKindUnknown); err == nil {
		t.Error("Lookup(unknown) succeeded")
	}
}

// The binary head of a typical signed and coated message must be at most 30%
// of the native one.
func TestBinarySize(t *testing.T) {
	h := typicalHead()
	nat, err := native.Codec{}.Append(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := binary.Codec{}.Append(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	ratio := float64(len(bin)) / float64(len(nat))
	t.Logf("typical message head: native %d B, binary %d B (%.0f%%)", len(nat), len(bin), 100*ratio)
	if ratio > 0.30 {
		t.Fatalf("binary head is %.0f%% of native", 100*ratio)
	}
}

func TestBinaryDecodeDoesNotAllocate(t *testing.T) {
	h := typicalHead()
	pkt, err := codectest.Packet(binary.Codec{}, &h, 85+64)
	if err != nil {
		t.Fatal(err)
	}
	var got codec.Head
	c := binary.Codec{}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := c.Decode(pkt, &got); err != nil {
			t.Fatal(err)
		}
	})
	buf := make([]byte, 0, 64)
	allocs += testing.AllocsPerRun(100, func() {
		if _, err := c.Append(buf[:0], &got); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("binary encode+decode allocates %v times", allocs)
	}
}

type badCase struct {
	name  string
	in    string
	field string
	at    string // the error's offset is where this substring starts in in; "$" for len(in); "" to use off
	want  error
	off   int
}

// fixLengths fills the placeholders "pl ????"/"hl ??" of a native head, or
// "\"pl\":\"???????\""/"\"hl\":\"??\"" of a JSON head, with the true lengths.
func fixLengths(s string) string {
	end := strings.Index(s, "\n\n") + 2
	if strings.HasPrefix(s, "{") {
		end = strings.Index(s, "\r\n\r\n") + 4
		s = strings.Replace(s, `"hl":"??"`, fmt.Sprintf(`"hl":"%02x"`, end), 1)
		return strings.Replace(s, `"pl":"???????"`, fmt.Sprintf(`"pl":"%07x"`, len(s)), 1)
	}
	s = strings.Replace(s, "hl ??", fmt.Sprintf("hl %02x", end), 1)
	return strings.Replace(s, "pl ????", fmt.Sprintf("pl %04x", len(s)), 1)
}

// sub replaces the first match of the regular expression re in s.
func sub(s, re, repl string) string {
	loc := regexp.MustCompile(re).FindStringIndex(s)
	return s[:loc[0]] + repl + s[loc[1]:]
}

// Every malformed head gets a *codec.Error naming the reason, the field and
// the byte offset.
func checkBad(t *testing.T, c codec.Codec, cases []badCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			offset := tc.off
			switch tc.at {
			case "":
			case "$":
				offset = len(tc.in)
			default:
				offset = strings.Index(tc.in, tc.at)
				if offset < 0 {
					t.Fatalf("bad test: %q not in input", tc.at)
				}
			}
			var h codec.Head
			_, err := c.Decode([]byte(tc.in), &h)
			var ce *codec.Error
			if !errors.As(err, &ce) {
				t.Fatalf("got %v, want a *codec.Error", err)
			}
			if !errors.Is(err, tc.want) || ce.Field != tc.field || ce.Offset != offset || ce.Kind != c.Kind() {
				t.Fatalf("got %v (field %q offset %d kind %v), want %v field %q offset %d", err, ce.Field, ce.Offset, ce.Kind, tc.want, tc.field, offset)
			}
			if !strings.Contains(err.Error(), tc.want.Error()) {
				t.Errorf("message %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestNativeBadInput(t *testing.T) {
	n := func(lines string) string { return fixLengths("ri RAET\npl ????\nhl ??\nfg 00\n" + lines + "\n") }
	if _, err := (native.Codec{}).Decode([]byte(n("se 1\nbk 2\n")), new(codec.Head)); err != nil {
		t.Fatalf("the valid base head fails: %v", err)
	}
	long := "ri RAET\npl 0000\nhl 00\nfg 00\n" + strings.Repeat("se 1\n", 60) + "\n"
	wrongHL := strings.Replace(n("bk 2\n"), "hl 22", "hl 21", 1)
	wrongPL := n("bk 2\n") + "x"
	checkBad(t, native.Codec{}, []badCase{
		{"not raet", "GET / HTTP/1.1\r\n\r\n", "ri", "", codec.ErrPrefix, 0},
		{"truncated prefix", "ri RA", "", "$", codec.ErrShort, 0},
		{"no terminator", "ri RAET\npl 0022\nhl 22\nfg 00\nbk 2\n", "", "$", codec.ErrShort, 0},
		{"no terminator within 255 bytes", long, "", long[255:], codec.ErrTooLong, 0},
		{"no space", n("bk2\n"), "", "bk2", codec.ErrSyntax, 0},
		{"two spaces", n("bk 2 \n"), "", " \n\n", codec.ErrSyntax, 0},
		{"unknown key", n("zz 2\n"), "", "zz", codec.ErrUnknownKey, 0},
		{"bl crashes the reference", n("bl 2\n"), "bl", "bl", codec.ErrUnknownKey, 0},
		{"cl crashes the reference", n("cl 2\n"), "cl", "cl", codec.ErrUnknownKey, 0},
		{"duplicate key", n("bk 2\nbk 3\n"), "bk", "bk 3", codec.ErrDuplicateKey, 0},
		{"non-hex", n("se 1x\n"), "se", "x", codec.ErrValue, 0},
		{"hex overflow", n("bk 100\n"), "bk", "0\n\n", codec.ErrValue, 0},
		{"uid overflow", n("se 100000000\n"), "se", "0\n\n", codec.ErrValue, 0},
		{"empty value", n("se \n"), "se", "\n\n", codec.ErrValue, 0},
		{"wrong hl", wrongHL, "hl", "21", codec.ErrHeadLength, 0},
		{"wrong pl", wrongPL, "pl", "00", codec.ErrPacketLength, 0},
		{"missing hl", "ri RAET\npl 001b\nfg 00\nbk 2\n\n", "hl", "$", codec.ErrMissing, 0},
		{"vn 1", n("vn 1\n"), "vn", "1\n\n", codec.ErrUnsupported, 0},
		{"hk 1 in a native head", n("hk 1\n"), "hk", "1\n\n", codec.ErrHeadKind, 0},
		{"non-ASCII", n("se \xc3\xa9\n"), "", "\xc3", codec.ErrNonASCII, 0},
		{"ri twice", n("ri XXXX\n"), "ri", "XXXX", codec.ErrValue, 0},
	})
}

func TestJSONBadInput(t *testing.T) {
	j := func(rest string) string {
		return fixLengths(`{"ri":"RAET","pl":"???????","hl":"??","fg":"00",` + rest + "}\r\n\r\n")
	}
	if _, err := (json.Codec{}).Decode([]byte(j(`"hk":1,"bk":1`)), new(codec.Head)); err != nil {
		t.Fatalf("the valid base head fails: %v", err)
	}
	unterminated := `{"ri":"RAET","pl":"0000034","hl":"34","fg":"00","hk":1,"bk":1`
	long := unterminated + `,"` + strings.Repeat("a", 300)
	checkBad(t, json.Codec{}, []badCase{
		{"not raet", `{"ri": "RAET"}`, "ri", "", codec.ErrPrefix, 0},
		{"no terminator", unterminated + "}", "", "$", codec.ErrShort, 0},
		{"one CRLF", unterminated + "}\r\nxx", "", "\r\nxx", codec.ErrSyntax, 0},
		{"white space", j(` "hk":1`), "", ` "hk"`, codec.ErrSyntax, 0},
		{"wrong key order", j(`"hk":1,"bk":1,"se":1`), "se", `"se"`, codec.ErrOrder, 0},
		{"pl as a number", sub(j(`"hk":1`), `"pl":"[0-9a-f]+"`, `"pl":45`), "pl", "45", codec.ErrType, 0},
		{"se as a string", j(`"hk":1,"se":"1"`), "se", `"1"`, codec.ErrType, 0},
		{"se as a float", j(`"hk":1,"se":1.0`), "se", `1.0`, codec.ErrType, 0},
		{"negative", j(`"hk":1,"se":-1`), "se", `-1`, codec.ErrType, 0},
		{"overflow", j(`"hk":1,"se":99999999999`), "se", `99}`, codec.ErrValue, 0},
		{"unknown key", j(`"hk":1,"zz":1`), "", `"zz"`, codec.ErrUnknownKey, 0},
		{"bl", j(`"hk":1,"bl":1`), "bl", `"bl"`, codec.ErrUnknownKey, 0},
		{"duplicate", j(`"hk":1,"hk":1`), "hk", `"hk":1}`, codec.ErrDuplicateKey, 0},
		{"missing hk", j(`"bk":1`), "hk", "$", codec.ErrMissing, 0},
		{"hk 0", j(`"hk":0`), "hk", "0}", codec.ErrHeadKind, 0},
		{"vn 1", j(`"vn":1,"hk":1`), "vn", `1,"hk"`, codec.ErrUnsupported, 0},
		{"wrong hl", sub(j(`"hk":1`), `"hl":"[0-9a-f]+"`, `"hl":"2c"`), "hl", `"2c"`, codec.ErrHeadLength, 0},
		{"wrong pl", j(`"hk":1`) + "x", "pl", `"00000`, codec.ErrPacketLength, 0},
		{"non-hex pl", sub(j(`"hk":1`), `"pl":"[0-9a-f]+"`, `"pl":"00000z2"`), "pl", `z`, codec.ErrValue, 0},
		{"non-ASCII key", j("\"hk\":1,\"\xc3\xa9\":1"), "", "\xc3", codec.ErrNonASCII, 0},
		{"unterminated and too long", long, "", "", codec.ErrTooLong, 255},
	})
}

func TestBinaryBadInput(t *testing.T) {
	h := typicalHead()
	good, err := codectest.Packet(binary.Codec{}, &h, 4)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(b []byte) []byte) string {
		return string(f(bytes.Clone(good)))
	}
	checkBad(t, binary.Codec{}, []badCase{
		{"empty", "", "", "", codec.ErrShort, 0},
		{"text head", "ri RAET\n", "", "", codec.ErrPrefix, 0},
		{"short fixed part", string(good[:5]), "", "", codec.ErrShort, 5},
		{"format version 2", mod(func(b []byte) []byte { b[1] = 2; return b }), "", "", codec.ErrUnsupported, 1},
		{"hl past the datagram", mod(func(b []byte) []byte { b[4] = 200; return b }), "hl", "", codec.ErrShort, 4},
		{"hl under the fixed part", mod(func(b []byte) []byte { b[4] = 3; return b }), "hl", "", codec.ErrHeadLength, 4},
		{"wrong pl", mod(func(b []byte) []byte { b[3]++; return b }), "pl", "", codec.ErrPacketLength, 2},
		{"field past hl", mod(func(b []byte) []byte { b[4]--; return b }), "fl", "", codec.ErrShort, 16},
		{"varint overflow", "\xd2\x01\x00\x12\x12\x00\x04\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "se", "", codec.ErrValue, 8},
		{"uid over 32 bits", "\xd2\x01\x00\x0d\x0d\x00\x04\x00\x80\x80\x80\x80\x10", "se", "", codec.ErrValue, 8},
		{"vn 1", "\xd2\x01\x00\x09\x09\x00\x01\x00\x01", "vn", "", codec.ErrUnsupported, 8},
	})
}
