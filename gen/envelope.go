package gen

import (
	"strings"

	"github.com/raet-go/raet/spec"
)

// EnvelopePath is where emitEnvelope writes the bus envelope codec.
const EnvelopePath = "bus/envelope/envelope_gen.go"

const packetImport = Module + "/packet"

// envelopeGoType is the Go type of an envelope field.
func envelopeGoType(f *spec.EnvelopeField, eq func(*spec.Enum) string) string {
	if f.Enum != nil {
		return eq(f.Enum)
	}
	switch f.TypeName {
	case "u8":
		return "uint8"
	case "u32":
		return "uint32"
	case "u64":
		return "uint64"
	case "i64":
		return "int64"
	case "bool":
		return "bool"
	case "str":
		return "string"
	case "strs":
		return "[]string"
	case "counts":
		return "map[string]uint64"
	}
	return "any"
}

// envelopeSet is the Go test that a field is not at its zero value (so it
// is written).
func envelopeSet(f *spec.EnvelopeField) string {
	v := "e." + f.Go
	switch f.TypeName {
	case "bool":
		return v
	case "str":
		return v + ` != ""`
	case "strs", "counts":
		return "len(" + v + ") != 0"
	case "any":
		return v + " != nil"
	}
	return v + " != 0"
}

// envelopeDecoder is the hand-written glue function (bus/envelope) that
// converts a decoded body value to the field's type, and its extra argument.
func envelopeDecoder(f *spec.EnvelopeField) (fn, arg string) {
	if f.Enum != nil {
		return "asUint", "8"
	}
	switch f.TypeName {
	case "u8":
		return "asUint", "8"
	case "u32":
		return "asUint", "32"
	case "u64":
		return "asUint", "64"
	case "i64":
		return "asInt", ""
	case "bool":
		return "asBool", ""
	case "str":
		return "asString", ""
	case "strs":
		return "asStrings", ""
	case "counts":
		return "asCounts", ""
	}
	return "", ""
}

// emitEnvelope writes bus/envelope/envelope_gen.go: the Envelope type, its
// encoding as an ordered body mapping and its decoding from a body mapping.
func (g *generator) emitEnvelope() error {
	e := g.s.Envelope
	if len(e.Fields) == 0 {
		return nil
	}
	f := g.newFile(EnvelopePath, "envelope")
	eq := func(e *spec.Enum) string { return f.Q(g.enumImport(e), e.Name) }
	f.P("// MaxList is the most items a list or counts field may have.")
	f.Pf("const MaxList = %d", e.MaxList)
	f.P()
	f.P("// Envelope is the body of a bus message. Zero fields are not written.")
	f.P("type Envelope struct {")
	for _, fd := range e.Fields {
		f.Pf("%s %s // %s: %s", fd.Go, envelopeGoType(fd, eq), fd.Key, fd.Doc)
	}
	f.P("}")
	f.P()
	f.Pf("// Keys lists the envelope's keys in order.")
	var keys []string
	for _, fd := range e.Fields {
		keys = append(keys, `"`+fd.Key+`"`)
	}
	f.Pf("var Keys = [...]string{%s}", strings.Join(keys, ", "))
	f.P()
	f.P("// Map returns the envelope as a body mapping for a stack's Send: the")
	f.P("// required fields always, the others when not zero, in spec order.")
	f.Pf("func (e *Envelope) Map() %s {", f.Q(packetImport, "OrderedMap"))
	f.Pf("m := make(%s, 0, %d)", f.Q(packetImport, "OrderedMap"), min(len(e.Fields), 8))
	for _, fd := range e.Fields {
		val := "e." + fd.Go
		switch {
		case fd.TypeName == "counts":
			val = "countsValue(e." + fd.Go + ")"
		case fd.Enum != nil: // the number, whatever a serializer makes of the named type
			val = "uint8(e." + fd.Go + ")"
		}
		kv := f.Q(packetImport, "KV") + "{Key: \"" + fd.Key + "\", Value: " + val + "}"
		if fd.Required {
			f.Pf("m = append(m, %s)", kv)
		} else {
			f.Pf("if %s { m = append(m, %s) }", envelopeSet(fd), kv)
		}
	}
	f.P("return m")
	f.P("}")
	f.P()
	f.P("// Decode decodes the envelope of the body mapping m into e. A mapping")
	f.P("// without the version key is ErrNotEnvelope; unknown keys are ignored.")
	f.P("// Nothing in e aliases m except Body. It walks m once.")
	f.P("func Decode(m map[string]any, e *Envelope) error {")
	f.P("*e = Envelope{}")
	f.Pf("if _, ok := m[%q]; !ok { return ErrNotEnvelope }", e.Fields[0].Key)
	f.P("var seen uint8 // the required keys found")
	f.P("for k, v := range m {")
	f.P("switch k {")
	req := 0
	var reqKeys []*spec.EnvelopeField
	for _, fd := range e.Fields {
		fn, arg := envelopeDecoder(fd)
		f.Pf("case %q:", fd.Key)
		if fd.Required {
			f.Pf("seen |= %d", 1<<req)
			req++
			reqKeys = append(reqKeys, fd)
		}
		if fn == "" {
			f.Pf("e.%s = v", fd.Go)
			continue
		}
		call := fn + "(v"
		if arg != "" {
			call += ", " + arg
		}
		call += ")"
		f.Pf("x, err := %s", call)
		f.Pf("if err != nil { return &Error{Key: %q, Err: err} }", fd.Key)
		if conv := envelopeGoType(fd, eq); conv != "uint64" && conv != "int64" && conv != "bool" && conv != "string" && conv != "[]string" && conv != "map[string]uint64" {
			f.Pf("e.%s = %s(x)", fd.Go, conv)
		} else {
			f.Pf("e.%s = x", fd.Go)
		}
	}
	f.P("}")
	f.P("}")
	for i, fd := range reqKeys {
		f.Pf("if seen&%d == 0 { return &Error{Key: %q, Err: ErrMissing} }", 1<<i, fd.Key)
	}
	f.Pf("if e.%s != Version { return &Error{Key: %q, Err: ErrVersion} }", e.Fields[0].Go, e.Fields[0].Key)
	f.P("return nil")
	f.P("}")
	return g.add(f)
}

