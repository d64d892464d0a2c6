package main

// raetdump -flow: a sequence diagram of a capture, in SVG (or an HTML page
// holding it), written with nothing but the standard library.
//
// One lifeline per estate (a road address, named by the join that shows
// its name) and per yard (a lane socket), an arrow per packet from sender
// to receiver labelled with its transaction, kinds and segment, one row per
// packet with its time since the first on the left. Retransmissions are
// dashed orange; a packet sent again later is marked as presumed lost (a
// grey dashed arrow ending in a cross: the capture cannot see where it was
// dropped, only that its sender gave up waiting for it), and a
// retransmission whose first send the capture never saw (a capture at the
// receiver, past the loss) says so; resend requests and nacks are purple;
// packets raetdump could not decode are red.

import (
	"fmt"
	"html"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
)

// maxFlowArrows bounds what a flow keeps: a diagram of more packets is
// unreadable anyway; the rest are counted.
const maxFlowArrows = 20000

// arrowKind is how an arrow is drawn.
type arrowKind uint8

const (
	arrowPlain   arrowKind = iota
	arrowResent            // a retransmission
	arrowRequest           // a resend request or a nack
	arrowError             // raetdump could not decode it
	arrowLost              // sent again later: presumed lost
)

var arrowClass = [...]string{"plain", "resent", "request", "error", "lost"}

type flowArrow struct {
	at       time.Duration // since the first packet
	from, to int           // lifelines
	label    string
	title    string // the tooltip: the whole story
	kind     arrowKind
}

// sendKey names one packet of a transaction as its sender sends it, to
// find the earlier send of a retransmission.
type sendKey struct {
	txn  int
	pk   codec.PacketKind
	sn   uint16
	from int
}

// flow collects the arrows of a capture.
type flow struct {
	lifelines []string       // their keys, in order of appearance
	names     []string       // what each is called
	index     map[string]int // by key
	arrows    []flowArrow
	sent      map[sendKey]int // the last arrow of each packet sent
	first     time.Time
	dropped   int // packets over maxFlowArrows
}

func newFlow() *flow {
	return &flow{index: map[string]int{}, sent: map[sendKey]int{}}
}

// lifeline returns the index of the lifeline key, adding it.
func (f *flow) lifeline(key, name string) int {
	if i, ok := f.index[key]; ok {
		if f.names[i] == key && name != "" && name != key {
			f.names[i] = name
		}
		return i
	}
	if name == "" {
		name = key
	}
	f.index[key] = len(f.lifelines)
	f.lifelines = append(f.lifelines, key)
	f.names = append(f.names, name)
	return len(f.lifelines) - 1
}

// add records one dissected packet.
func (f *flow) add(p *dissect.Packet) {
	if len(f.arrows) >= maxFlowArrows {
		f.dropped++
		return
	}
	if f.first.IsZero() {
		f.first = p.Time
	}
	var from, to int
	var label, title strings.Builder
	kind := arrowPlain
	switch {
	case p.Lane:
		from = f.lifeline("lane:"+p.SrcPath, "yard "+yardName(p.SrcPath))
		to = f.lifeline("lane:"+p.DstPath, "yard "+yardName(p.DstPath))
		if p.HeadOK {
			h := &p.LaneHead
			fmt.Fprintf(&label, "page %d/%d", h.PageNumber+1, h.PageCount)
		}
	case !p.Src.IsValid():
		from = f.lifeline("?", "?")
		to = from
	default:
		from = f.lifeline(p.Src.String(), "")
		to = f.lifeline(p.Dst.String(), "")
		if p.HeadOK {
			f.road(p, from, &label, &kind)
		}
	}
	if p.Bus != nil {
		e := &p.Bus.Envelope
		fmt.Fprintf(&label, " · %s", e.Kind)
		if e.Subject != "" {
			fmt.Fprintf(&label, " %s", e.Subject)
		}
	}
	for i := range p.Bundle {
		if b := p.Bundle[i].Bus; b != nil && i < 3 {
			fmt.Fprintf(&label, " · %s", b.Envelope.Kind)
		}
	}
	if p.Err != nil {
		kind = arrowError
		label.WriteString(" ✗ error")
	}
	fmt.Fprintf(&title, "#%d %s > %s, %d bytes", p.N, p.Src, p.Dst, len(p.Data))
	if p.Lane {
		title.Reset()
		fmt.Fprintf(&title, "#%d %s > %s, %d bytes", p.N, p.SrcPath, p.DstPath, len(p.Data))
	}
	if p.HasNote && p.Note.Event != "" {
		fmt.Fprintf(&title, ": %s", p.Note.Event)
	}
	if p.Bus != nil {
		fmt.Fprintf(&title, "; %s", p.Bus.Summary())
	}
	if p.Err != nil {
		fmt.Fprintf(&title, "; error: %v", p.Err)
	}
	f.arrows = append(f.arrows, flowArrow{at: p.Time.Sub(f.first), from: from, to: to,
		label: strings.TrimSpace(label.String()), title: title.String(), kind: kind})
}

