//go:build unix

package lane

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/internal/testutil"
)

// mkPage builds a page from alpha to beta with the given fields.
func mkPage(t testing.TB, pk codec.PackKind, si string, bi uint32, pn, pc uint16, body string) []byte {
	t.Helper()
	h := codeclane.Head{PackKind: pk, Source: "alpha", Destination: "beta", SessionID: si, BookID: bi, PageNumber: pn, PageCount: pc}
	p, err := codeclane.Append(nil, &h)
	if err != nil {
		t.Fatal(err)
	}
	return append(p, body...)
}

func sendRaw(t testing.TB, c *net.UnixConn, to string, pages ...[]byte) {
	t.Helper()
	for _, p := range pages {
		if _, err := c.WriteToUnix(p, &net.UnixAddr{Name: to, Net: "unixgram"}); err != nil {
			t.Fatal(err)
		}
	}
}

// Every drop reason, through a real socket: the page is dropped and
// counted, nothing is delivered, and the stack goes on working.
func TestDrops(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	beta := newStack(t, dir, "beta", nil)
	alpha := rawYard(t, dir, "alpha")
	gamma := rawYard(t, dir, "gamma") // sends with sn alpha: not its name
	unnamed, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: beta.Path(), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer unnamed.Close()

	okPage := func(bi uint32) []byte { return mkPage(t, 0, sidA, bi, 0, 1, fmt.Sprintf(`{"ok":%d}`, bi)) }
	cases := []struct {
		name     string
		reason   DropReason
		n        uint64 // drops expected
		from     *net.UnixConn
		pages    [][]byte
		messages int // delivered before the check message
	}{
		{"garbage", DropBadHead, 1, alpha, [][]byte{[]byte("hello")}, 0},
		{"no blank line", DropBadHead, 1, alpha, [][]byte{[]byte("ri RAET\nvn 0\n")}, 0},
		{"version 1", DropBadHead, 1, alpha, [][]byte{[]byte(strings.Replace(string(okPage(9)), "vn 0", "vn 1", 1))}, 0},
		{"missing field", DropBadHead, 1, alpha, [][]byte{[]byte(strings.Replace(string(okPage(9)), "\npc 0001", "", 1))}, 0},
		{"unknown field", DropBadHead, 1, alpha, [][]byte{[]byte(strings.Replace(string(okPage(9)), "pc 0001", "pc 0001\nxx 1", 1))}, 0},
		{"short si", DropBadHead, 1, alpha, [][]byte{[]byte(strings.Replace(string(okPage(9)), sidA, "abc", 1))}, 0},
		{"pack kind", DropPackKind, 1, alpha, [][]byte{mkPage(t, 7, sidA, 9, 0, 1, `{}`)}, 0},
		{"oversize", DropOversize, 1, alpha, [][]byte{append(mkPage(t, 0, sidA, 9, 0, 1, ""), make([]byte, MaxPageSize)...)}, 0},
		{"pn = pc", DropPageNumber, 1, alpha, [][]byte{mkPage(t, 0, sidA, 9, 1, 1, `{}`)}, 0},
		{"pc 0", DropPageNumber, 1, alpha, [][]byte{mkPage(t, 0, sidA, 9, 0, 0, `{}`)}, 0},
		{"missed page", DropMissedPage, 1, alpha, [][]byte{mkPage(t, 0, sidA, 50, 1, 2, `1}`)}, 0},
		{"bad page", DropBadPage, 3, alpha, [][]byte{
			mkPage(t, 0, sidA, 60, 0, 2, `{"a":`),
			mkPage(t, 0, sidA, 60, 0, 2, `{"a":`), // duplicate
			mkPage(t, 0, sidA, 60, 1, 3, `1}`),    // other page count
			mkPage(t, 1, sidA, 60, 1, 2, `1}`),    // other pack kind
			mkPage(t, 0, sidA, 60, 1, 2, `1}`),    // completes the book
		}, 1},
		{"bad json", DropBadBody, 1, alpha, [][]byte{mkPage(t, 0, sidA, 9, 0, 1, `{"a":`)}, 0},
		{"bad utf-8", DropBadBody, 1, alpha, [][]byte{mkPage(t, 0, sidA, 9, 0, 1, "{\"a\":\"\xff\"}")}, 0},
		{"bad msgpack", DropBadBody, 1, alpha, [][]byte{mkPage(t, 1, sidA, 9, 0, 1, "\x81\xa1")}, 0},
		{"json array", DropNotMapping, 1, alpha, [][]byte{mkPage(t, 0, sidA, 9, 0, 1, `[1,2]`)}, 0},
		{"json string", DropNotMapping, 1, alpha, [][]byte{mkPage(t, 0, sidA, 9, 0, 1, `"x"`)}, 0},
		{"msgpack array", DropNotMapping, 1, alpha, [][]byte{mkPage(t, 1, sidA, 9, 0, 1, "\x93\x01\x02\x03")}, 0},
		{"cbor array", DropNotMapping, 1, alpha, [][]byte{mkPage(t, 2, sidA, 9, 0, 1, "\x83\x01\x02\x03")}, 0},
		{"paged array", DropNotMapping, 1, alpha, [][]byte{mkPage(t, 0, sidA, 61, 0, 2, `[1,`), mkPage(t, 0, sidA, 61, 1, 2, `2]`)}, 0},
		{"other address", DropBadSource, 1, gamma, [][]byte{okPage(9)}, 0},
		{"unnamed socket", DropBadSource, 1, nil, [][]byte{okPage(9)}, 0},
		{"stale book", DropStaleBook, 1, alpha, [][]byte{
			mkPage(t, 0, sidA, 70, 0, 2, `{"a":`),
			mkPage(t, 0, sidB, 1, 0, 1, `{"new":"session"}`),
		}, 1},
	}
	check := uint32(1000)
	for _, tc := range cases {
		before := beta.Counters()
		for _, p := range tc.pages {
			if tc.from == nil {
				if _, err := unnamed.Write(p); err != nil {
					t.Fatal(err)
				}
			} else {
				sendRaw(t, tc.from, beta.Path(), p)
			}
		}
		for range tc.messages {
			receive(t, beta)
		}
		check++
		sendRaw(t, alpha, beta.Path(), okPage(check))
		if m := receive(t, beta); m.Body["ok"] != int64(check) {
			t.Fatalf("%s: got %+v, want the check message", tc.name, m)
		}
		after := beta.Counters()
		if got := after.Drops[tc.reason] - before.Drops[tc.reason]; got != tc.n {
			t.Errorf("%s: %d drops for %v, want %d (drops %v)", tc.name, got, tc.reason, tc.n, after.Drops)
		}
		if got := after.Dropped() - before.Dropped(); got != tc.n {
			t.Errorf("%s: %d drops in all, want %d", tc.name, got, tc.n)
		}
	}
}

