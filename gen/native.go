package gen

import (
	"fmt"
	"strconv"

	"github.com/raet-go/raet/spec"
)

// emitNative writes codec/native/header_gen.go: the native (ASCII) head.
func (g *generator) emitNative() error {
	s := g.s
	nh := s.Heads.Native
	f := g.newFile("codec/native/header_gen.go", "native")
	kindConst := g.kindConst(f, nh.Kind)
	offs, err := g.leadingOffsets(false)
	if err != nil {
		return err
	}
	f.Pf("const prefix = %q", nh.Prefix)
	f.P()
	g.emitCodecType(f, kindConst, "native (hk=0) RAET head: \"key value\" lines joined by \\n and ended by a blank line",
		f.Q("bytes", "HasPrefix")+"(b, []byte(prefix))")

	// Append.
	f.P("// Append appends the native head h to b. See codec.Codec.")
	f.Pf("func (Codec) Append(b []byte, h *%s) ([]byte, error) {", f.Q(codecImport, "Head"))
	g.emitRangeChecks(f, false, kindConst)
	f.P("start := len(b)")
	for i, fd := range s.Fields {
		e := fd.Native
		p := presence(e)
		if p == spec.Never {
			continue
		}
		lead := fd.Key + " "
		if i > 0 {
			lead = nh.Separator + lead
		}
		write := func() {
			f.Pf("b = append(b, %q...)", lead)
			switch e.Format {
			case "str":
				f.Pf("b = append(b, %q...)", fd.Value.Str)
			case "hexfixed":
				v := valueExpr(fd, kindConst)
				if fd.Key == "hl" {
					v = "0"
				}
				f.Pf("b = %s(b, %s, %d)", f.Q(wireImport, "AppendHexFixed"), v, e.Width)
			case "hex":
				f.Pf("b = %s(b, %s)", f.Q(wireImport, "AppendHex"), valueExpr(fd, kindConst))
			case "float6":
				f.Pf("b = %s(b, h.%s)", f.Q(wireImport, "AppendFloat6"), fd.Go)
			}
		}
		if p == spec.Always || fd.Key == "hk" {
			write()
		} else {
			f.Pf("if %s {", notDefault(fd))
			write()
			f.P("}")
		}
	}
	f.Pf("b = append(b, %q...)", nh.Terminator)
	g.emitHeadLengthPatch(f, kindConst, "hl", func(hlExpr string) {
		f.Pf("%s(b[start+%d:start+%d], uint64(%s))", f.Q(wireImport, "PutHexFixed"), offs["hl"], offs["hl"]+fieldByKey(s, "hl").Native.Width, hlExpr)
	})
	f.P("}")
	f.P()

	g.emitSetPacketLength(f, offs, fieldByKey(s, "pl").Native.Width, kindConst)
	g.emitFail(f, kindConst)

	// Decode.
	f.P("// Decode decodes the native head at the start of the datagram b. See codec.Codec.")
	f.Pf("func (Codec) Decode(b []byte, h *%s) (int, error) {", f.Q(codecImport, "Head"))
	f.Pf("if !%s(b, []byte(prefix)) {", f.Q("bytes", "HasPrefix"))
	f.Pf("if len(b) < len(prefix) && %s([]byte(prefix), b) { return 0, truncated(b, len(b)) }", f.Q("bytes", "HasPrefix"))
	f.Pf("return 0, fail(b, %q, 0, %s)", s.Fields[0].Key, f.Q(codecImport, "ErrPrefix"))
	f.P("}")
	f.Pf("lim := min(len(b), %s)", f.Q(codecImport, "MaxHeadSize"))
	f.Pf("end := %s(b[:lim], []byte(%q))", f.Q("bytes", "Index"), nh.Terminator)
	f.P("if end < 0 { return 0, truncated(b, lim) }")
	f.Pf("hl := end + %d", len(nh.Terminator))
	f.P("h.Reset()")
	f.Pf("h.HeadKind = %s", kindConst)
	f.Pf("var seen %s", g.seenType())
	f.P("plAt, hlAt := 0, 0")
	f.P("for pos := 0; pos < end; {")
	f.Pf("lineEnd := %s(b[pos:end], %q)", f.Q("bytes", "IndexByte"), nh.Separator[0])
	f.P("if lineEnd < 0 { lineEnd = end } else { lineEnd += pos }")
	f.P("line := b[pos:lineEnd]")
	f.Pf("sp := %s(line, ' ')", f.Q("bytes", "IndexByte"))
	f.Pf("if sp < 0 { return 0, fail(b, \"\", pos, %s) }", f.Q(codecImport, "ErrSyntax"))
	f.Pf("if extra := %s(line[sp+1:], ' '); extra >= 0 { return 0, fail(b, \"\", pos+sp+1+extra, %s) }", f.Q("bytes", "IndexByte"), f.Q(codecImport, "ErrSyntax"))
	f.P("key, val, at := line[:sp], line[sp+1:], pos+sp+1")
	f.P("var bit ", g.seenType())
	f.P("switch string(key) {")
	for i, fd := range s.Fields {
		f.Pf("case %q:", fd.Key)
		f.Pf("bit = %#x", uint64(1)<<i)
		g.emitNativeValue(f, fd, kindConst)
	}
	if len(s.ReservedKeys) > 0 {
		f.Pf("case %s:", quoteList(s.ReservedKeys))
		f.Pf("return 0, fail(b, string(key), pos, %s)", f.Q(codecImport, "ErrUnknownKey"))
	}
	f.P("default:")
	f.Pf("return 0, fail(b, \"\", pos, %s)", f.Q(codecImport, "ErrUnknownKey"))
	f.P("}")
	f.Pf("if seen&bit != 0 { return 0, fail(b, string(key), pos, %s) }", f.Q(codecImport, "ErrDuplicateKey"))
	f.P("seen |= bit")
	f.P("pos = lineEnd + 1")
	f.P("}")
	g.emitLengthChecks(f, false, kindConst)
	f.P("}")
	return g.add(f)
}

