package gen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/raet-go/raet/spec"
)

// goType is the Go type of a field of the spec in package codec; qual
// prefixes codec identifiers ("" inside package codec, "codec." outside).
func goType(t spec.Type, e *spec.Enum, flags, qual string) string {
	switch t {
	case spec.TypeU8:
		return "uint8"
	case spec.TypeU16:
		return "uint16"
	case spec.TypeU32:
		return "uint32"
	case spec.TypeU64:
		return "uint64"
	case spec.TypeF64:
		return "float64"
	case spec.TypeStr:
		return "string"
	case spec.TypeFlags:
		return qual + flags
	case spec.TypeEnum:
		return qual + e.Name
	}
	panic(fmt.Sprintf("gen: no Go type for %v", t))
}

// defaultLit is the Go literal of a field's default.
func defaultLit(f *spec.Field) string {
	switch f.Type {
	case spec.TypeF64:
		return strconv.FormatFloat(f.Value.Float, 'g', -1, 64)
	case spec.TypeStr:
		return strconv.Quote(f.Value.Str)
	}
	return strconv.FormatUint(f.Value.Uint, 10)
}

// isZeroDefault reports whether a field's default is its Go zero value.
func isZeroDefault(f *spec.Field) bool {
	return f.Value.Uint == 0 && f.Value.Float == 0 && f.Value.Str == ""
}

// headFields are the fields stored in Head: every field but the constant
// strings.
func (g *generator) headFields() []*spec.Field {
	var out []*spec.Field
	for _, f := range g.s.Fields {
		if f.Type != spec.TypeStr {
			out = append(out, f)
		}
	}
	return out
}

func enumConst(e *spec.Enum, v *spec.EnumValue) string { return e.Name + v.Go }

func (g *generator) emitHead() error {
	s := g.s
	f := g.newFile("codec/head_gen.go", "codec")
	f.P("// Protocol limits.")
	f.P("const (")
	f.Pf("MaxHeadSize = %d // the largest head, in bytes", s.Limits.MaxHeadSize)
	f.Pf("MaxPacketSize = %d // the largest road datagram the reference sends", s.Limits.MaxPacketSize)
	f.Pf("MaxMessageSize = %d // the largest coat of one message", s.Limits.MaxMessageSize)
	f.Pf("MaxSegmentCount = %d // the most segments of one message", s.Limits.MaxSegmentCount)
	f.P(")")
	f.P()
	for _, e := range s.Enums {
		if s.HeadEnum(e) {
			g.emitEnum(f, e)
		}
	}
	g.emitFlags(f)
	fl := s.Flags
	f.P("// Head is a RAET road packet head. The zero value is not the default head:")
	f.P("// call Reset for that. The constant ri field is not stored.")
	f.P("type Head struct {")
	for _, fd := range g.headFields() {
		f.Pf("%s %s // %s: %s", fd.Go, goType(fd.Type, fd.Enum, fl.Go, ""), fd.Key, fd.Doc)
	}
	f.P("}")
	f.P()
	f.P("// Reset sets every field of h to its default.")
	f.P("func (h *Head) Reset() {")
	var inits []string
	for _, fd := range g.headFields() {
		if !isZeroDefault(fd) {
			inits = append(inits, fmt.Sprintf("%s: %s", fd.Go, defaultLit(fd)))
		}
	}
	f.Pf("*h = Head{%s}", strings.Join(inits, ", "))
	f.P("}")
	f.P()
	f.P("// Equal reports whether h and o hold the same values; NaN equals NaN.")
	f.P("func (h *Head) Equal(o *Head) bool {")
	var terms []string
	for _, fd := range g.headFields() {
		if fd.Type == spec.TypeF64 {
			terms = append(terms, fmt.Sprintf("(h.%[1]s == o.%[1]s || h.%[1]s != h.%[1]s && o.%[1]s != o.%[1]s)", fd.Go))
		} else {
			terms = append(terms, fmt.Sprintf("h.%[1]s == o.%[1]s", fd.Go))
		}
	}
	f.P("return ", strings.Join(terms, " &&\n"))
	f.P("}")
	f.P()
	for _, b := range fl.Bits {
		f.Pf("// %s reports the %s flag: %s.", b.Go, b.Key, b.Doc)
		f.Pf("func (h *Head) %s() bool { return h.%s&Flag%s != 0 }", b.Go, fieldByKey(s, fl.Key).Go, b.Go)
		f.P()
		f.Pf("// Set%s sets or clears the %s flag.", b.Go, b.Key)
		f.Pf("func (h *Head) Set%s(on bool) {", b.Go)
		f.Pf("if on { h.%[1]s |= Flag%[2]s } else { h.%[1]s &^= Flag%[2]s }", fieldByKey(s, fl.Key).Go, b.Go)
		f.P("}")
		f.P()
	}
	return g.add(f)
}

