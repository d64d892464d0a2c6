package dissect

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"
)

// TxLog writes the transaction log: one JSON object a line, qlog-like,
// for each transaction's start, each of its packets (a packet seen again
// is a resend), and its end (done, or failed and why), with capture times
// and durations. The format is in docs/txlog.md.
//
// The same log comes from a capture (raetdump -txlog, through Packet and
// Closed) and live from a stack (TxLogTap), so that the two can be
// diffed: both follow transactions with a Tracker, from the same packets.
type TxLog struct {
	w       *bufio.Writer
	enc     *json.Encoder
	err     error
	pending []*Transaction // ended while a packet was decoded: written after it
}

// TxLine is one line of the transaction log. Ev is "start", "packet",
// "resend" (a packet seen again: af set, or the same packet twice), "done"
// or "failed"; a packet outside any transaction the log can follow (a
// sealed bundle, one that did not parse) has Txn 0.
type TxLine struct {
	T   time.Time `json:"t"`
	Ev  string    `json:"ev"`
	Txn int       `json:"txn"` // the transaction's number in this log, from 1

	// start and end
	Kind          string `json:"kind,omitempty"`
	Initiator     string `json:"initiator,omitempty"`
	Correspondent string `json:"correspondent,omitempty"`
	SI            uint32 `json:"si,omitempty"`
	TI            uint32 `json:"ti,omitempty"`

	// packet and resend
	By     string `json:"by,omitempty"` // initiator or correspondent
	Src    string `json:"src,omitempty"`
	Dst    string `json:"dst,omitempty"`
	Packet string `json:"pk,omitempty"`
	Size   int    `json:"size,omitempty"`
	SN     *int   `json:"sn,omitempty"` // segments only
	SC     int    `json:"sc,omitempty"`
	Note   string `json:"note,omitempty"`

	// end
	Why         string   `json:"why,omitempty"` // the outcome of a failure: nacked, refused, rejected, timed_out, incomplete, ...
	Ms          *float64 `json:"ms,omitempty"`  // from the first packet to the end
	Packets     int      `json:"packets,omitempty"`
	Bytes       int      `json:"bytes,omitempty"`
	Retransmits int      `json:"retransmits,omitempty"`
	Missing     int      `json:"missing,omitempty"`
}

// NewTxLog returns a log writing to w. Give its Closed method to the
// Dissector's Config.OnClose, and each decoded packet to Packet.
func NewTxLog(w io.Writer) *TxLog {
	l := &TxLog{w: bufio.NewWriterSize(w, 32<<10)}
	l.enc = json.NewEncoder(l.w)
	l.enc.SetEscapeHTML(false)
	return l
}

// Closed takes a transaction that ended (Config.OnClose); its end line
// follows the packet being decoded, or is written at once outside Decode
// (Flush).
func (l *TxLog) Closed(tx *Transaction) {
	l.pending = append(l.pending, tx)
}

// Packet writes the lines of one decoded road packet: the starts of the
// transactions it begins, its own line (one per message of a bundle and
// per transaction an answers packet ends), and the ends it caused.
func (l *TxLog) Packet(p *Packet) {
	if p.Lane {
		return
	}
	base := TxLine{T: p.Time.UTC(), Src: p.Src.String(), Dst: p.Dst.String(), Size: len(p.Data)}
	if p.Parsed {
		base.Packet = p.Head.PacketKind.String()
	}
	switch {
	case p.HasNote && p.Note.Txn != nil:
		line := base
		if h := &p.Head; h.Segment() || h.SegmentCount > 1 {
			sn := int(h.SegmentNumber)
			line.SN, line.SC = &sn, int(h.SegmentCount)
		}
		l.note(line, p.Note)
	case len(p.Bundle) > 0 || len(p.Answered) > 0:
		for _, m := range p.Bundle {
			line := base
			line.Size, line.Packet = m.Len, "message"
			l.note(line, m.Note)
		}
		for _, n := range p.Answered {
			l.note(base, n)
		}
	default:
		base.Ev, base.Note = "packet", p.BodyNote
		if p.Err != nil {
			base.Note = p.Err.Error()
		}
		l.write(&base)
	}
	l.flushEnds()
}