// emitNativeValue writes the parsing of one native value (val, at offset at).
func (g *generator) emitNativeValue(f *goFile, fd *spec.Field, kindConst string) {
	cErr := f.Q(codecImport, "ErrValue")
	switch fd.Native.Format {
	case "str":
		f.Pf("if string(val) != %q { return 0, fail(b, %q, at, %s) }", fd.Value.Str, fd.Key, cErr)
	case "hex", "hexfixed":
		f.Pf("v, bad := %s(val, %d)", f.Q(wireImport, "ParseHex"), fd.Type.Bits())
		f.Pf("if bad >= 0 { return 0, fail(b, %q, at+bad, %s) }", fd.Key, cErr)
		g.emitSetField(f, fd, kindConst, "at")
	case "float6":
		f.Pf("v, ok := %s(val)", f.Q(wireImport, "ParseFloat6"))
		f.Pf("if !ok { return 0, fail(b, %q, at, %s) }", fd.Key, cErr)
		f.Pf("h.%s = v", fd.Go)
	default:
		panic(fmt.Sprintf("gen: native format %q", fd.Native.Format))
	}
}

// emitHeadLengthPatch writes the end of an Append: the head size check, the
// patch of the head length field and the return.
func (g *generator) emitHeadLengthPatch(f *goFile, kindConst, key string, patch func(hlExpr string)) {
	f.P("n := len(b) - start")
	f.Pf("if n > %s {", f.Q(codecImport, "MaxHeadSize"))
	f.Pf("return b[:start], &%s{Kind: %s, Field: %q, Offset: %s, Err: %s}",
		f.Q(codecImport, "Error"), kindConst, key, f.Q(codecImport, "MaxHeadSize"), f.Q(codecImport, "ErrTooLong"))
	f.P("}")
	patch("n")
	f.Pf("h.HeadLength = %s(n)", goType(fieldByKey(g.s, key).Type, nil, "", ""))
	f.Pf("h.HeadKind = %s", kindConst)
	f.P("return b, nil")
}

func quoteList(keys []string) string {
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		out += strconv.Quote(k)
	}
	return out
}
