package main

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/packet"
)

// printer writes packets and transactions for people (or as JSON).
type printer struct {
	w                  *bufio.Writer
	verbose, hex, json bool
	buf                []byte
}

const timeFormat = "15:04:05.000000"

// maxBodyText bounds a body shown in the text output; -json shows it whole.
const maxBodyText = 2000

// packet writes one packet.
func (pr *printer) packet(p *dissect.Packet) {
	if pr.json {
		pr.buf = p.AppendJSON(pr.buf[:0])
		pr.buf = append(pr.buf, '\n')
		pr.w.Write(pr.buf)
		return
	}
	w := pr.w
	src, dst := p.Src.String(), p.Dst.String()
	if p.Lane {
		src, dst = printable(p.SrcPath), printable(p.DstPath)
	}
	if !p.Lane && !p.Src.IsValid() {
		src, dst = "?", "?"
	}
	fmt.Fprintf(w, "%s %s > %s: ", p.Time.Local().Format(timeFormat), src, dst)
	switch {
	case p.Lane && p.HeadOK:
		h := &p.LaneHead
		fmt.Fprintf(w, "LANE %s > %s page %d/%d si %s bi %d pk %s len %d", h.Source, h.Destination,
			h.PageNumber, h.PageCount, h.SessionID, h.BookID, h.PackKind, len(p.Data))
	case p.Lane:
		fmt.Fprintf(w, "LANE len %d", len(p.Data))
	case p.HeadOK:
		h := &p.Head
		fmt.Fprintf(w, "RAET %s %s se %d de %d si %d ti %d", h.TransactionKind, h.PacketKind,
			h.SourceID, h.DestinationID, h.SessionID, h.TransactionID)
		if h.Flags != 0 {
			fmt.Fprintf(w, " [%s]", h.Flags)
		}
		if h.Segment() || h.SegmentCount > 1 {
			fmt.Fprintf(w, " sn %d/%d", h.SegmentNumber, h.SegmentCount)
		}
		fmt.Fprintf(w, " len %d", len(p.Data))
		if p.GSO > 0 {
			fmt.Fprintf(w, " gso #%d", p.GSO)
		}
		if p.Parsed {
			fmt.Fprintf(w, " (%s head %d, coat %d, foot %d)", h.HeadKind, p.HeadLen, p.CoatLen, p.FootLen)
		}
	default:
		fmt.Fprintf(w, "RAET? len %d", len(p.Data))
	}
	if p.Verified != nil {
		if *p.Verified {
			fmt.Fprintf(w, " verified")
		} else {
			fmt.Fprintf(w, " NOT VERIFIED")
		}
	}
	switch {
	case p.HasNote && p.Note.Txn != nil:
		fmt.Fprintf(w, " #%d %s", p.Note.Txn.ID, p.Note.Event)
	case p.HasNote && p.Note.Event != "": // a bundle's or answers' own
		fmt.Fprintf(w, " %s", p.Note.Event)
		for i := range p.Bundle {
			if m := &p.Bundle[i]; m.Note.Txn != nil {
				fmt.Fprintf(w, " #%d", m.Note.Txn.ID)
			}
		}
	}
	if p.Bus != nil {
		fmt.Fprintf(w, " %s", p.Bus.Summary())
	}
	if p.Err != nil {
		fmt.Fprintf(w, " ERROR: %v", p.Err)
	}
	w.WriteByte('\n')
	if pr.verbose {
		pr.details(p)
	}
	if pr.hex {
		hexdump(w, p.Data)
	}
}

