package lane

import (
	"bytes"
	"encoding/binary"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/packet"
)

// The page of §11 of raet-protocol.md, captured from the reference.
const referencePage = "ri RAET\nvn 0\npk 0\nsn alpha\ndn beta\nsi 661752e96abf6110ed\nbi 1\npn 0000\npc 0001\n\n" +
	`{"subject":"lane hello","n":1}`

const (
	sidA = "aaaaaaaaaaaaaaaaaa"
	sidB = "bbbbbbbbbbbbbbbbbb"
)

// testInbound returns an inbound with small limits, a clock the test
// moves, and a source that accepts any yard.
func testInbound(maxBooks, maxBookBytes, maxMessage int) (*inbound, *counters, *time.Time) {
	ctr := new(counters)
	now := time.Unix(1_700_000_000, 0)
	yards := map[string]*yard{}
	src := func(sn, addr string) (*yard, DropReason, bool) {
		y := yards[sn]
		if y == nil {
			if len(yards) >= 8 {
				return nil, DropBadSource, false
			}
			y = &yard{name: sn}
			yards[sn] = y
		}
		return y, 0, true
	}
	cfg := Config{Name: "beta", MaxBooks: maxBooks, MaxBookBytes: maxBookBytes, MaxMessageSize: maxMessage,
		BookTimeout: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	in := newInbound(&cfg, src, ctr)
	in.now = func() time.Time { return now }
	return in, ctr, &now
}

// checkShelf checks the invariants of the unfinished books.
func checkShelf(t *testing.T, in *inbound) {
	t.Helper()
	if len(in.books) > in.maxBooks || in.bytes > in.maxBookBytes || in.order.Len() != len(in.books) {
		t.Fatalf("shelf: %d books (max %d), %d bytes (max %d), list %d",
			len(in.books), in.maxBooks, in.bytes, in.maxBookBytes, in.order.Len())
	}
	sum := 0
	for e := in.order.Front(); e != nil; e = e.Next() {
		bk := e.Value.(*book)
		if in.books[bk.key] != bk || bk.got >= len(bk.sections) {
			t.Fatalf("book %+v out of place", bk.key)
		}
		sum += bk.cost
	}
	if sum != in.bytes {
		t.Fatalf("bytes %d, books cost %d", in.bytes, sum)
	}
}

// encodeDatagrams frames datagrams for FuzzInbound: a 2-byte length then
// the bytes, each.
func encodeDatagrams(ds ...[]byte) []byte {
	var out []byte
	for _, d := range ds {
		out = binary.BigEndian.AppendUint16(out, uint16(len(d)))
		out = append(out, d...)
	}
	return out
}

func testBook(t testing.TB, pk codec.PackKind, si string, bi uint32, body []byte, maxPage int) [][]byte {
	h := codeclane.Head{PackKind: pk, Source: "alpha", Destination: "beta", SessionID: si, BookID: bi}
	pages, err := appendBook(nil, &h, body, maxPage)
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// FuzzInbound feeds a sequence of datagrams (framed as encodeDatagrams
// does) to the receiver with small limits: it must never panic, keep its
// limits, and deliver only mappings. Seeds come from the encoder.
func FuzzInbound(f *testing.F) {
	f.Add(encodeDatagrams([]byte(referencePage)))
	body := []byte(`{"subject":"lane hello","n":1,"list":[1,2.5,"x",null,true],"m":{"k":"v"}}`)
	f.Add(encodeDatagrams(testBook(f, 0, sidA, 1, body, 110)...))
	mp, _ := packet.MsgpackBody{}.Marshal(nil, map[string]any{"a": []any{1, "b"}})
	f.Add(encodeDatagrams(append(testBook(f, 1, sidA, 2, mp, 100), testBook(f, 0, sidB, 1, body, 120)...)...))
	cb, _ := packet.CBORBody{}.Marshal(nil, map[string]any{"a": 1})
	f.Add(encodeDatagrams(testBook(f, 2, sidA, 3, cb, 200)...))
	pages := testBook(f, 0, sidA, 4, body, 105)
	f.Add(encodeDatagrams(pages[0], pages[2], pages[1], pages[1]))
	// Plugin kinds: zstdjson (5) over two pages, then an undeclared one.
	f.Add(encodeDatagrams(append(testBook(f, codec.PackKindZstdJSON, sidA, 5, []byte("\x28\xb5\x2f\xfd"+strings.Repeat("z", 150)), 120),
		testBook(f, 200, sidA, 6, body, 300)...)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, ctr, now := testInbound(4, 4096, 2048)
		for len(data) > 0 {
			var d []byte
			if len(data) >= 2 {
				n := int(binary.BigEndian.Uint16(data))
				data = data[2:]
				n = min(n, len(data))
				d, data = data[:n], data[n:]
			} else {
				d, data = data, nil
			}
			*now = now.Add(time.Millisecond)
			m, ok := in.page(d, "/d/lane.alpha.uxd")
			// A body of a plugin's kind comes out undecoded (Body nil),
			// for the stack's decoder goroutine.
			if ok && ((m.Body == nil) != pluginKind(uint8(m.Kind)) || m.From == "") {
				t.Fatalf("bad message %+v", m)
			}
			checkShelf(t, in)
		}
		c := ctr.snapshot()
		if c.PagesIn < c.MessagesIn {
			t.Fatalf("counters %+v", c)
		}
	})
}

// FuzzBook paginates a body with a fuzzed page size and feeds the pages
// with page 0 first and the rest in a fuzzed order: the receiver must give
// back the body exactly when packet accepts it, or drop it.
func FuzzBook(f *testing.F) {
	f.Add([]byte(`{"subject":"lane hello","n":1}`), uint16(100), uint64(1))
	f.Add([]byte(`{"a":"`+strings.Repeat("x", 500)+`"}`), uint16(90), uint64(7))
	f.Add([]byte(`[1,2,3]`), uint16(90), uint64(3))
	f.Add([]byte(``), uint16(0), uint64(0))
	f.Fuzz(func(t *testing.T, body []byte, maxPage uint16, seed uint64) {
		in, ctr, _ := testInbound(4, 1<<20, 1<<20)
		h := codeclane.Head{Source: "alpha", Destination: "beta", SessionID: sidA, BookID: 9}
		head, _ := codeclane.Append(nil, &h)
		mp := max(int(maxPage), len(head)+pageSlack+1)
		pages, err := appendBook(nil, &h, body, mp)
		if err != nil {
			return // too many pages for the page size
		}
		for _, p := range pages {
			if len(p) > mp {
				t.Fatalf("page of %d bytes, max %d", len(p), mp)
			}
		}
		rest := pages[1:]
		rand.New(rand.NewPCG(seed, 0)).Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
		var got []Message
		for _, p := range append(pages[:1], rest...) {
			if m, ok := in.page(p, "/d/lane.alpha.uxd"); ok {
				got = append(got, m)
			}
		}
		var want map[string]any
		perr := packet.JSONBody{}.Unmarshal(body, &want)
		switch {
		case perr != nil && len(got) != 0:
			t.Fatalf("packet refuses the body (%v) but it was delivered", perr)
		case perr != nil && ctr.snapshot().Dropped() != 1:
			t.Fatalf("refused body not counted: %+v", ctr.snapshot())
		case perr == nil && len(got) != 1:
			t.Fatalf("%d messages, want 1 (drops %v)", len(got), ctr.snapshot().Drops)
		case perr == nil && (!bytes.Equal(got[0].Raw, body) || !reflect.DeepEqual(got[0].Body, want)):
			t.Fatalf("got %q %#v, want %q %#v", got[0].Raw, got[0].Body, body, want)
		}
		if len(in.books) != 0 {
			t.Fatal("a book is left")
		}
	})
}

// Book expiry with the test clock, and a new session dropping the old
// session's books, without sockets.
func TestInboundExpiryAndSessions(t *testing.T) {
	in, ctr, now := testInbound(8, 1<<20, 1<<20)
	body := []byte(`{"a":"` + strings.Repeat("x", 300) + `"}`)
	p1 := testBook(t, 0, sidA, 1, body, 150)
	p2 := testBook(t, 0, sidA, 2, body, 150)
	from := "/d/lane.alpha.uxd"
	in.page(p1[0], from)
	*now = now.Add(3 * time.Millisecond)
	in.page(p2[0], from)
	if got := in.nextExpiry(); !got.Equal(now.Add(2 * time.Millisecond)) {
		t.Fatalf("next expiry %v", got)
	}
	*now = now.Add(3 * time.Millisecond) // book 1 is 6 ms old, book 2 3 ms
	for _, p := range p2[1:] {
		in.page(p, from)
	}
	if ctr.drops[DropExpired].Load() != 1 || ctr.messagesIn.Load() != 1 {
		t.Fatalf("drops %v messages %d", ctr.snapshot().Drops, ctr.messagesIn.Load())
	}
	// A new session of alpha drops its unfinished books of the old one.
	in.page(p1[0], from)
	p3 := testBook(t, 0, sidB, 1, body, 150)
	in.page(p3[0], from)
	if ctr.drops[DropStaleBook].Load() != 1 || len(in.books) != 1 {
		t.Fatalf("drops %v books %d", ctr.snapshot().Drops, len(in.books))
	}
	checkShelf(t, in)
}

func TestPaginate(t *testing.T) {
	for _, tc := range []struct{ head, body, max, section, count int }{
		{79, 100, 65535, 100, 1},
		{79, 65535 - 79, 65535, 65535 - 79, 1},
		{79, 65535 - 78, 65535, 65535 - 81, 2},
		{79, 150_000, 65535, 65454, 3},
	} {
		s, n, err := paginate(tc.head, tc.body, tc.max)
		if err != nil || s != tc.section || n != tc.count {
			t.Errorf("paginate(%d, %d, %d) = %d, %d, %v; want %d, %d", tc.head, tc.body, tc.max, s, n, err, tc.section, tc.count)
		}
	}
	if _, _, err := paginate(79, 70_000_000_000, 65535); err == nil {
		t.Error("paginate of a body needing more than 65535 pages")
	}
	if _, _, err := paginate(65534, 100, 65535); err == nil {
		t.Error("paginate with no room for a section")
	}
}