// envelopeDocs writes the bus envelope's section of docs/wire.md.
func (g *generator) envelopeDocs(p func(string, ...any)) {
	e := g.s.Envelope
	if len(e.Fields) == 0 {
		return
	}
	p("")
	p("## Bus envelope")
	p("")
	p("The messaging patterns of package `bus` (pub/sub, request/reply, push/pull) send ordinary")
	p("RAET messages, road or lane, whose body mapping is an envelope: `%s` is 1, `%s` says what", e.Fields[0].Key, e.Fields[1].Key)
	p("it is (BusKind), and the other keys are present only when not zero, in this order. Any body")
	p("kind carries it (JSON, msgpack, CBOR); unknown keys are ignored. Lists and counts hold at")
	p("most %d items. Package `bus/envelope` is its codec.", e.MaxList)
	p("")
	p("| key | Go field | type | carried by | meaning |")
	p("|---|---|---|---|---|")
	for _, f := range e.Fields {
		typ := f.TypeName
		if f.Required {
			typ += ", required"
		}
		p("| `%s` | `%s` | %s | %s | %s |", f.Key, f.Go, typ, strings.Join(f.Kinds, ", "), cell(f.Doc))
	}
	p("")
	p("### Taking part from a reference (Python) estate")
	p("")
	p("A reference estate needs nothing but `transmit` of dict bodies after its join and allow.")
	p("Integers must be JSON (or msgpack) integers, not strings; `tm` is `time.time_ns()`.")
	p("")
	p("* Subscribe to a raet-go publisher: send `{\"bv\":1,\"ek\":2,\"id\":ID,\"fi\":[\"orders.>\"]}`")
	p("  (add `rm`/`rn` for a replay, `po`/`hw` for the policy; the publisher may give its own")
	p("  default policy, and caps `hw`). The answer is `subok` (`ek` 4), then")
	p("  a `pub` (`ek` 5) per matching message with `sq` (the publisher's number) and `ix` (the")
	p("  item's number in this subscription). Up to 16 are in flight at once, so they may arrive out")
	p("  of order: sort by `ix`. `drop`, `gap` and `cut` items (`ek` 6, 8, 7) say what was missed.")
	p("* Serve a raet-go subscriber (publish from Python): answer its `sub` (`ek` 2) with")
	p("  `{\"bv\":1,\"ek\":4,\"id\":ID,\"ep\":E,\"sq\":S}`, ID the `sub`'s, E a number fixed for your")
	p("  history (a new one says the numbers start again), S your last sequence number (0: none yet),")
	p("  or with `er` to refuse it. Then send each message that matches its filters as")
	p("  `{\"bv\":1,\"ek\":5,\"id\":ID,\"sj\":SUBJECT,\"sq\":N,\"ix\":I,\"tm\":T,\"bd\":{...}}`: N your")
	p("  sequence number (from 1, rising; the subscriber drops one it has had), I the item's number in")
	p("  this subscription (1, 2, 3, ... without holes: the subscriber holds later items until the")
	p("  missing one comes, and reports a gap only when many wait). Stop at its `unsub` (`ek` 3).")
	p("* Request: send `{\"bv\":1,\"ek\":9,\"id\":ID,\"sj\":\"svc.echo\",\"dl\":2000,\"bd\":{...}}`; the")
	p("  reply is `{\"bv\":1,\"ek\":10,\"id\":ID,\"bd\":{...}}`, or with `er`, the error; the reply")
	p("  carries no `tm`. To serve raet-go requesters, answer each `req` the same way.")
	p("* Pull jobs: send `{\"bv\":1,\"ek\":11,\"cr\":N}` to the pusher and answer each `job` (`ek` 12)")
	p("  with `{\"bv\":1,\"ek\":13,\"id\":ID,\"bd\":{...}}` when done.")
	p("* Presence: a raet-go node sends `hello` (`ek` 1) with `rq` true now and then; answer")
	p("  `{\"bv\":1,\"ek\":1,\"ep\":E,\"tm\":T}`, E a number fixed for the run (a new one says you")
	p("  restarted), T the `tm` of the hello (it measures the round trip). A peer that never answers")
	p("  is still served: it gets one hello when its session comes up, and more only from a node that")
	p("  talks to it (which reports it down after three unanswered ones, and goes on serving it),")
	p("  but a publisher releases the subscriptions of a peer that sends nothing for its")
	p("  `ReleaseSilent` (5 s by default): a subscriber answers the hellos, or sends `unsub`")
	p("  (`ek` 3, with `id`) when it leaves.")
	p("* Request and job ids: a raet-go requester or pusher puts a random number of its run in the")
	p("  high bits of `id`; an answer is matched by the whole `id`, so answer with it unchanged.")
}
