package lane

import (
	"strconv"
	"sync/atomic"
)

// DropReason says why the receiver discarded a page or an unfinished book.
type DropReason uint8

// The reasons. Page reasons count pages; the book reasons (DropTooLarge,
// DropBookLimit, DropExpired, DropStaleBook) count books, each with the
// pages it had received.
const (
	// DropBadHead: the page head does not parse (see package codec/lane),
	// or its version is not 0.
	DropBadHead DropReason = iota
	// DropPackKind: the pack kind is not json (0), msgpack (1), cbor (2) or
	// a serializer plugin's kind (5..254); or, counted per message, it is
	// a plugin's kind and no serializer of it is found (Config.Serializer).
	DropPackKind
	// DropOversize: the datagram is larger than a page may be (65535 bytes).
	DropOversize
	// DropPageNumber: the page count is 0, or the page number is not below it.
	DropPageNumber
	// DropMissedPage: a later page of a book that has not started; a book
	// starts only with page 0.
	DropMissedPage
	// DropBadPage: a page that does not fit its book: another page count or
	// pack kind than the first page's, or a page number already received.
	DropBadPage
	// DropBadBody: the (reassembled) body does not parse, or the call
	// decoding a plugin's kind failed.
	DropBadBody
	// DropNotMapping: the body parses but is not a mapping.
	DropNotMapping
	// DropBadSource: the sender's socket address is unnamed or is not
	// <lane>.<sn>.uxd for the page's source name sn, or a known yard's page
	// came from another address.
	DropBadSource
	// DropTooLarge: a book grew beyond Config.MaxMessageSize.
	DropTooLarge
	// DropBookLimit: an unfinished book was dropped to keep within
	// Config.MaxBooks or Config.MaxBookBytes.
	DropBookLimit
	// DropExpired: an unfinished book was not finished within
	// Config.BookTimeout.
	DropExpired
	// DropStaleBook: an unfinished book of an old session; the sender
	// started a new one (a new si), as after a restart.
	DropStaleBook

	numDropReasons
)

var dropNames = [numDropReasons]string{
	"bad_head", "pack_kind", "oversize", "page_number", "missed_page",
	"bad_page", "bad_body", "not_mapping", "bad_source",
	"too_large", "book_limit", "expired", "stale_book",
}

// String returns the reason's name in snake case, as in logs.
func (r DropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "DropReason(" + strconv.Itoa(int(r)) + ")"
}

// DropReasons lists every DropReason, in order.
func DropReasons() []DropReason {
	rs := make([]DropReason, numDropReasons)
	for i := range rs {
		rs[i] = DropReason(i)
	}
	return rs
}

// Counters is a snapshot of a stack's counters (Stack.Counters).
type Counters struct {
	PagesIn     uint64 // datagrams read
	PagesOut    uint64 // pages written
	BytesIn     uint64 // bytes of PagesIn
	BytesOut    uint64 // bytes of PagesOut
	MessagesIn  uint64 // messages delivered
	MessagesOut uint64 // messages sent (every page written)
	// Retries counts the writes retried because the destination was busy
	// (EAGAIN, ENOBUFS).
	Retries uint64
	// SendErrors counts failed Sends.
	SendErrors uint64
	// Misaddressed counts pages whose destination name is not this yard's
	// name; like the reference, they are still accepted.
	Misaddressed uint64
	YardsAdded   uint64 // remote yards created (by Send or by a first page)
	YardsRemoved uint64 // remote yards removed because their socket vanished
	YardsEvicted uint64 // remote yards forgotten to keep within Config.MaxYards
	StaleRemoved uint64 // stale socket files removed by Start
	// DecodeBatches counts the calls decoding received bodies of a
	// plugin's kind in a batch (packet.BatchSerializer).
	DecodeBatches uint64
	// Resent counts the messages of an earlier run that Start sent from
	// Config.Queue.
	Resent uint64
	// Drops counts dropped pages and books by reason; index it with a
	// DropReason.
	Drops [numDropReasons]uint64
}

// Dropped returns the sum of Drops.
func (c Counters) Dropped() uint64 {
	var n uint64
	for _, d := range c.Drops {
		n += d
	}
	return n
}

// counters are the live counters, updated atomically.
type counters struct {
	pagesIn, pagesOut, bytesIn, bytesOut      atomic.Uint64
	messagesIn, messagesOut, retries, sendErr atomic.Uint64
	misaddressed, yardsAdded, yardsRemoved    atomic.Uint64
	yardsEvicted                              atomic.Uint64
	staleRemoved, decodeBatches, resent       atomic.Uint64
	drops                                     [numDropReasons]atomic.Uint64
}

func (c *counters) snapshot() Counters {
	s := Counters{
		PagesIn:       c.pagesIn.Load(),
		PagesOut:      c.pagesOut.Load(),
		BytesIn:       c.bytesIn.Load(),
		BytesOut:      c.bytesOut.Load(),
		MessagesIn:    c.messagesIn.Load(),
		MessagesOut:   c.messagesOut.Load(),
		Retries:       c.retries.Load(),
		SendErrors:    c.sendErr.Load(),
		Misaddressed:  c.misaddressed.Load(),
		YardsAdded:    c.yardsAdded.Load(),
		YardsRemoved:  c.yardsRemoved.Load(),
		YardsEvicted:  c.yardsEvicted.Load(),
		StaleRemoved:  c.staleRemoved.Load(),
		DecodeBatches: c.decodeBatches.Load(),
		Resent:        c.resent.Load(),
	}
	for i := range c.drops {
		s.Drops[i] = c.drops[i].Load()
	}
	return s
}