func (l *TxLog) note(line TxLine, n Note) {
	tx := n.Txn
	if tx == nil {
		line.Ev, line.Note = "packet", n.Event
		l.write(&line)
		return
	}
	line.Txn = tx.ID
	if tx.Packets == 1 {
		start := TxLine{T: tx.First.UTC(), Ev: "start", Txn: tx.ID, Kind: tx.Kind.String(),
			Initiator: tx.Initiator.String(), Correspondent: tx.Correspondent.String(), SI: tx.SessionID, TI: tx.TID}
		l.write(&start)
	}
	line.Ev, line.By, line.Note = "packet", "correspondent", n.Event
	if n.Retransmit {
		line.Ev = "resend"
	}
	if n.Initiator {
		line.By = "initiator"
	}
	l.write(&line)
}

// flushEnds writes the end lines of the transactions that ended.
func (l *TxLog) flushEnds() {
	for _, tx := range l.pending {
		end := TxLine{T: tx.End.UTC(), Ev: "done", Txn: tx.ID, Kind: tx.Kind.String(), Packets: tx.Packets,
			Bytes: tx.Bytes, Retransmits: tx.Retransmits, Missing: tx.Missing}
		if end.T.IsZero() || tx.Outcome == Incomplete || tx.Outcome == Evicted {
			end.T = tx.Last.UTC()
		}
		if tx.Outcome != Done {
			end.Ev, end.Why = "failed", strings.ReplaceAll(tx.Outcome.String(), " ", "_")
		}
		ms := float64(tx.Duration().Microseconds()) / 1000
		end.Ms = &ms
		l.write(&end)
	}
	clear(l.pending)
	l.pending = l.pending[:0]
}

func (l *TxLog) write(line *TxLine) {
	if l.err == nil {
		l.err = l.enc.Encode(line)
	}
}

// Flush writes the ends still pending (call it after the Dissector's
// Flush, which ends the transactions still running as incomplete) and
// flushes the writer; it returns the first write error.
func (l *TxLog) Flush() error {
	l.flushEnds()
	if l.err == nil {
		l.err = l.w.Flush()
	}
	return l.err
}

// TxLogTap writes a road stack's transaction log live: its Tap method
// serves road.Config.Tap (through RoadPacket) and follows the datagrams
// as a Dissector of a capture of them would. Its methods are safe for concurrent use; a stack without a
// Tap pays nothing for it.
//
//	tl := dissect.NewTxLogTap(f, nil)
//	cfg.Tap = func(p road.TapPacket) { tl.Tap(dissect.RoadPacket(p)) }
//	...
//	stack.Close(); tl.Close(); f.Close()
type TxLogTap struct {
	mu  sync.Mutex
	log *TxLog
	d   *Dissector
	p   Packet
	buf []byte
}

// NewTxLogTap returns a live transaction log writing to w; cfg (nil for
// the defaults) configures its Dissector, except OnClose.
func NewTxLogTap(w io.Writer, cfg *Config) *TxLogTap {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	t := &TxLogTap{log: NewTxLog(w)}
	c.OnClose = t.log.Closed
	t.d = NewDissector(&c)
	return t
}

// Tap logs one datagram a road stack saw.
func (t *TxLogTap) Tap(p RoadPacket) {
	src, dst := p.Remote, p.Local
	if p.Out {
		src, dst = p.Local, p.Remote
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(udpFrameHeader(t.buf[:0], src, dst, p.Data, 0), p.Data...)
	rec := Record{Time: p.Time, LinkType: LinkTypeRaw, Data: t.buf, Length: len(t.buf)}
	if t.d.DecodeInto(rec, &t.p) {
		t.log.Packet(&t.p)
	}
}

// Close ends the log: transactions still running end as incomplete. It
// returns the first write error.
func (t *TxLogTap) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.d.Flush()
	return t.log.Flush()
}