func fieldByKey(s *spec.Spec, key string) *spec.Field {
	if f := s.Field(key); f != nil {
		return f
	}
	panic("gen: no field " + key)
}

func (g *generator) emitEnum(f *goFile, e *spec.Enum) {
	f.Pf("// %s is %s.", e.Name, e.Doc)
	f.Pf("type %s uint8", e.Name)
	f.P()
	f.Pf("// The values of %s.", e.Name)
	f.P("const (")
	for _, v := range e.Values {
		var notes []string
		if v.Doc != "" {
			notes = append(notes, v.Doc)
		}
		if v.Unimplemented {
			notes = append(notes, "declared but never implemented by the reference")
		}
		if v.Ours {
			notes = append(notes, "a raet-go extension")
		}
		comment := ""
		if len(notes) > 0 {
			comment = " // " + strings.Join(notes, "; ")
		}
		f.Pf("%s %s = %d%s", enumConst(e, v), e.Name, v.Value, comment)
	}
	f.P(")")
	f.P()
	f.Pf("// String returns the name the spec gives v, or %s(n) for other values.", e.Name)
	f.Pf("func (v %s) String() string {", e.Name)
	f.P("switch v {")
	for _, v := range e.Values {
		f.Pf("case %s: return %q", enumConst(e, v), v.Name)
	}
	f.P("}")
	f.Pf("return %s(%q) + %s(uint64(v), 10) + \")\"", "string", e.Name+"(", f.Q("strconv", "FormatUint"))
	f.P("}")
	f.P()
	f.Pf("// Valid reports whether v is a value the spec declares.")
	f.Pf("func (v %s) Valid() bool {", e.Name)
	f.P("switch v {")
	var cs []string
	for _, v := range e.Values {
		cs = append(cs, enumConst(e, v))
	}
	f.Pf("case %s: return true", strings.Join(cs, ", "))
	f.P("}")
	f.P("return false")
	f.P("}")
	f.P()
	f.Pf("// Parse%[1]s returns the %[1]s named name.", e.Name)
	f.Pf("func Parse%[1]s(name string) (%[1]s, bool) {", e.Name)
	f.P("switch name {")
	for _, v := range e.Values {
		f.Pf("case %q: return %s, true", v.Name, enumConst(e, v))
	}
	f.P("}")
	f.P("return 0, false")
	f.P("}")
	f.P()
}

func (g *generator) emitFlags(f *goFile) {
	fl := g.s.Flags
	f.Pf("// %s is the flags byte %s: %s.", fl.Go, fl.Key, fl.Doc)
	f.Pf("type %s uint8", fl.Go)
	f.P()
	f.P("// The flags.")
	f.P("const (")
	for _, b := range fl.Bits {
		f.Pf("Flag%s %s = %#02x // %s: %s", b.Go, fl.Go, b.Mask, b.Key, b.Doc)
	}
	f.P(")")
	f.P()
	f.Pf("// String lists the set flags by key, most significant first (\"af|sf\"), or \"-\".")
	f.Pf("func (v %s) String() string {", fl.Go)
	f.P("var b []byte")
	for _, k := range fl.Order {
		for _, b := range fl.Bits {
			if b.Key == k {
				f.Pf("if v&Flag%s != 0 { b = append(b, %q...) }", b.Go, "|"+k)
			}
		}
	}
	f.P("if len(b) == 0 { return \"-\" }")
	f.P("return string(b[1:])")
	f.P("}")
	f.P()
}
