package dissect

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// HeadFields lists the head fields of the "head" object in AppendJSON, by
// their two-letter keys, in the spec's emission order, followed by the
// flags of fg in the spec's order.
var HeadFields = []string{"ri", "pl", "hl", "fg", "vn", "pk", "hk", "se", "de", "si", "ti", "tk", "dt",
	"oi", "sn", "sc", "ml", "bk", "ck", "fk", "fl", "cf", "bf", "wf", "sf", "af", "nf", "df", "vf"}

// LaneFields lists the fields of a lane page head in the "head" object.
var LaneFields = []string{"ri", "vn", "pk", "sn", "dn", "si", "bi", "pn", "pc"}

// HeadValue returns the value of head field key (one of HeadFields) of h:
// a uint64 for integers, enumerations and fg, a float64 for dt, a bool for a
// flag, a string for ri.
func HeadValue(h *codec.Head, key string) any {
	switch key {
	case "ri":
		return "RAET"
	case "pl":
		return uint64(h.PacketLength)
	case "hl":
		return uint64(h.HeadLength)
	case "fg":
		return uint64(h.Flags)
	case "vn":
		return uint64(h.Version)
	case "pk":
		return uint64(h.PacketKind)
	case "hk":
		return uint64(h.HeadKind)
	case "se":
		return uint64(h.SourceID)
	case "de":
		return uint64(h.DestinationID)
	case "si":
		return uint64(h.SessionID)
	case "ti":
		return uint64(h.TransactionID)
	case "tk":
		return uint64(h.TransactionKind)
	case "dt":
		return h.DateTime
	case "oi":
		return uint64(h.OrderIndex)
	case "sn":
		return uint64(h.SegmentNumber)
	case "sc":
		return uint64(h.SegmentCount)
	case "ml":
		return uint64(h.MessageLength)
	case "bk":
		return uint64(h.BodyKind)
	case "ck":
		return uint64(h.CoatKind)
	case "fk":
		return uint64(h.FootKind)
	case "fl":
		return uint64(h.FootLength)
	case "cf":
		return h.Correspondent()
	case "bf":
		return h.Broadcast()
	case "wf":
		return h.Wait()
	case "sf":
		return h.Segment()
	case "af":
		return h.Again()
	case "nf":
		return h.NAT()
	case "df":
		return h.Dynamic()
	case "vf":
		return h.IPv6()
	}
	return nil
}

// appendString appends s as a JSON string. Unlike encoding/json's
// default it does not escape <, > and &: the output is read by people and
// by JSON parsers, never embedded in HTML, and a subject filter
// "orders.>" should read as it is. Invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20 || c == 0x7f:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, "\\ufffd"...)
		case r == '\u2028' || r == '\u2029': // valid JSON, but not in JavaScript strings
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// AppendJSONValue appends v as JSON, as encoding/json writes it but with
// no HTML escaping (see appendString): how raetdump shows bodies.
func AppendJSONValue(b []byte, v any) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return b, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

func appendKey(b []byte, first *bool, k string) []byte {
	if !*first {
		b = append(b, ',')
	}
	*first = false
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func appendValue(b []byte, v any) []byte {
	switch x := v.(type) {
	case uint64:
		return strconv.AppendUint(b, x, 10)
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return append(b, "null"...)
		}
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, x)
	case string:
		return appendString(b, x)
	}
	return append(b, "null"...)
}