// details writes the -v lines of a packet.
func (pr *printer) details(p *dissect.Packet) {
	w := pr.w
	if p.HeadOK && !p.Lane {
		var parts []string
		for _, k := range dissect.HeadFields {
			v := dissect.HeadValue(&p.Head, k)
			switch k {
			case "fg":
				parts = append(parts, fmt.Sprintf("fg %02x", v))
			case "hk":
				parts = append(parts, fmt.Sprintf("hk %d (%s)", v, p.Head.HeadKind))
			case "pk":
				parts = append(parts, fmt.Sprintf("pk %d (%s)", v, p.Head.PacketKind))
			case "tk":
				parts = append(parts, fmt.Sprintf("tk %d (%s)", v, p.Head.TransactionKind))
			case "bk":
				parts = append(parts, fmt.Sprintf("bk %d (%s)", v, p.Head.BodyKind))
			case "ck":
				parts = append(parts, fmt.Sprintf("ck %d (%s)", v, p.Head.CoatKind))
			case "fk":
				parts = append(parts, fmt.Sprintf("fk %d (%s)", v, p.Head.FootKind))
			default:
				if b, ok := v.(bool); ok {
					if b {
						parts = append(parts, k)
					}
					continue
				}
				parts = append(parts, fmt.Sprintf("%s %v", k, v))
			}
		}
		fmt.Fprintf(w, "    head: %s\n", strings.Join(parts, ", "))
	}
	if p.HeadOK && p.Lane {
		h := &p.LaneHead
		fmt.Fprintf(w, "    head: ri RAET, vn %d, pk %d (%s), sn %s, dn %s, si %s, bi %d, pn %d, pc %d\n",
			h.Version, h.PackKind, h.PackKind, h.Source, h.Destination, h.SessionID, h.BookID, h.PageNumber, h.PageCount)
	}
	switch {
	case p.Verified != nil && *p.Verified:
		fmt.Fprintf(w, "    foot: verified with the key of %s\n", p.Signer)
	case p.VerifyNote != "":
		fmt.Fprintf(w, "    foot: %s\n", p.VerifyNote)
	}
	writeBody(w, "    ", p.HasBody, p.Body, p.Bus, p.MessageID)
	for i := range p.Bundle {
		m := &p.Bundle[i]
		fmt.Fprintf(w, "    message ti %d, %d bytes", m.TI, m.Len)
		if m.Note.Txn != nil {
			fmt.Fprintf(w, ", txn #%d %s", m.Note.Txn.ID, m.Note.Event)
		}
		if m.Err != nil {
			fmt.Fprintf(w, ", ERROR: %v", m.Err)
		}
		w.WriteByte('\n')
		writeBody(w, "      ", m.HasBody, m.Body, m.Bus, m.MessageID)
	}
	for _, r := range p.Answers {
		fmt.Fprintf(w, "    answers: %s for ti %d..%d\n", r.Kind, r.First, r.First+r.Count-1)
	}
	if p.BodyNote != "" {
		fmt.Fprintf(w, "    body: %s\n", p.BodyNote)
	}
	if p.HasNote && p.Note.Txn != nil {
		tx := p.Note.Txn
		role := "correspondent"
		if p.Note.Initiator {
			role = "initiator"
		}
		fmt.Fprintf(w, "    txn #%d %s %s > %s si %d ti %d, from the %s", tx.ID, tx.Kind, tx.Initiator,
			tx.Correspondent, tx.SessionID, tx.TID, role)
		if p.Note.Retransmit {
			fmt.Fprint(w, ", retransmitted")
		}
		if p.Note.Ends {
			fmt.Fprintf(w, ", ends it: %s", p.Note.Outcome)
		}
		w.WriteByte('\n')
	}
}

// writeBody writes the -v lines of a body (when has; a bus envelope
// with its fields named) and of a message id, each line after indent.
func writeBody(w *bufio.Writer, indent string, has bool, body packet.OrderedMap, bus *dissect.BusInfo, id *packet.MsgID) {
	switch {
	case bus != nil:
		js := bus.AppendJSON(nil)
		if len(js) > maxBodyText {
			fmt.Fprintf(w, "%sbus: %s… (%d bytes as JSON)\n", indent, js[:maxBodyText], len(js))
		} else {
			fmt.Fprintf(w, "%sbus: %s\n", indent, js)
		}
	case has:
		js, err := dissect.AppendJSONValue(nil, body)
		switch {
		case err != nil:
			fmt.Fprintf(w, "%sbody: (cannot be shown: %v)\n", indent, err)
		case len(js) > maxBodyText:
			fmt.Fprintf(w, "%sbody: %s… (%d bytes as JSON)\n", indent, js[:maxBodyText], len(js))
		default:
			fmt.Fprintf(w, "%sbody: %s\n", indent, js)
		}
	}
	if id != nil {
		fmt.Fprintf(w, "%smid: stream %d seq %d floor %d\n", indent, id.Stream, id.Seq, id.Floor)
	}
}

