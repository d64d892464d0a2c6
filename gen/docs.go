package gen

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/raet-go/raet/spec"
)

// emitDocs writes docs/wire.md, the reference of all three head encodings,
// the flags, the enumerations and the lane page head.
func (g *generator) emitDocs() error {
	s := g.s
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("<!-- %s from %s. DO NOT EDIT. -->", Marker[3:], g.source)
	p("")
	p("# RAET wire reference")
	p("")
	p("Generated from `%s` by raetgen %s. Limits: a head is at most %d bytes; the reference sends",
		g.source, Version, s.Limits.MaxHeadSize)
	p("road datagrams of at most %d bytes; a message's coat is at most %d bytes in at most %d segments.",
		s.Limits.MaxPacketSize, s.Limits.MaxMessageSize, s.Limits.MaxSegmentCount)
	p("")
	p("A road packet is `head || coat || foot`. `pl` is the length of the whole datagram and `hl`")
	p("the length of the head including its terminator. Fields equal to their default are omitted")
	p("unless the table says they are always present.")
	p("")
	p("## Head fields")
	p("")
	p("In emission order (the order of the native and JSON heads).")
	p("")
	p("| key | Go field | type | default | meaning | native | JSON | binary |")
	p("|---|---|---|---|---|---|---|---|")
	for _, f := range s.Fields {
		typ := f.TypeName
		if f.Enum != nil {
			typ = "[" + f.Enum.Name + "](#" + strings.ToLower(f.Enum.Name) + ")"
		}
		goName := "`" + f.Go + "`"
		if f.Type == spec.TypeStr {
			goName = "(constant)"
		}
		p("| `%s` | %s | %s | `%s` | %s | %s | %s | %s |", f.Key, goName, typ, docDefault(f), cell(f.Doc),
			textDoc(f.Native), textDoc(f.JSON), binaryDoc(f))
	}
	if len(s.ReservedKeys) > 0 {
		p("")
		p("The keys %s are refused: the reference lists them as head keys but has no format for them",
			"`"+strings.Join(s.ReservedKeys, "`, `")+"`")
		p("and crashes on them.")
	}
	for _, f := range s.Fields {
		if len(f.Accept) > 0 {
			p("")
			p("A decoder accepts `%s` only with the value(s) %s.", f.Key, joinUints(f.Accept))
		}
	}
	p("")
	p("## Flags (`%s`)", s.Flags.Key)
	p("")
	p("One byte, %s.", s.Flags.Doc)
	p("")
	p("| bit | key | Go | meaning |")
	p("|---|---|---|---|")
	for _, k := range s.Flags.Order {
		for _, bt := range s.Flags.Bits {
			if bt.Key == k {
				p("| `%#02x` | `%s` | `Flag%s` | %s |", bt.Mask, bt.Key, bt.Go, cell(bt.Doc))
			}
		}
	}
	nh, jh, bh := s.Heads.Native, s.Heads.JSON, s.Heads.Binary
	p("")
	p("## Native head (hk=0)")
	p("")
	p("Starts with %s. One `key value` line per field (one space), lowercase hex values, lines", code(nh.Prefix))
	p("joined by %s, the head ended by %s. The leading fields %s come first, always, with `pl` and",
		code(nh.Separator), code(nh.Terminator), leadingList(s))
	p("`hl` fixed-width so that they can be patched once the coat and foot are known. The other")
	p("fields follow in emission order when they differ from their default. A decoder accepts the")
	p("non-leading lines in any order, refuses unknown and duplicate keys, non-ASCII bytes, a line")
	p("without exactly one space, and checks `hl` and `pl` against the real lengths.")
	p("")
	p("The leading fields, as the encoder first writes them (`pl` and `hl` are patched after):")
	p("")
	p("```")
	p("%s", strings.ReplaceAll(exampleNative(s), "\n", "\\n"))
	p("```")
	p("")
	p("## JSON head (hk=1)")
	p("")
	p("Starts with the exact bytes %s and ends with %s. A compact object (no white", code(jh.Prefix), code(jh.Terminator))
	p("space) with the keys in emission order; `pl` and `hl` are fixed-width hex *strings*, every")
	p("other integer a JSON number; `hk` is always present. A decoder refuses keys out of order,")
	p("wrong value types, white space, and unknown or duplicate keys.")
	p("")
	p("## Binary head (hk=2, raet-go)")
	p("")
	p("Our compact head, used only between raet-go estates that negotiated it. Big endian.")
	p("")
	p("| offset | width | content |")
	p("|---|---|---|")
	p("| %d | 1 | magic `%#02x` (not ASCII: never the start of a native or JSON head) |", bh.MagicOffset, bh.Magic)
	p("| %d | 1 | binary head format version, `%d` |", bh.VersionOffset, bh.Version)
	for _, f := range s.Fields {
		if f.Binary.Fixed() {
			p("| %d | %d | `%s`, %s |", *f.Binary.Offset, f.Binary.Width, f.Key, f.Doc)
		}
	}
	p("| %d | %d | presence bitmap: bit *i* (byte *i*/8, mask 1<<(*i*%%8)) set when field *i* below follows |",
		bh.BitmapOffset, s.BitmapBytes())
	p("")
	p("Then each present field, in bit order:")
	p("")
	p("| bit | key | encoding |")
	p("|---|---|---|")
	for _, f := range s.BitmapFields() {
		p("| %d | `%s` | %s |", f.Bit, f.Key, f.Binary.Encoding)
	}
	p("")
	p("`hk` is implied (2). A decoder refuses unknown bitmap bits, a wrong format version, and a")
	p("head whose fields do not end exactly at `hl`.")
	p("")
	p("## Enumerations")
	p("")
	p("The enumerations of head fields are Go types of package `codec`; the others are in package")
	p("`protocol`, with RAET's UDP port, %d (`protocol.DefaultPort`).", s.DefaultPort)
	for _, e := range s.Enums {
		p("")
		p("### %s", e.Name)
		p("")
		p("%s.", capitalize(e.Doc))
		p("")
		p("| value | name | Go | notes |")
		p("|---|---|---|---|")
		for _, v := range e.Values {
			var notes []string
			if v.Doc != "" {
				notes = append(notes, v.Doc)
			}
			if v.Unimplemented {
				notes = append(notes, "declared but never implemented by the reference")
			}
			if v.Ours {
				notes = append(notes, "raet-go extension")
			}
			p("| %d | `%s` | `%s` | %s |", v.Value, v.Name, enumConst(e, v), cell(strings.Join(notes, "; ")))
		}
	}
	l := s.Lane
	p("")
	p("## Lane page head")
	p("")
	p("A lane (Unix datagram) page is `head || body`, at most %d bytes. Every field is always", l.MaxPageSize)
	p("present, in this order, one `key value` line each, ended by %s.", code(l.Terminator))
	p("")
	p("| key | Go field | type | default | format | meaning |")
	p("|---|---|---|---|---|---|")
	for _, f := range l.Fields {
		format := f.Format
		if f.Width > 0 {
			format += fmt.Sprintf(", %d characters", f.Width)
		}
		p("| `%s` | `%s` | %s | `%s` | %s | %s |", f.Key, f.Go, f.TypeName, f.Default.Value, format, cell(f.Doc))
	}
	if len(s.Extensions) > 0 {
		p("")
		p("## raet-go extensions")
		p("")
		p("Outside the head fields, between raet-go estates that both advertise them in their join caps.")
		p("The reference ignores the caps it receives and never gets the rest.")
		p("")
		p("| name | what |")
		p("|---|---|")
		for _, e := range s.Extensions {
			p("| `%s` | %s |", e.Name, cell(e.Doc))
		}
	}
	p("")
	p("## Answers and retransmissions (both profiles)")
	p("")
	p("Nothing of this is on the wire: each end's timers are its own, so it holds with the reference too.")
	p("")
	p("* A raet-go receiver answers a message it has whole in the moment it completes it: `done`, or")
	p("  the `answers` of that moment to a session that bundles. A segmented message that still misses")
	p("  segments is answered with `resend` listing them as soon as its burst's last packet (`wf`)")
	p("  arrives, as the reference does. It never delays an answer beyond its owner's turn (the bound")
	p("  the sender's timer allows for is 10 ms) but for flow control: a whole message waiting for room")
	p("  in a full receive queue, or for a body decoded off the owner goroutine, is answered once")
	p("  delivered.")
	p("* A raet-go sender finds a lost message, or a lost done, from the dones of messages it sent")
	p("  after it (RFC 8985's RACK): lost when one sent three datagrams later is answered, or 9/8 of")
	p("  the round trip after it went once a later one is; it goes again at once. The last of a burst,")
	p("  with nothing after it, waits for the probe timeout: smoothed round trip + max(4 × variation,")
	p("  1 ms) + 10 ms, doubling to at least 500 ms while nothing answers. Before any message to the")
	p("  peer has been answered the timer is 1 s. A segmented message's losses are found by its")
	p("  receiver's `resend` lists; its timers, the sender's and the receiver's, are never shorter than")
	p("  200 ms (the receiver takes in the whole burst before it answers). No round trip is sampled from a message sent again")
	p("  (Karn's rule). `Counters.SpuriousRetransmits` counts copies whose done came sooner after the")
	p("  copy than any round trip took.")
	g.envelopeDocs(p)
	g.files = append(g.files, File{Path: "docs/wire.md", Content: b.Bytes()})
	return nil
}