// road writes the label of a road packet and marks its kind; it names the
// sender's lifeline after the estate a join body names.
func (f *flow) road(p *dissect.Packet, from int, label *strings.Builder, kind *arrowKind) {
	h := &p.Head
	if h.TransactionKind == codec.TransactionKindJoin && p.HasBody {
		if v, ok := p.Body.Get("name"); ok {
			if name, ok := v.(string); ok && name != "" {
				f.names[from] = name + " " + p.Src.String()
			}
		}
	}
	txn := 0
	if p.HasNote && p.Note.Txn != nil {
		txn = p.Note.Txn.ID
		fmt.Fprintf(label, "#%d ", txn)
	}
	// A bundle's or an answers packet's transactions: the first and last.
	lo, hi := 0, 0
	for i := range p.Bundle {
		lo, hi = idRange(lo, hi, p.Bundle[i].Note)
	}
	for _, n := range p.Answered {
		lo, hi = idRange(lo, hi, n)
	}
	switch {
	case lo > 0 && lo == hi:
		fmt.Fprintf(label, "#%d ", lo)
	case lo > 0:
		fmt.Fprintf(label, "#%d–%d ", lo, hi)
	}
	fmt.Fprintf(label, "%s %s", h.TransactionKind, h.PacketKind)
	if h.Segment() || h.SegmentCount > 1 {
		fmt.Fprintf(label, " seg %d/%d", h.SegmentNumber+1, h.SegmentCount)
	}
	if n := len(p.Bundle); n > 0 {
		fmt.Fprintf(label, " ×%d", n)
	}
	if n := len(p.Answered); n > 0 {
		fmt.Fprintf(label, " (%d txns)", n)
	}
	switch {
	case p.HasNote && p.Note.Retransmit:
		*kind = arrowResent
		label.WriteString(" ↻ again")
	case h.PacketKind == codec.PacketKindResend || h.PacketKind == codec.PacketKindNack:
		*kind = arrowRequest
	}
	if txn == 0 {
		return
	}
	k := sendKey{txn, h.PacketKind, h.SegmentNumber, from}
	if *kind == arrowResent {
		switch prev, ok := f.sent[k]; {
		case !ok: // the capture is past the loss: the receiver's
			label.WriteString(", first not seen")
		case f.arrows[prev].kind != arrowError:
			f.arrows[prev].kind = arrowLost
		}
	}
	if len(f.sent) < maxFlowArrows {
		f.sent[k] = len(f.arrows)
	}
}

// idRange widens lo..hi (0: empty) to the transaction of n.
func idRange(lo, hi int, n dissect.Note) (int, int) {
	if n.Txn == nil {
		return lo, hi
	}
	id := n.Txn.ID
	if lo == 0 || id < lo {
		lo = id
	}
	return lo, max(hi, id)
}

func yardName(path string) string {
	base := filepath.Base(path)
	base = strings.TrimSuffix(base, ".uxd")
	if i := strings.LastIndexByte(base, '.'); i >= 0 {
		base = base[i+1:]
	}
	return base
}

// The diagram's geometry, in pixels.
const (
	flowRow    = 18  // one packet
	flowTime   = 96  // the time column
	flowTop    = 44  // the names over the lifelines
	flowBottom = 40  // the names under them
	flowMinCol = 200 // a lifeline's column, at least
	flowMaxCol = 360
	flowChar   = 6 // the width of a label's character, about (10px sans-serif)
)

