package lane

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/raet-go/raet/codec"
	codeclane "github.com/raet-go/raet/codec/lane"
	"github.com/raet-go/raet/packet"
)

// bookKey identifies a book as the reference does: (dn, sn, si, bi).
type bookKey struct {
	dn, sn, si string
	bi         uint32
}

// book is a message being reassembled from its pages.
type book struct {
	key      bookKey
	pk       codec.PackKind
	sections [][]byte // by page number; nil until received
	got      int      // pages received
	size     int      // body bytes received
	cost     int      // what the book counts against MaxBookBytes
	expires  time.Time
	elem     *list.Element
}

// sectionOverhead is what a book counts per expected page (its slot in
// sections), so that a first page announcing 65535 pages is not free.
const sectionOverhead = 24

// sourceFunc finds (or makes) the record of the yard that sent a page
// with source name sn from the socket address addr.
type sourceFunc func(sn, addr string) (*yard, DropReason, bool)

// inbound turns datagrams into messages: it parses page heads, checks
// them, keeps the unfinished books within their limits and decodes bodies.
// It does no I/O and is owned by one goroutine (the stack's reader).
type inbound struct {
	local        string // our yard name
	maxMessage   int
	maxBooks     int
	maxBookBytes int
	timeout      time.Duration
	now          func() time.Time
	source       sourceFunc
	ctr          *counters
	log          *slog.Logger

	books map[bookKey]*book
	order list.List // unfinished books, oldest first
	bytes int       // sum of the books' cost
	head  codeclane.Head
}

func newInbound(c *Config, source sourceFunc, ctr *counters) *inbound {
	return &inbound{
		local:        c.Name,
		maxMessage:   c.MaxMessageSize,
		maxBooks:     c.MaxBooks,
		maxBookBytes: c.MaxBookBytes,
		timeout:      c.BookTimeout,
		now:          time.Now,
		source:       source,
		ctr:          ctr,
		log:          c.Logger,
		books:        make(map[bookKey]*book),
	}
}

// page handles one datagram b that came from the socket address from. It
// returns the message that b completes, if any; b is not retained.
func (in *inbound) page(b []byte, from string) (Message, bool) {
	in.ctr.pagesIn.Add(1)
	in.ctr.bytesIn.Add(uint64(len(b)))
	if len(b) > MaxPageSize {
		return in.dropPage(DropOversize, from, nil)
	}
	h := &in.head
	hl, err := codeclane.Decode(b, h)
	if err != nil {
		return in.dropPage(DropBadHead, from, err)
	}
	if h.Version != 0 {
		return in.dropPage(DropBadHead, from, nil)
	}
	if _, ok := BodyKindOf(h.PackKind); !ok {
		return in.dropPage(DropPackKind, from, nil)
	}
	if h.PageCount == 0 || h.PageNumber >= h.PageCount {
		return in.dropPage(DropPageNumber, from, nil)
	}
	y, why, ok := in.source(h.Source, from)
	if !ok {
		return in.dropPage(why, from, nil)
	}
	if h.Destination != in.local {
		in.ctr.misaddressed.Add(1) // accepted, as the reference does
	}
	if y.rsid != h.SessionID {
		if y.rsid != "" {
			in.dropStale(h.Source, h.SessionID)
		}
		y.rsid = h.SessionID
	}
	section := b[hl:]
	if h.PageCount == 1 {
		if len(section) > in.maxMessage {
			return in.dropPage(DropTooLarge, from, nil)
		}
		return in.message(h.Source, h.PackKind, bytes.Clone(section))
	}
	return in.addPage(h, section, from)
}