// AppendJSON appends the packet as one JSON object (no newline):
//
//	n, time, src, dst, len       the record number, capture time (RFC 3339,
//	                             UTC), addresses (socket paths for a lane
//	                             page) and datagram length
//	link                         instead of src and dst, for a frame whose
//	                             link or IP layers could not be read: its
//	                             link type
//	lane                         true for a lane page
//	gso                          the packet's place (from 1) in a UDP GSO
//	                             super-datagram of the frame n, when it is
//	                             one of several
//	truncated                    true when the capture cut the frame
//	head                         the head fields by two-letter key (HeadFields
//	                             or LaneFields), numbers as numbers, fg as
//	                             two hex digits, flags as booleans
//	names                        the enumerations' names (hk, pk, tk, bk, ck,
//	                             fk; pk for a lane page)
//	head_len, coat_len, foot_len the sizes of the three parts
//	verified                     true or false once the foot was checked,
//	                             null otherwise (verify_note says why)
//	signer                       the estate whose key verified it
//	body                         the decoded body, when it could be read
//	                             and is not a bus envelope
//	bus                          instead of body, when the body is a bus
//	                             envelope: kind by name, the other fields
//	                             by name (BusFieldNames; policy and replay
//	                             by name), its content (bd) as body, and
//	                             for a rep or done reply_to, the record
//	                             number of its req or job, and elapsed_us
//	body_note                    why there is no body
//	txn                          the transaction: id, kind, role (initiator
//	                             or correspondent), event, retransmit, stale,
//	                             and once it ends outcome and duration_us
//	error                        only when the packet could not be decoded:
//	                             the reason
func (p *Packet) AppendJSON(b []byte) []byte {
	first := true
	b = append(b, '{')
	b = appendKey(b, &first, "n")
	b = strconv.AppendInt(b, int64(p.N), 10)
	b = appendKey(b, &first, "time")
	b = appendString(b, p.Time.UTC().Format(time.RFC3339Nano))
	if p.Lane {
		b = appendKey(b, &first, "lane")
		b = append(b, "true"...)
		b = appendKey(b, &first, "src")
		b = appendString(b, p.SrcPath)
		b = appendKey(b, &first, "dst")
		b = appendString(b, p.DstPath)
	} else if p.Src.IsValid() {
		b = appendKey(b, &first, "src")
		b = appendString(b, p.Src.String())
		b = appendKey(b, &first, "dst")
		b = appendString(b, p.Dst.String())
	} else {
		b = appendKey(b, &first, "link")
		b = strconv.AppendInt(b, int64(p.LinkType), 10)
	}
	b = appendKey(b, &first, "len")
	b = strconv.AppendInt(b, int64(len(p.Data)), 10)
	if p.GSO > 0 {
		b = appendKey(b, &first, "gso")
		b = strconv.AppendInt(b, int64(p.GSO), 10)
	}
	if p.Truncated {
		b = appendKey(b, &first, "truncated")
		b = append(b, "true"...)
	}
	if p.HeadOK {
		b = appendKey(b, &first, "head")
		b = p.appendHead(b)
		b = appendKey(b, &first, "names")
		b = p.appendNames(b)
		if p.Parsed {
			b = appendKey(b, &first, "head_len")
			b = strconv.AppendInt(b, int64(p.HeadLen), 10)
			b = appendKey(b, &first, "coat_len")
			b = strconv.AppendInt(b, int64(p.CoatLen), 10)
			if !p.Lane {
				b = appendKey(b, &first, "foot_len")
				b = strconv.AppendInt(b, int64(p.FootLen), 10)
			}
		}
	}
	if p.Parsed {
		b = appendKey(b, &first, "verified")
		if p.Verified == nil {
			b = append(b, "null"...)
		} else {
			b = strconv.AppendBool(b, *p.Verified)
		}
		if p.Signer != "" {
			b = appendKey(b, &first, "signer")
			b = appendString(b, p.Signer)
		}
		if p.VerifyNote != "" {
			b = appendKey(b, &first, "verify_note")
			b = appendString(b, p.VerifyNote)
		}
	}
	b = appendBodyOrBus(b, &first, p.HasBody, p.Body, p.Bus)
	b = appendMessageID(b, &first, p.MessageID)
	if p.BodyNote != "" {
		b = appendKey(b, &first, "body_note")
		b = appendString(b, p.BodyNote)
	}
	if p.HasNote && p.Note.Txn != nil {
		b = appendKey(b, &first, "txn")
		b = appendTxn(b, &p.Note)
	} else if p.HasNote && p.Note.Event != "" {
		b = appendKey(b, &first, "event")
		b = appendString(b, p.Note.Event)
	}
	if len(p.Bundle) > 0 {
		b = appendKey(b, &first, "bundle")
		b = append(b, '[')
		for i := range p.Bundle {
			m := &p.Bundle[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"ti":`...)
			b = strconv.AppendUint(b, uint64(m.TI), 10)
			b = append(b, `,"fg":`...)
			b = strconv.AppendUint(b, uint64(m.Flags), 10)
			b = append(b, `,"len":`...)
			b = strconv.AppendInt(b, int64(m.Len), 10)
			if m.Note.Txn != nil {
				b = append(b, `,"txn":`...)
				b = appendTxn(b, &m.Note)
			}
			inner := false // after "ti"
			b = appendBodyOrBus(b, &inner, m.HasBody, m.Body, m.Bus)
			b = appendMessageID(b, &inner, m.MessageID)
			if m.Err != nil {
				b = appendKey(b, &inner, "error")
				b = appendString(b, m.Err.Error())
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(p.Answers) > 0 {
		b = appendKey(b, &first, "answers")
		b = append(b, '[')
		for i, r := range p.Answers {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"pk":`...)
			b = appendString(b, r.Kind.String())
			b = append(b, `,"first":`...)
			b = strconv.AppendUint(b, uint64(r.First), 10)
			b = append(b, `,"count":`...)
			b = strconv.AppendUint(b, uint64(r.Count), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(p.Answered) > 0 {
		b = appendKey(b, &first, "answered")
		b = append(b, '[')
		for i := range p.Answered {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTxn(b, &p.Answered[i])
		}
		b = append(b, ']')
	}
	if p.Err != nil {
		b = appendKey(b, &first, "error")
		b = appendString(b, p.Err.Error())
	}
	return append(b, '}')
}

func (p *Packet) appendHead(b []byte) []byte {
	first := true
	b = append(b, '{')
	if p.Lane {
		h := &p.LaneHead
		for _, k := range LaneFields {
			b = appendKey(b, &first, k)
			switch k {
			case "ri":
				b = appendString(b, "RAET")
			case "vn":
				b = strconv.AppendUint(b, uint64(h.Version), 10)
			case "pk":
				b = strconv.AppendUint(b, uint64(h.PackKind), 10)
			case "sn":
				b = appendString(b, h.Source)
			case "dn":
				b = appendString(b, h.Destination)
			case "si":
				b = appendString(b, h.SessionID)
			case "bi":
				b = strconv.AppendUint(b, uint64(h.BookID), 10)
			case "pn":
				b = strconv.AppendUint(b, uint64(h.PageNumber), 10)
			case "pc":
				b = strconv.AppendUint(b, uint64(h.PageCount), 10)
			}
		}
		return append(b, '}')
	}
	for _, k := range HeadFields {
		b = appendKey(b, &first, k)
		if k == "fg" {
			b = append(b, '"')
			b = append(b, hexDigits[p.Head.Flags>>4], hexDigits[p.Head.Flags&15], '"')
			continue
		}
		b = appendValue(b, HeadValue(&p.Head, k))
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

func (p *Packet) appendNames(b []byte) []byte {
	first := true
	b = append(b, '{')
	if p.Lane {
		b = appendKey(b, &first, "pk")
		b = appendString(b, p.LaneHead.PackKind.String())
		return append(b, '}')
	}
	h := &p.Head
	for _, kv := range [...]struct{ k, v string }{{"hk", h.HeadKind.String()}, {"pk", h.PacketKind.String()},
		{"tk", h.TransactionKind.String()}, {"bk", h.BodyKind.String()}, {"ck", h.CoatKind.String()},
		{"fk", h.FootKind.String()}} {
		b = appendKey(b, &first, kv.k)
		b = appendString(b, kv.v)
	}
	return append(b, '}')
}

func appendTxn(b []byte, n *Note) []byte {
	tx := n.Txn
	first := true
	b = append(b, '{')
	b = appendKey(b, &first, "id")
	b = strconv.AppendInt(b, int64(tx.ID), 10)
	b = appendKey(b, &first, "kind")
	b = appendString(b, tx.Kind.String())
	b = appendKey(b, &first, "role")
	if n.Initiator {
		b = appendString(b, "initiator")
	} else {
		b = appendString(b, "correspondent")
	}
	b = appendKey(b, &first, "event")
	b = appendString(b, n.Event)
	b = appendKey(b, &first, "retransmit")
	b = strconv.AppendBool(b, n.Retransmit)
	if n.Stale {
		b = appendKey(b, &first, "stale")
		b = append(b, "true"...)
	}
	if n.Ends {
		b = appendKey(b, &first, "outcome")
		b = appendString(b, n.Outcome.String())
		b = appendKey(b, &first, "duration_us")
		b = strconv.AppendInt(b, n.Duration.Microseconds(), 10)
	}
	return append(b, '}')
}

// appendBodyOrBus appends a body: a bus envelope as a "bus" key, its
// fields named and its content (bd) in it as "body", else as appendBody.
func appendBodyOrBus(b []byte, first *bool, has bool, body packet.OrderedMap, bus *BusInfo) []byte {
	if bus == nil {
		return appendBody(b, first, has, body)
	}
	b = appendKey(b, first, "bus")
	return bus.AppendJSON(b)
}

// appendBody appends a "body" key of body when has is set (a "body_note"
// when it cannot be shown as JSON).
func appendBody(b []byte, first *bool, has bool, body packet.OrderedMap) []byte {
	if !has {
		return b
	}
	pre, wasFirst := b, *first
	out, err := AppendJSONValue(appendKey(b, first, "body"), body)
	if err != nil {
		b, *first = pre, wasFirst
		b = appendKey(b, first, "body_note")
		return appendString(b, "the body cannot be shown as JSON: "+err.Error())
	}
	return out
}

// appendMessageID appends a "mid" key of id, unless it is nil.
func appendMessageID(b []byte, first *bool, id *packet.MsgID) []byte {
	if id == nil {
		return b
	}
	b = appendKey(b, first, "mid")
	b = append(b, `{"stream":`...)
	b = strconv.AppendUint(b, id.Stream, 10)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, id.Seq, 10)
	b = append(b, `,"floor":`...)
	b = strconv.AppendUint(b, id.Floor, 10)
	return append(b, '}')
}