// The limits of a stack: known yards, message size, unfinished books in
// number and bytes, and time.
func TestDropLimits(t *testing.T) {
	testutil.CheckLeaks(t)
	t.Run("yard limit", func(t *testing.T) {
		dir := testutil.ShortTempDir(t, "rl")
		beta := newStack(t, dir, "beta", func(c *Config) { c.MaxYards = 2 })
		alpha, gamma, delta := rawYard(t, dir, "alpha"), rawYard(t, dir, "gamma"), rawYard(t, dir, "delta")
		from := func(c *net.UnixConn, name string) {
			p := mkPage(t, 0, sidA, 1, 0, 1, `{"from":"`+name+`"}`)
			sendRaw(t, c, beta.Path(), []byte(strings.Replace(string(p), "sn alpha", "sn "+name, 1)))
			if m := receive(t, beta); m.From != name {
				t.Fatalf("got %+v from %s", m, name)
			}
		}
		from(alpha, "alpha")
		from(gamma, "gamma")
		from(alpha, "alpha") // gamma is now the least recently used
		from(delta, "delta")
		if c := beta.Counters(); c.YardsEvicted != 1 || c.YardsAdded != 3 || c.Dropped() != 0 {
			t.Fatalf("counters %+v", c)
		}
		if got := strings.Join(slices.Sorted(slices.Values(beta.Yards())), ","); got != "alpha,delta" {
			t.Fatalf("yards %s", got)
		}
	})
	t.Run("too large", func(t *testing.T) {
		dir := testutil.ShortTempDir(t, "rl")
		beta := newStack(t, dir, "beta", func(c *Config) { c.MaxMessageSize = 20 })
		alpha := rawYard(t, dir, "alpha")
		sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, 1, 0, 1, `{"a":"0123456789012345"}`))
		sendRaw(t, alpha, beta.Path(),
			mkPage(t, 0, sidA, 2, 0, 3, `{"a":"012345`),
			mkPage(t, 0, sidA, 2, 1, 3, `0123456789`),
			mkPage(t, 0, sidA, 2, 2, 3, `"}`)) // the book is gone: a missed page
		waitCounters(t, beta, func(c Counters) bool {
			return c.Drops[DropTooLarge] == 2 && c.Drops[DropMissedPage] == 1
		})
	})
	t.Run("book count", func(t *testing.T) {
		dir := testutil.ShortTempDir(t, "rl")
		beta := newStack(t, dir, "beta", func(c *Config) { c.MaxBooks = 2 })
		alpha := rawYard(t, dir, "alpha")
		for bi := range uint32(3) {
			sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, bi+1, 0, 2, `{"a":`))
		}
		// Book 1 was dropped for book 3; books 2 and 3 finish.
		sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, 1, 1, 2, `1}`),
			mkPage(t, 0, sidA, 2, 1, 2, `2}`), mkPage(t, 0, sidA, 3, 1, 2, `3}`))
		for _, want := range []int64{2, 3} {
			if m := receive(t, beta); m.Body["a"] != want {
				t.Fatalf("got %+v, want a=%d", m, want)
			}
		}
		waitCounters(t, beta, func(c Counters) bool {
			return c.Drops[DropBookLimit] == 1 && c.Drops[DropMissedPage] == 1
		})
	})
	t.Run("book bytes", func(t *testing.T) {
		dir := testutil.ShortTempDir(t, "rl")
		beta := newStack(t, dir, "beta", func(c *Config) { c.MaxBookBytes = 200 })
		alpha := rawYard(t, dir, "alpha")
		big := `{"a":"` + strings.Repeat("x", 60)
		sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, 1, 0, 2, big)) // 2*24+66 bytes
		sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, 2, 0, 2, big)) // 228 > 200: book 1 goes
		sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, 2, 1, 2, `"}`))
		if m := receive(t, beta); len(m.Raw) != len(big)+2 {
			t.Fatalf("got %+v", m)
		}
		sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, 3, 0, 9, strings.Repeat("y", 200))) // alone too big
		waitCounters(t, beta, func(c Counters) bool { return c.Drops[DropBookLimit] == 2 })
	})
	t.Run("expired", func(t *testing.T) {
		dir := testutil.ShortTempDir(t, "rl")
		beta := newStack(t, dir, "beta", func(c *Config) { c.BookTimeout = 50 * time.Millisecond })
		alpha := rawYard(t, dir, "alpha")
		sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, 1, 0, 2, `{"a":`))
		// No further traffic: the reader wakes up by itself to expire it.
		waitCounters(t, beta, func(c Counters) bool { return c.Drops[DropExpired] == 1 })
		sendRaw(t, alpha, beta.Path(), mkPage(t, 0, sidA, 1, 1, 2, `1}`))
		waitCounters(t, beta, func(c Counters) bool { return c.Drops[DropMissedPage] == 1 })
		noMessage(t, beta)
	})
}

// A page addressed to another yard name is accepted, as by the reference,
// and counted.
func TestMisaddressed(t *testing.T) {
	testutil.CheckLeaks(t)
	dir := testutil.ShortTempDir(t, "rl")
	beta := newStack(t, dir, "beta", nil)
	alpha := rawYard(t, dir, "alpha")
	p := strings.Replace(string(mkPage(t, 0, sidA, 1, 0, 1, `{"x":1}`)), "dn beta", "dn zeta", 1)
	sendRaw(t, alpha, beta.Path(), []byte(p))
	if m := receive(t, beta); m.Body["x"] != int64(1) {
		t.Fatalf("got %+v", m)
	}
	if c := beta.Counters(); c.Misaddressed != 1 {
		t.Fatalf("counters %+v", c)
	}
}

func TestDropReasonString(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range DropReasons() {
		s := r.String()
		if s == "" || strings.HasPrefix(s, "DropReason(") || seen[s] {
			t.Errorf("reason %d: %q", r, s)
		}
		seen[s] = true
	}
	if got := DropReason(200).String(); got != "DropReason(200)" {
		t.Errorf("got %q", got)
	}
}
