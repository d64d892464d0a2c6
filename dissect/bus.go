package dissect

import (
	"strconv"
	"strings"
	"time"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/protocol"
)

// BusInfo is a bus envelope (package bus: pub/sub, request/reply,
// push/pull) found in a packet's body, and for a reply (rep, done) the
// request (req, job) it answers, when the capture has it.
type BusInfo struct {
	Envelope envelope.Envelope
	// ReplyTo is the record number (Packet.N) of the request or job this
	// reply or done answers, 0 when not seen; Elapsed is the time since.
	ReplyTo int
	Elapsed time.Duration
}

// busKey names a request by its sender, receiver and id.
type busKey struct {
	from, to string
	id       uint64
	job      bool
}

type busSeen struct {
	n    int
	time time.Time
}

// busRequests remembers the last maxBusRequests requests and jobs, to follow
// each to its reply.
type busRequests struct {
	seen  map[busKey]busSeen
	order []busKey
}

const maxBusRequests = 4096

func (r *busRequests) add(k busKey, s busSeen) {
	if r.seen == nil {
		r.seen = map[busKey]busSeen{}
	}
	if _, ok := r.seen[k]; !ok {
		if len(r.order) >= maxBusRequests {
			delete(r.seen, r.order[0])
			r.order = r.order[1:]
		}
		r.order = append(r.order, k)
	}
	r.seen[k] = s
}

// decodeBus decodes the envelope of p's body, if it is one.
func (d *Dissector) decodeBus(p *Packet) {
	if !p.HasBody || len(p.Body) == 0 || p.Body[0].Key != envelope.Keys[0] {
		return
	}
	m := make(map[string]any, len(p.Body))
	for _, kv := range p.Body {
		m[kv.Key] = kv.Value
	}
	var e envelope.Envelope
	if err := envelope.Decode(m, &e); err != nil {
		p.BodyNote = "bus envelope: " + err.Error()
		d.stats.addError("bad bus envelope")
		return
	}
	p.Bus = &BusInfo{Envelope: e}
	from, to := p.Src.String(), p.Dst.String()
	if p.Lane {
		from, to = p.SrcPath, p.DstPath
	}
	switch e.Kind {
	case protocol.BusKindReq, protocol.BusKindJob:
		d.bus.add(busKey{from, to, e.ID, e.Kind == protocol.BusKindJob}, busSeen{p.N, p.Time})
	case protocol.BusKindRep, protocol.BusKindDone:
		if s, ok := d.bus.seen[busKey{to, from, e.ID, e.Kind == protocol.BusKindDone}]; ok {
			p.Bus.ReplyTo, p.Bus.Elapsed = s.n, p.Time.Sub(s.time)
		}
	}
}

// BusFieldNames names the envelope's keys (envelope.Keys but bv, ek and
// bd, which are shown as the envelope itself, its kind and the body) as
// raetdump shows them, in text and in JSON.
var BusFieldNames = map[string]string{
	"ep": "epoch", "id": "id", "sj": "subject", "fi": "filters", "sq": "seq", "ix": "index",
	"tm": "time", "or": "origin", "po": "policy", "hw": "hwm", "rm": "replay", "rn": "replay_arg",
	"dm": "drops", "dn": "missed", "qg": "groups", "cr": "credit", "dl": "deadline_ms",
	"er": "error", "rq": "reply",
}

// busField is one field of an envelope as shown: its name and value, the
// enumerations (policy, replay) by name.
type busField struct {
	name  string
	value any
}

// fields returns the envelope's fields as shown, in spec order: those it
// carries but its version, kind and body.
func (b *BusInfo) fields() []busField {
	e := &b.Envelope
	m := e.Map()
	out := make([]busField, 0, len(m))
	for _, kv := range m[2:] {
		v := kv.Value
		switch kv.Key {
		case "bd":
			continue
		case "po":
			v = e.Policy.String()
		case "rm":
			v = e.Replay.String()
		}
		name := BusFieldNames[kv.Key]
		if name == "" {
			name = kv.Key
		}
		out = append(out, busField{name, v})
	}
	return out
}

// AppendJSON appends the envelope as a JSON object: kind by name, the other
// fields by name (BusFieldNames), the content (bd) as body, then reply_to
// and elapsed_us.
func (b *BusInfo) AppendJSON(out []byte) []byte {
	first := true
	out = append(out, '{')
	out = appendKey(out, &first, "kind")
	out = appendString(out, b.Envelope.Kind.String())
	for _, f := range b.fields() {
		out = appendKey(out, &first, f.name)
		out = appendBusValue(out, f.value)
	}
	if b.Envelope.Body != nil {
		pre := out
		if out, err := AppendJSONValue(appendKey(out, &first, "body"), b.Envelope.Body); err == nil {
			pre = out
		}
		out = pre
	}
	if b.ReplyTo > 0 {
		out = appendKey(out, &first, "reply_to")
		out = strconv.AppendInt(out, int64(b.ReplyTo), 10)
		out = appendKey(out, &first, "elapsed_us")
		out = strconv.AppendInt(out, b.Elapsed.Microseconds(), 10)
	}
	return append(out, '}')
}

func appendBusValue(out []byte, v any) []byte {
	switch x := v.(type) {
	case []string:
		out = append(out, '[')
		for i, s := range x {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendString(out, s)
		}
		return append(out, ']')
	case packet.OrderedMap:
		first := true
		out = append(out, '{')
		for _, kv := range x {
			out = appendKey(out, &first, kv.Key)
			out = appendBusValue(out, kv.Value)
		}
		return append(out, '}')
	case uint8:
		return strconv.AppendUint(out, uint64(x), 10)
	case uint32:
		return strconv.AppendUint(out, uint64(x), 10)
	case int64:
		return strconv.AppendInt(out, x, 10)
	}
	return appendValue(out, v)
}

// Summary is a one-line description of the envelope for text output, its
// fields by name: "BUS pub subject orders.new id 7 seq 12 index 3", with
// "reply to #N in D" for a reply.
func (b *BusInfo) Summary() string {
	s := "BUS " + b.Envelope.Kind.String()
	for _, f := range b.fields() {
		var v []byte
		if str, ok := f.value.(string); ok && str != "" && !strings.ContainsAny(str, " \"\\") {
			v = []byte(str)
		} else {
			v = appendBusValue(nil, f.value)
		}
		s += " " + f.name + " " + string(v)
	}
	if b.ReplyTo > 0 {
		s += " reply to #" + strconv.Itoa(b.ReplyTo) + " in " + b.Elapsed.String()
	}
	return s
}
