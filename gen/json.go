package gen

import (
	"fmt"

	"github.com/raet-go/raet/spec"
)

// emitJSON writes codec/json/header_gen.go: the JSON head, built and read by
// hand so that its bytes are exactly the reference's (key order, compact
// separators, hex strings for pl and hl, numbers elsewhere).
func (g *generator) emitJSON() error {
	s := g.s
	jh := s.Heads.JSON
	f := g.newFile("codec/json/header_gen.go", "json")
	kindConst := g.kindConst(f, jh.Kind)
	offs, err := g.leadingOffsets(true)
	if err != nil {
		return err
	}
	f.Pf("const prefix = %q", jh.Prefix)
	f.P()
	g.emitCodecType(f, kindConst, "JSON (hk=1) RAET head: a compact JSON object in the reference's key order, ended by \\r\\n\\r\\n",
		f.Q("bytes", "HasPrefix")+"(b, []byte(prefix))")

	f.P("// Append appends the JSON head h to b. See codec.Codec.")
	f.Pf("func (Codec) Append(b []byte, h *%s) ([]byte, error) {", f.Q(codecImport, "Head"))
	g.emitRangeChecks(f, true, kindConst)
	f.P("start := len(b)")
	for i, fd := range s.Fields {
		e := fd.JSON
		p := presence(e)
		if p == spec.Never {
			continue
		}
		sep := ","
		if i == 0 {
			sep = "{"
		}
		lead := fmt.Sprintf("%s%q:", sep, fd.Key)
		write := func() {
			switch e.Format {
			case "str":
				f.Pf("b = append(b, %q...)", lead+fmt.Sprintf("%q", fd.Value.Str))
			case "hexstring":
				v := valueExpr(fd, kindConst)
				if fd.Key == "hl" {
					v = "0"
				}
				f.Pf("b = append(b, %q...)", lead+`"`)
				f.Pf("b = %s(b, %s, %d)", f.Q(wireImport, "AppendHexFixed"), v, e.Width)
				f.P("b = append(b, '\"')")
			case "number":
				f.Pf("b = append(b, %q...)", lead)
				f.Pf("b = %s(b, %s, 10)", f.Q("strconv", "AppendUint"), valueExpr(fd, kindConst))
			case "float":
				f.Pf("b = append(b, %q...)", lead)
				f.Pf("b = %s(b, h.%s, 64)", f.Q(pyjsonImport, "AppendFloat"), fd.Go)
			}
		}
		if p == spec.Always {
			write()
		} else {
			f.Pf("if %s {", notDefault(fd))
			write()
			f.P("}")
		}
	}
	f.Pf("b = append(b, %q...)", "}"+jh.Terminator)
	g.emitHeadLengthPatch(f, kindConst, "hl", func(hlExpr string) {
		f.Pf("%s(b[start+%d:start+%d], uint64(%s))", f.Q(wireImport, "PutHexFixed"), offs["hl"], offs["hl"]+fieldByKey(s, "hl").JSON.Width, hlExpr)
	})
	f.P("}")
	f.P()

	g.emitSetPacketLength(f, offs, fieldByKey(s, "pl").JSON.Width, kindConst)
	g.emitFail(f, kindConst)

	cq := func(name string) string { return f.Q(codecImport, name) }
	f.P("// Decode decodes the JSON head at the start of the datagram b. See codec.Codec.")
	f.P("// It accepts exactly the compact form the reference writes: no white space,")
	f.P("// keys in the spec's order, hex strings and numbers where the spec says.")
	f.Pf("func (Codec) Decode(b []byte, h *%s) (int, error) {", cq("Head"))
	f.Pf("if !%s(b, []byte(prefix)) {", f.Q("bytes", "HasPrefix"))
	f.Pf("if len(b) < len(prefix) && %s([]byte(prefix), b) { return 0, truncated(b, len(b)) }", f.Q("bytes", "HasPrefix"))
	f.Pf("return 0, fail(b, %q, 0, %s)", s.Fields[0].Key, cq("ErrPrefix"))
	f.P("}")
	f.Pf("p := b[:min(len(b), %s)]", cq("MaxHeadSize"))
	f.P("h.Reset()")
	f.Pf("h.HeadKind = %s", kindConst)
	f.Pf("var seen %s", g.seenType())
	f.P("plAt, hlAt, last := 0, 0, -1")
	f.P("pos := 1")
	f.P("for {")
	f.P("if pos >= len(p) { return 0, truncated(b, pos) }")
	f.Pf("if p[pos] != '\"' { return 0, fail(b, \"\", pos, %s) }", cq("ErrSyntax"))
	f.Pf("kl := %s(p[pos+1:], '\"')", f.Q("bytes", "IndexByte"))
	f.P("if kl < 0 { return 0, truncated(b, len(p)) }")
	f.P("key, keyAt := p[pos+1:pos+1+kl], pos")
	f.P("pos += kl + 2")
	f.P("if pos >= len(p) { return 0, truncated(b, pos) }")
	f.Pf("if p[pos] != ':' { return 0, fail(b, \"\", pos, %s) }", cq("ErrSyntax"))
	f.P("pos++")
	f.P("at := pos")
	f.P("idx := -1")
	f.P("switch string(key) {")
	for i, fd := range s.Fields {
		f.Pf("case %q:", fd.Key)
		f.Pf("idx = %d", i)
		g.emitJSONValue(f, fd, kindConst)
	}
	if len(s.ReservedKeys) > 0 {
		f.Pf("case %s:", quoteList(s.ReservedKeys))
		f.Pf("return 0, fail(b, string(key), keyAt, %s)", cq("ErrUnknownKey"))
	}
	f.P("default:")
	f.Pf("if i := %s(key); i >= 0 { return 0, fail(b, \"\", keyAt+1+i, %s) }", f.Q(wireImport, "NonASCII"), cq("ErrNonASCII"))
	f.Pf("return 0, fail(b, \"\", keyAt, %s)", cq("ErrUnknownKey"))
	f.P("}")
	f.Pf("if seen&(1<<idx) != 0 { return 0, fail(b, string(key), keyAt, %s) }", cq("ErrDuplicateKey"))
	f.Pf("if idx < last { return 0, fail(b, string(key), keyAt, %s) }", cq("ErrOrder"))
	f.P("seen |= 1 << idx")
	f.P("last = idx")
	f.P("if pos >= len(p) { return 0, truncated(b, pos) }")
	f.P("if p[pos] == ',' { pos++; continue }")
	f.P("if p[pos] == '}' { pos++; break }")
	f.Pf("return 0, fail(b, \"\", pos, %s)", cq("ErrSyntax"))
	f.P("}")
	f.Pf("const term = %q", jh.Terminator)
	f.Pf("if !%s(p[pos:], []byte(term)) {", f.Q("bytes", "HasPrefix"))
	f.Pf("if len(p)-pos < len(term) && %s([]byte(term), p[pos:]) { return 0, truncated(b, len(p)) }", f.Q("bytes", "HasPrefix"))
	f.Pf("return 0, fail(b, \"\", pos, %s)", cq("ErrSyntax"))
	f.P("}")
	f.P("hl := pos + len(term)")
	g.emitLengthChecks(f, true, kindConst)
	f.P("}")
	return g.add(f)
}