// cell escapes text for a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func docDefault(f *spec.Field) string {
	switch f.Type {
	case spec.TypeStr:
		return f.Value.Str
	case spec.TypeF64:
		return strconv.FormatFloat(f.Value.Float, 'g', -1, 64)
	}
	return strconv.FormatUint(f.Value.Uint, 10)
}

func textDoc(e spec.Encoding) string {
	if presence(e) == spec.Never {
		return "never"
	}
	s := e.Format
	if e.Width > 0 {
		s += fmt.Sprintf(" (%d)", e.Width)
	}
	if presence(e) == spec.Always {
		s += ", always"
	}
	return s
}

func binaryDoc(f *spec.Field) string {
	switch {
	case f.Binary.Presence == spec.Never:
		return "never"
	case f.Binary.Fixed():
		return fmt.Sprintf("fixed @%d (%d B)", *f.Binary.Offset, f.Binary.Width)
	}
	return fmt.Sprintf("bit %d, %s", f.Bit, f.Binary.Encoding)
}

func leadingList(s *spec.Spec) string {
	var keys []string
	for _, f := range s.Fields {
		if f.Leading {
			keys = append(keys, "`"+f.Key+"`")
		}
	}
	return strings.Join(keys, ", ")
}

func code(s string) string { return "`" + strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s) + "`" }

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// exampleNative renders the leading fields the way the native encoder first
// writes them, from the spec alone.
func exampleNative(s *spec.Spec) string {
	var lines []string
	for _, f := range s.Fields {
		e := f.Native
		switch {
		case presence(e) == spec.Never:
		case f.Type == spec.TypeStr:
			lines = append(lines, f.Key+" "+f.Value.Str)
		case presence(e) == spec.Always:
			lines = append(lines, f.Key+" "+strings.Repeat("0", max(e.Width, 1)))
		}
	}
	return strings.Join(lines, s.Heads.Native.Separator) + s.Heads.Native.Terminator
}
