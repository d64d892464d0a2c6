package dissect

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

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

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
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
//	bus                          when the body is a bus envelope: its
//	                             fields by key (kind by name, no bd), and
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
	b = appendBody(b, &first, p.HasBody, p.Body)
	b = appendMessageID(b, &first, p.MessageID)
	if p.Bus != nil {
		b = appendKey(b, &first, "bus")
		b = p.Bus.appendJSON(b)
	}
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
			b = appendBody(b, &inner, m.HasBody, m.Body)
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

// appendBody appends a "body" key of body when has is set (a "body_note"
// when it cannot be shown as JSON).
func appendBody(b []byte, first *bool, has bool, body packet.OrderedMap) []byte {
	if !has {
		return b
	}
	js, err := json.Marshal(body)
	if err != nil {
		b = appendKey(b, first, "body_note")
		return appendString(b, "the body cannot be shown as JSON: "+err.Error())
	}
	b = appendKey(b, first, "body")
	return append(b, js...)
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