// emitJSONValue writes the parsing of one JSON value at p[pos:]; it leaves pos
// after the value.
func (g *generator) emitJSONValue(f *goFile, fd *spec.Field, kindConst string) {
	cq := func(name string) string { return f.Q(codecImport, name) }
	switch fd.JSON.Format {
	case "str":
		lit := fmt.Sprintf("%q", fd.Value.Str)
		f.Pf("if !%s(p[pos:], []byte(%q)) {", f.Q("bytes", "HasPrefix"), lit)
		f.Pf("if pos < len(p) && p[pos] != '\"' { return 0, fail(b, %q, at, %s) }", fd.Key, cq("ErrType"))
		f.Pf("return 0, fail(b, %q, at, %s)", fd.Key, cq("ErrValue"))
		f.P("}")
		f.Pf("pos += %d", len(lit))
	case "hexstring":
		f.Pf("if pos >= len(p) || p[pos] != '\"' { return 0, fail(b, %q, at, %s) }", fd.Key, cq("ErrType"))
		f.Pf("vl := %s(p[pos+1:], '\"')", f.Q("bytes", "IndexByte"))
		f.P("if vl < 0 { return 0, truncated(b, len(p)) }")
		f.Pf("v, bad := %s(p[pos+1:pos+1+vl], %d)", f.Q(wireImport, "ParseHex"), fd.Type.Bits())
		f.Pf("if bad >= 0 { return 0, fail(b, %q, pos+1+bad, %s) }", fd.Key, cq("ErrValue"))
		f.P("pos += vl + 2")
		g.emitSetField(f, fd, kindConst, "at")
	case "number":
		f.Pf("n := %s(p[pos:])", f.Q(wireImport, "ScanDecimal"))
		f.Pf("if n == 0 || %s(p[pos:]) != n { return 0, fail(b, %q, at, %s) }", f.Q(pyjsonImport, "NumberLen"), fd.Key, cq("ErrType"))
		f.Pf("v, bad := %s(p[pos:pos+n], %d)", f.Q(wireImport, "ParseDecimal"), fd.Type.Bits())
		f.Pf("if bad >= 0 { return 0, fail(b, %q, pos+bad, %s) }", fd.Key, cq("ErrValue"))
		f.P("pos += n")
		g.emitSetField(f, fd, kindConst, "at")
	case "float":
		f.Pf("n := %s(p[pos:])", f.Q(pyjsonImport, "NumberLen"))
		f.Pf("if n == 0 { return 0, fail(b, %q, at, %s) }", fd.Key, cq("ErrType"))
		f.Pf("v, ok := %s(p[pos:pos+n])", f.Q(wireImport, "ParseFloat"))
		f.Pf("if !ok { return 0, fail(b, %q, at, %s) }", fd.Key, cq("ErrValue"))
		f.P("pos += n")
		f.Pf("h.%s = v", fd.Go)
	default:
		panic(fmt.Sprintf("gen: json format %q", fd.JSON.Format))
	}
}