// column is the width of each lifeline's column: room for the longest
// label between two neighbours.
func (f *flow) column() int {
	longest := 0
	for _, a := range f.arrows {
		span := max(1, abs(a.to-a.from))
		longest = max(longest, len([]rune(a.label))*flowChar/span+20)
	}
	for _, n := range f.names {
		longest = max(longest, len(n)*7+16)
	}
	return min(max(longest, flowMinCol), flowMaxCol)
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

const flowStyle = `
text{font-family:DejaVu Sans,Verdana,sans-serif;font-size:10px;fill:#222}
.name{font-size:12px;font-weight:bold}
.time{fill:#666;text-anchor:end}
.life{stroke:#999;stroke-width:1;stroke-dasharray:2 3}
.row:hover{fill:#eef}
line.plain{stroke:#333}
line.resent{stroke:#d46b08;stroke-dasharray:6 3}
line.request{stroke:#7b3fb8}
line.error{stroke:#cf1322;stroke-width:2}
line.lost{stroke:#999;stroke-dasharray:3 3}
text.resent{fill:#ad4e00}
text.request{fill:#5b2a8c}
text.error{fill:#a8071a}
text.lost{fill:#888}
.cross{stroke:#cf1322;stroke-width:2}
`

// writeSVG writes the diagram as a standalone SVG document.
func (f *flow) writeSVG(w io.Writer) error {
	var b strings.Builder
	f.svg(&b, true)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeHTML writes an HTML page with the diagram, its lifelines' names
// kept in view while it scrolls.
func (f *flow) writeHTML(w io.Writer) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>raetdump flow</title>\n<style>\nbody{margin:0;background:#fff}\n.head{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd}\n")
	b.WriteString(flowStyle)
	b.WriteString("</style></head><body>\n<div class=\"head\">")
	f.header(&b)
	b.WriteString("</div>\n")
	f.svg(&b, false)
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (f *flow) width() int { return flowTime + f.column()*max(1, len(f.lifelines)) + 20 }

func (f *flow) x(i int) int { col := f.column(); return flowTime + col*i + col/2 }

// header writes an SVG of the lifelines' names alone (the HTML page's
// sticky header).
func (f *flow) header(b *strings.Builder) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d">`, f.width(), flowTop-14)
	for i, n := range f.names {
		fmt.Fprintf(b, `<text class="name" x="%d" y="20" text-anchor="middle">%s</text>`, f.x(i), esc(n))
	}
	b.WriteString("</svg>\n")
}

// svg writes the diagram; standalone adds the XML declaration, the style
// and the names over the lifelines (a page has them in its header).
func (f *flow) svg(b *strings.Builder, standalone bool) {
	rows := len(f.arrows)
	height := flowTop + rows*flowRow + flowBottom
	if f.dropped > 0 {
		height += flowRow
	}
	width := f.width()
	if standalone {
		b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	}
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d">`+"\n", width, height, width, height)
	fmt.Fprintf(b, "<title>raetdump flow: %d packets, %d lifelines</title>\n", rows, len(f.lifelines))
	if standalone {
		b.WriteString("<style>" + flowStyle + "</style>\n")
	}
	b.WriteString(`<defs>`)
	for _, c := range []struct{ id, color string }{{"plain", "#333"}, {"resent", "#d46b08"}, {"request", "#7b3fb8"}, {"error", "#cf1322"}, {"lost", "#999"}} {
		fmt.Fprintf(b, `<marker id="h-%s" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="%s"/></marker>`, c.id, c.color)
	}
	b.WriteString("</defs>\n")
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="#fff"/>`+"\n", width, height)
	// Names, over and under the lifelines.
	bottom := flowTop + rows*flowRow
	for i, n := range f.names {
		x := f.x(i)
		if standalone { // the page's sticky header has them
			fmt.Fprintf(b, `<text class="name" x="%d" y="20" text-anchor="middle">%s</text>`, x, esc(n))
		}
		fmt.Fprintf(b, `<line class="life" x1="%d" y1="28" x2="%d" y2="%d"/>`, x, x, bottom+8)
		fmt.Fprintf(b, `<text class="name" x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", x, bottom+26, esc(n))
	}
	fmt.Fprintf(b, `<text class="time" x="%d" y="38">time</text>`+"\n", flowTime-8)
	for i, a := range f.arrows {
		y := flowTop + i*flowRow + flowRow/2 + 2
		cls := arrowClass[a.kind]
		fmt.Fprintf(b, `<g><title>%s</title>`, esc(a.title))
		fmt.Fprintf(b, `<text class="time" x="%d" y="%d">%s</text>`, flowTime-8, y+3, fmtOffset(a.at))
		x1, x2 := f.x(a.from), f.x(a.to)
		switch {
		case a.from == a.to: // no other end known: a stub
			fmt.Fprintf(b, `<line class="%s" x1="%d" y1="%d" x2="%d" y2="%d" marker-end="url(#h-%s)"/>`, cls, x1, y, x1+30, y, cls)
			x2 = x1 + 60
		case a.kind == arrowLost: // ends short, in a cross
			end := x1 + (x2-x1)*3/4
			fmt.Fprintf(b, `<line class="%s" x1="%d" y1="%d" x2="%d" y2="%d"/>`, cls, x1, y, end, y)
			fmt.Fprintf(b, `<path class="cross" d="M%d,%dl8,8m0,-8l-8,8"/>`, end-4, y-4)
		default:
			fmt.Fprintf(b, `<line class="%s" x1="%d" y1="%d" x2="%d" y2="%d" marker-end="url(#h-%s)"/>`, cls, x1, y, x2, y, cls)
		}
		fmt.Fprintf(b, `<text class="%s" x="%d" y="%d" text-anchor="middle">%s</text></g>`+"\n", cls, (x1+x2)/2, y-3, esc(a.label))
	}
	if f.dropped > 0 {
		fmt.Fprintf(b, `<text x="%d" y="%d">… and %d more packets, not drawn</text>`+"\n", flowTime, bottom+flowBottom+flowRow/2, f.dropped)
	}
	b.WriteString("</svg>\n")
}

// fmtOffset is a time since the first packet: +0.000123 s as "+0.123 ms".
func fmtOffset(d time.Duration) string {
	ms := float64(d.Microseconds()) / 1000
	return "+" + strconv.FormatFloat(ms, 'f', 3, 64) + " ms"
}

func esc(s string) string { return html.EscapeString(s) }