// addPage adds a page of a multi-page book.
func (in *inbound) addPage(h *codeclane.Head, section []byte, from string) (Message, bool) {
	now := in.now()
	in.expire(now)
	key := bookKey{dn: h.Destination, sn: h.Source, si: h.SessionID, bi: h.BookID}
	bk := in.books[key]
	if bk == nil {
		if h.PageNumber != 0 {
			return in.dropPage(DropMissedPage, from, nil)
		}
		for len(in.books) >= in.maxBooks {
			in.removeBook(in.order.Front().Value.(*book), DropBookLimit)
		}
		bk = &book{
			key:      key,
			pk:       h.PackKind,
			sections: make([][]byte, h.PageCount),
			cost:     int(h.PageCount) * sectionOverhead,
			expires:  now.Add(in.timeout),
		}
		bk.elem = in.order.PushBack(bk)
		in.books[key] = bk
		in.bytes += bk.cost
	} else if bk.pk != h.PackKind || len(bk.sections) != int(h.PageCount) || bk.sections[h.PageNumber] != nil {
		return in.dropPage(DropBadPage, from, nil)
	}
	if bk.size+len(section) > in.maxMessage {
		in.removeBook(bk, DropTooLarge)
		return Message{}, false
	}
	for in.bytes+len(section) > in.maxBookBytes {
		oldest := in.order.Front().Value.(*book)
		if oldest == bk {
			in.removeBook(bk, DropBookLimit)
			return Message{}, false
		}
		in.removeBook(oldest, DropBookLimit)
	}
	bk.sections[h.PageNumber] = append(make([]byte, 0, len(section)), section...)
	bk.got++
	bk.size += len(section)
	bk.cost += len(section)
	in.bytes += len(section)
	if bk.got < len(bk.sections) {
		return Message{}, false
	}
	in.unlink(bk)
	raw := make([]byte, 0, bk.size)
	for _, s := range bk.sections {
		raw = append(raw, s...)
	}
	return in.message(key.sn, bk.pk, raw)
}

// message decodes a whole body of a built-in kind. A body of a plugin's
// kind is returned with Body nil, for the stack's decoder goroutine, which
// counts it when it decodes it.
func (in *inbound) message(from string, pk codec.PackKind, raw []byte) (Message, bool) {
	var body map[string]any
	ser := serializer(pk)
	if ser == nil {
		return Message{From: from, Kind: pk, Raw: raw}, true
	}
	if err := ser.Unmarshal(raw, &body); err != nil {
		if errors.Is(err, packet.ErrNotMapping) {
			return in.dropPage(DropNotMapping, from, err)
		}
		return in.dropPage(DropBadBody, from, err)
	}
	if body == nil { // Body nil means "not decoded yet"
		body = map[string]any{}
	}
	in.ctr.messagesIn.Add(1)
	return Message{From: from, Kind: pk, Body: body, Raw: raw}, true
}

func (in *inbound) dropPage(r DropReason, from string, err error) (Message, bool) {
	in.ctr.drops[r].Add(1)
	if in.log.Enabled(context.Background(), slog.LevelDebug) {
		in.log.Debug("lane page dropped", "reason", r.String(), "from", from, "err", err)
	}
	return Message{}, false
}

// unlink removes bk from the shelf without counting a drop.
func (in *inbound) unlink(bk *book) {
	delete(in.books, bk.key)
	in.order.Remove(bk.elem)
	in.bytes -= bk.cost
}

// removeBook drops an unfinished book for reason r.
func (in *inbound) removeBook(bk *book, r DropReason) {
	in.unlink(bk)
	in.ctr.drops[r].Add(1)
	if in.log.Enabled(context.Background(), slog.LevelDebug) {
		in.log.Debug("lane book dropped", "reason", r.String(), "from", bk.key.sn,
			"si", bk.key.si, "bi", bk.key.bi, "pages", bk.got, "of", len(bk.sections))
	}
}

// dropStale drops the unfinished books of yard sn from sessions other
// than si (the reference's removeStaleBooks).
func (in *inbound) dropStale(sn, si string) {
	for e := in.order.Front(); e != nil; {
		next := e.Next()
		if bk := e.Value.(*book); bk.key.sn == sn && bk.key.si != si {
			in.removeBook(bk, DropStaleBook)
		}
		e = next
	}
}

// expire drops the books whose time is up at now.
func (in *inbound) expire(now time.Time) {
	for e := in.order.Front(); e != nil; e = in.order.Front() {
		bk := e.Value.(*book)
		if now.Before(bk.expires) {
			return
		}
		in.removeBook(bk, DropExpired)
	}
}

// nextExpiry returns when the oldest unfinished book expires, or the zero
// time when there is none.
func (in *inbound) nextExpiry() time.Time {
	if e := in.order.Front(); e != nil {
		return e.Value.(*book).expires
	}
	return time.Time{}
}