// transaction writes one transaction (-T).
func (pr *printer) transaction(tx *dissect.Transaction) {
	if pr.json {
		m := map[string]any{"id": tx.ID, "kind": tx.Kind.String(), "initiator": tx.Initiator.String(),
			"correspondent": tx.Correspondent.String(), "si": tx.SessionID, "ti": tx.TID,
			"outcome": tx.Outcome.String(), "duration_us": tx.Duration().Microseconds(),
			"packets": tx.Packets, "bytes": tx.Bytes, "retransmits": tx.Retransmits,
			"resend_requests": tx.ResendRequests, "stale_nacks": tx.StaleNacks,
			"first": tx.First.UTC(), "last": tx.Last.UTC()}
		if tx.Segments > 0 {
			m["segments"], m["missing"], m["ml"], m["reassembled"] = tx.Segments, tx.Missing, tx.MessageLength, tx.Reassembled
		}
		js, _ := dissect.AppendJSONValue(nil, m)
		pr.w.Write(append(js, '\n'))
		return
	}
	w := pr.w
	fmt.Fprintf(w, "%s #%d %s %s > %s si %d ti %d: %s in %s, %d packets (%d bytes)",
		tx.First.Local().Format(timeFormat), tx.ID, tx.Kind, tx.Initiator, tx.Correspondent, tx.SessionID, tx.TID,
		tx.Outcome, fmtDur(tx), tx.Packets, tx.Bytes)
	if tx.Segments > 1 {
		fmt.Fprintf(w, ", %d segments (%d never seen), ml %d", tx.Segments, tx.Missing, tx.MessageLength)
		if tx.Reassembled {
			fmt.Fprint(w, ", reassembled")
		}
	}
	if tx.Retransmits > 0 {
		fmt.Fprintf(w, ", %d retransmits", tx.Retransmits)
	}
	if tx.ResendRequests > 0 {
		fmt.Fprintf(w, ", %d resend requests", tx.ResendRequests)
		if tx.Requested > 0 {
			fmt.Fprintf(w, " (%d segments asked for)", tx.Requested)
		}
	}
	if tx.StaleNacks > 0 {
		fmt.Fprintf(w, ", %d stale nacks", tx.StaleNacks)
	}
	w.WriteByte('\n')
}

// fmtDur rounds a transaction's duration to what a reader wants.
func fmtDur(tx *dissect.Transaction) string {
	d := tx.Duration()
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// hexdump writes b as hexdump -C does, indented.
func hexdump(w *bufio.Writer, b []byte) {
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		fmt.Fprintf(w, "    %04x  ", off)
		for i := 0; i < 16; i++ {
			if i < len(line) {
				fmt.Fprintf(w, "%02x ", line[i])
			} else {
				w.WriteString("   ")
			}
			if i == 7 {
				w.WriteByte(' ')
			}
		}
		w.WriteString(" |")
		for _, c := range line {
			if c < 0x20 || c >= 0x7f {
				c = '.'
			}
			w.WriteByte(c)
		}
		w.WriteString("|\n")
	}
}

// printable escapes what a terminal should not get raw: the socket paths
// of lane records come from the capture.
func printable(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			q := strconv.QuoteToASCII(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

// isLoopback reports whether iface is a loopback device.
func isLoopback(iface string) bool {
	ifi, err := net.InterfaceByName(iface)
	return err == nil && ifi.Flags&net.FlagLoopback != 0
}
