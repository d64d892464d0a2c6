package gen

import (
	"fmt"

	"github.com/raet-go/raet/spec"
)

// emitLane writes codec/lane/page_gen.go: the lane page head, every field
// always present in spec order, and its round-trip test.
func (g *generator) emitLane() error {
	l := g.s.Lane
	f := g.newFile("codec/lane/page_gen.go", "lane")
	cq := func(name string) string { return f.Q(codecImport, name) }
	f.Pf("const (")
	f.Pf("prefix = %q", l.Prefix)
	f.Pf("terminator = %q", l.Terminator)
	f.Pf("// MaxPageSize is the largest lane page, head and body.")
	f.Pf("MaxPageSize = %d", l.MaxPageSize)
	f.P(")")
	f.P()
	f.P("// Head is a lane page head. Reset gives the defaults.")
	f.P("type Head struct {")
	for _, fd := range l.Fields[1:] {
		f.Pf("%s %s // %s: %s", fd.Go, goType(fd.Type, fd.Enum, "", "codec."), fd.Key, fd.Doc)
	}
	f.P("}")
	f.P()
	f.P("// Reset sets every field of h to its default.")
	f.P("func (h *Head) Reset() {")
	f.P("*h = Head{}")
	for _, fd := range l.Fields[1:] {
		if fd.Value.Uint != 0 || fd.Value.Str != "" {
			if fd.Type == spec.TypeStr {
				f.Pf("h.%s = %q", fd.Go, fd.Value.Str)
			} else {
				f.Pf("h.%s = %d", fd.Go, fd.Value.Uint)
			}
		}
	}
	f.P("}")
	f.P()
	f.P("// Append appends the page head h to b. String fields must be non-empty")
	f.P("// ASCII without spaces or newlines, of the exact width where the spec sets one.")
	f.P("func Append(b []byte, h *Head) ([]byte, error) {")
	for _, fd := range l.Fields[1:] {
		switch {
		case fd.Type == spec.TypeStr:
			f.Pf("if err := checkString(h.%s, %d); err != nil { return b, &Error{Field: %q, Err: err} }", fd.Go, fd.Width, fd.Key)
		case fd.Format == "hexfixed" && fd.Type.Bits() > 4*fd.Width:
			f.Pf("if !%s(uint64(h.%s), %d) { return b, &Error{Field: %q, Err: %s} }", f.Q(wireImport, "FitsHex"), fd.Go, fd.Width, fd.Key, cq("ErrRange"))
		}
	}
	f.Pf("b = append(b, prefix...)")
	for i, fd := range l.Fields[1:] {
		f.Pf("b = append(b, %q...)", fd.Key+" ")
		switch fd.Format {
		case "str":
			f.Pf("b = append(b, h.%s...)", fd.Go)
		case "hex":
			f.Pf("b = %s(b, uint64(h.%s))", f.Q(wireImport, "AppendHex"), fd.Go)
		case "hexfixed":
			f.Pf("b = %s(b, uint64(h.%s), %d)", f.Q(wireImport, "AppendHexFixed"), fd.Go, fd.Width)
		}
		if i < len(l.Fields)-2 {
			f.P("b = append(b, '\\n')")
		}
	}
	f.P("return append(b, terminator...), nil")
	f.P("}")
	f.P()
	f.P("// Decode decodes the page head at the start of b into h and returns its")
	f.P("// length. Every field must be present once; the order is free, as in the")
	f.P("// reference.")
	f.P("func Decode(b []byte, h *Head) (int, error) {")
	f.Pf("if !%s(b, []byte(prefix)) { return 0, &Error{Field: %q, Err: %s} }", f.Q("bytes", "HasPrefix"), l.Fields[0].Key, cq("ErrPrefix"))
	f.Pf("end := %s(b, []byte(terminator))", f.Q("bytes", "Index"))
	f.Pf("if end < 0 { return 0, &Error{Offset: len(b), Err: %s} }", cq("ErrShort"))
	f.Pf("if i := %s(b[:end]); i >= 0 { return 0, &Error{Offset: i, Err: %s} }", f.Q(wireImport, "NonASCII"), cq("ErrNonASCII"))
	f.P("h.Reset()")
	f.P("var seen uint32")
	f.P("for pos := 0; pos < end; {")
	f.Pf("lineEnd := %s(b[pos:end], '\\n')", f.Q("bytes", "IndexByte"))
	f.P("if lineEnd < 0 { lineEnd = end } else { lineEnd += pos }")
	f.P("line := b[pos:lineEnd]")
	f.Pf("sp := %s(line, ' ')", f.Q("bytes", "IndexByte"))
	f.Pf("if sp < 0 || %s(line[sp+1:], ' ') >= 0 { return 0, &Error{Offset: pos, Err: %s} }", f.Q("bytes", "IndexByte"), cq("ErrSyntax"))
	f.P("key, val, at := line[:sp], line[sp+1:], pos+sp+1")
	f.P("var bit uint32")
	f.P("switch string(key) {")
	for i, fd := range l.Fields {
		f.Pf("case %q:", fd.Key)
		f.Pf("bit = %#x", 1<<i)
		switch {
		case i == 0:
			f.Pf("if string(val) != %q { return 0, &Error{Field: %q, Offset: at, Err: %s} }", fd.Value.Str, fd.Key, cq("ErrValue"))
		case fd.Type == spec.TypeStr:
			f.Pf("if err := checkString(string(val), %d); err != nil { return 0, &Error{Field: %q, Offset: at, Err: err} }", fd.Width, fd.Key)
			f.Pf("h.%s = string(val)", fd.Go)
		default:
			f.Pf("v, bad := %s(val, %d)", f.Q(wireImport, "ParseHex"), fd.Type.Bits())
			f.Pf("if bad >= 0 { return 0, &Error{Field: %q, Offset: at + bad, Err: %s} }", fd.Key, cq("ErrValue"))
			f.Pf("h.%s = %s(v)", fd.Go, goType(fd.Type, fd.Enum, "", "codec."))
		}
	}
	f.P("default:")
	f.Pf("return 0, &Error{Offset: pos, Err: %s}", cq("ErrUnknownKey"))
	f.P("}")
	f.Pf("if seen&bit != 0 { return 0, &Error{Field: string(key), Offset: pos, Err: %s} }", cq("ErrDuplicateKey"))
	f.P("seen |= bit")
	f.P("pos = lineEnd + 1")
	f.P("}")
	all := uint32(1)<<len(l.Fields) - 1
	f.Pf("if seen != %#x {", all)
	for i, fd := range l.Fields {
		f.Pf("if seen&%#x == 0 { return 0, &Error{Field: %q, Offset: end, Err: %s} }", 1<<i, fd.Key, cq("ErrMissing"))
	}
	f.P("}")
	f.P("return end + len(terminator), nil")
	f.P("}")
	f.P()
	f.P("// Fields lists the keys of the page head in order.")
	keys := ""
	for i, fd := range l.Fields {
		if i > 0 {
			keys += ", "
		}
		keys += fmt.Sprintf("%q", fd.Key)
	}
	f.Pf("var Fields = [...]string{%s}", keys)
	return g.add(f)
}
