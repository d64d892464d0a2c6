package dissect

import (
	"fmt"
	"time"

	"github.com/raet-go/raet/codec"
)

// Bounds of lane book reassembly.
const (
	maxLaneBooks     = 64
	maxLaneBookBytes = 64 << 20
	laneBookTimeout  = 10 * time.Second
)

type bookKey struct {
	src, dst   string // socket paths
	sn, dn, si string
	bi         uint32
}

type book struct {
	pages map[uint16][]byte
	count uint16
	bytes int
	first time.Time
}

// laneBooks puts multi-page lane messages together, within bounds.
type laneBooks struct {
	m     map[bookKey]*book
	bytes int
}

func (lb *laneBooks) drop(k bookKey) {
	if b := lb.m[k]; b != nil {
		lb.bytes -= b.bytes
		delete(lb.m, k)
	}
}

// add stores one page and returns the whole body once every page is in.
func (lb *laneBooks) add(k bookKey, pn, pc uint16, body []byte, now time.Time) ([]byte, string) {
	if lb.m == nil {
		lb.m = map[bookKey]*book{}
	}
	for bk, b := range lb.m {
		if now.Sub(b.first) > laneBookTimeout {
			lb.drop(bk)
		}
	}
	if pn >= pc {
		return nil, fmt.Sprintf("page number %d not below the page count %d", pn, pc)
	}
	b := lb.m[k]
	if b != nil && b.count != pc {
		lb.drop(k)
		b = nil
	}
	if b == nil {
		for len(lb.m) >= maxLaneBooks || (len(lb.m) > 0 && lb.bytes+len(body) > maxLaneBookBytes) {
			var oldest bookKey
			var t time.Time
			for bk, ob := range lb.m {
				if t.IsZero() || ob.first.Before(t) {
					oldest, t = bk, ob.first
				}
			}
			lb.drop(oldest)
		}
		if len(body) > maxLaneBookBytes {
			return nil, "page larger than the book memory"
		}
		b = &book{pages: map[uint16][]byte{}, count: pc, first: now}
		lb.m[k] = b
	}
	if _, dup := b.pages[pn]; dup {
		return nil, fmt.Sprintf("page %d of %d again", pn, pc)
	}
	b.pages[pn] = append([]byte(nil), body...)
	b.bytes += len(body)
	lb.bytes += len(body)
	if len(b.pages) < int(pc) {
		return nil, fmt.Sprintf("page %d of %d: the body is shown with the page that completes the book", pn, pc)
	}
	whole := make([]byte, 0, b.bytes)
	for i := range pc {
		whole = append(whole, b.pages[i]...)
	}
	lb.drop(k)
	return whole, ""
}

func (d *Dissector) decodeLane(p *Packet) {
	st := d.stats
	if err := d.lane.DecodeFromBytes(p.Data, nil); err != nil {
		if p.Truncated {
			err = fmt.Errorf("%w: %d bytes captured: %w", errCaptureTruncated, len(p.Data), err)
		}
		p.Err = err
		st.addFailure(reason(err))
		return
	}
	h := &d.lane.Head
	p.HeadOK, p.Parsed, p.LaneHead = true, true, *h
	p.HeadLen = len(d.lane.Contents)
	p.CoatLen = len(d.lane.Body)
	p.VerifyNote = "lane pages are not signed"
	st.Lane++
	st.Kinds["lane/page"]++ // a fixed name: no allocation
	body := d.lane.Body
	if h.PageCount > 1 {
		k := bookKey{p.SrcPath, p.DstPath, h.Source, h.Destination, h.SessionID, h.BookID}
		whole, note := d.books.add(k, h.PageNumber, h.PageCount, body, p.Time)
		if whole == nil {
			p.BodyNote = note
			return
		}
		body = whole
	}
	var bk codec.BodyKind
	switch h.PackKind {
	case codec.PackKindJSON:
		bk = codec.BodyKindJSON
	case codec.PackKindPack:
		bk = codec.BodyKindMsgpack
	case codec.PackKindCBOR:
		bk = codec.BodyKindCBOR
	default:
		p.BodyNote = "pack kind " + h.PackKind.String() + " unknown"
		st.addError("unknown lane pack kind")
		return
	}
	d.decodeBody(p, bk, body)
}
