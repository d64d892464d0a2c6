package gen

import (
	"fmt"
	"strconv"

	"github.com/raet-go/raet/spec"
)

// The native and JSON heads are both text: leading fields at fixed offsets,
// then optional fields in emission order. This file holds what their emitters
// share.

const (
	codecImport  = Module + "/codec"
	wireImport   = Module + "/codec/internal/wire"
	pyjsonImport = Module + "/internal/pyjson"
)

// textEnc returns the encoding of f in the native or JSON head.
func textEnc(f *spec.Field, json bool) spec.Encoding {
	if json {
		return f.JSON
	}
	return f.Native
}

// presence is the effective presence of an encoding.
func presence(e spec.Encoding) string {
	if e.Presence == "" {
		return spec.NonDefault
	}
	return e.Presence
}

// seenType returns the Go type for a bit set over all fields and reserved keys.
func (g *generator) seenType() string {
	if len(g.s.Fields) <= 32 {
		return "uint32"
	}
	return "uint64"
}

// requiredMask is the bit set of the fields an encoding always carries.
func (g *generator) requiredMask(json bool) (mask uint64, first string) {
	for i, f := range g.s.Fields {
		if presence(textEnc(f, json)) == spec.Always {
			mask |= 1 << i
			if first == "" {
				first = f.Key
			}
		}
	}
	return mask, first
}

// valueExpr is the uint64 expression of a head field's value to write,
// with hk replaced by the codec's own kind.
func valueExpr(f *spec.Field, kindConst string) string {
	if f.Key == "hk" {
		return "uint64(" + kindConst + ")"
	}
	return "uint64(h." + f.Go + ")"
}

// notDefault is the Go condition for a field differing from its default.
func notDefault(f *spec.Field) string {
	return "h." + f.Go + " != " + defaultLit(f)
}

// emitRangeChecks writes the checks that fixed-width values fit their width.
func (g *generator) emitRangeChecks(f *goFile, json bool, kindConst string) {
	for _, fd := range g.s.Fields {
		e := textEnc(fd, json)
		if (e.Format != "hexfixed" && e.Format != "hexstring") || fd.Key == "hl" {
			continue
		}
		if fd.Type.Bits() <= 4*e.Width {
			continue
		}
		f.Pf("if !%s(%s, %d) {", f.Q(wireImport, "FitsHex"), valueExpr(fd, kindConst), e.Width)
		f.Pf("return b, &%s{Kind: %s, Field: %q, Err: %s}", f.Q(codecImport, "Error"), kindConst, fd.Key, f.Q(codecImport, "ErrRange"))
		f.P("}")
	}
}

// emitSetField writes the assignment of the parsed uint64 v to a field, with
// the accept and head-kind checks. off is the Go expression of the value's
// offset.
func (g *generator) emitSetField(f *goFile, fd *spec.Field, kindConst, off string) {
	cErr := f.Q(codecImport, "Error")
	switch {
	case fd.Key == "hk":
		f.Pf("if v != uint64(%s) { return 0, &%s{Kind: %s, Field: %q, Offset: %s, Err: %s} }",
			kindConst, cErr, kindConst, fd.Key, off, f.Q(codecImport, "ErrHeadKind"))
		return
	case len(fd.Accept) > 0:
		cond := ""
		for i, a := range fd.Accept {
			if i > 0 {
				cond += " && "
			}
			cond += "v != " + strconv.FormatUint(a, 10)
		}
		f.Pf("if %s { return 0, &%s{Kind: %s, Field: %q, Offset: %s, Err: %s} }",
			cond, cErr, kindConst, fd.Key, off, f.Q(codecImport, "ErrUnsupported"))
	}
	f.Pf("h.%s = %s(v)", fd.Go, goType(fd.Type, fd.Enum, g.s.Flags.Go, "codec."))
	if fd.Key == "pl" || fd.Key == "hl" {
		f.Pf("%sAt = %s", fd.Key, off)
	}
}

// leadingOffsets simulates the encoder over the leading fields and returns
// the offset of each fixed-width value from the start of the head.
func (g *generator) leadingOffsets(json bool) (map[string]int, error) {
	offs := map[string]int{}
	pos := 0
	for i, fd := range g.s.Fields {
		if !fd.Leading {
			break
		}
		e := textEnc(fd, json)
		if json {
			if i == 0 {
				pos++ // {
			} else {
				pos++ // ,
			}
			pos += len(fd.Key) + 3 // "key":
			if e.Format == "hexstring" || e.Format == "str" {
				pos++ // opening quote
			}
		} else {
			if i > 0 {
				pos += len(g.s.Heads.Native.Separator)
			}
			pos += len(fd.Key) + 1
		}
		offs[fd.Key] = pos
		switch e.Format {
		case "hexfixed", "hexstring":
			pos += e.Width
		case "str":
			pos += len(fd.Value.Str)
		default:
			return nil, fmt.Errorf("raetgen: leading field %s must have a fixed width", fd.Key)
		}
		if json && (e.Format == "hexstring" || e.Format == "str") {
			pos++ // closing quote
		}
	}
	return offs, nil
}

// emitSetPacketLength writes the SetPacketLength method of a text codec.
func (g *generator) emitSetPacketLength(f *goFile, offs map[string]int, width int, kindConst string) {
	off := offs["pl"]
	f.P("// SetPacketLength writes pl into the packet length field of an encoded head.")
	f.P("func (Codec) SetPacketLength(head []byte, pl int) error {")
	f.Pf("if len(head) < %d { return &%s{Kind: %s, Field: \"pl\", Offset: len(head), Err: %s} }",
		off+width, f.Q(codecImport, "Error"), kindConst, f.Q(codecImport, "ErrShort"))
	f.Pf("if pl < 0 || !%s(uint64(pl), %d) { return &%s{Kind: %s, Field: \"pl\", Offset: %d, Err: %s} }",
		f.Q(wireImport, "FitsHex"), width, f.Q(codecImport, "Error"), kindConst, off, f.Q(codecImport, "ErrRange"))
	f.Pf("%s(head[%d:%d], uint64(pl))", f.Q(wireImport, "PutHexFixed"), off, off+width)
	f.P("return nil")
	f.P("}")
	f.P()
}

// emitFail writes the error helper of a text codec: an error at off is
// reported as a non-ASCII byte when one comes first, since that is its cause.
func (g *generator) emitFail(f *goFile, kindConst string) {
	f.P("// fail returns the error for a problem at off in b; a non-ASCII byte at or")
	f.P("// before off is reported instead, as the cause.")
	f.P("func fail(b []byte, field string, off int, err error) error {")
	f.P("if i := ", f.Q(wireImport, "NonASCII"), "(b[:min(off+1, len(b))]); i >= 0 {")
	f.Pf("return &%s{Kind: %s, Offset: i, Err: %s}", f.Q(codecImport, "Error"), kindConst, f.Q(codecImport, "ErrNonASCII"))
	f.P("}")
	f.Pf("return &%s{Kind: %s, Field: field, Offset: off, Err: err}", f.Q(codecImport, "Error"), kindConst)
	f.P("}")
	f.P()
	f.P("// truncated is the error for a head that ends at off: too long when the")
	f.P("// datagram goes on past the head size limit, short otherwise.")
	f.P("func truncated(b []byte, off int) error {")
	f.Pf("if len(b) > %s { return fail(b, \"\", %s, %s) }", f.Q(codecImport, "MaxHeadSize"), f.Q(codecImport, "MaxHeadSize"), f.Q(codecImport, "ErrTooLong"))
	f.Pf("return fail(b, \"\", off, %s)", f.Q(codecImport, "ErrShort"))
	f.P("}")
	f.P()
}

// emitLengthChecks writes the final checks of a text decoder: required
// fields, head length and packet length. hl is the real head length.
func (g *generator) emitLengthChecks(f *goFile, json bool, kindConst string) {
	mask, _ := g.requiredMask(json)
	f.Pf("if seen&%#x != %#x {", mask, mask)
	for i, fd := range g.s.Fields {
		if mask&(1<<i) != 0 {
			f.Pf("if seen&%#x == 0 { return 0, fail(b, %q, hl, %s) }", uint64(1)<<i, fd.Key, f.Q(codecImport, "ErrMissing"))
		}
	}
	f.P("}")
	f.Pf("if int(h.HeadLength) != hl { return 0, fail(b, \"hl\", hlAt, %s) }", f.Q(codecImport, "ErrHeadLength"))
	f.Pf("if int(h.PacketLength) != len(b) { return 0, fail(b, \"pl\", plAt, %s) }", f.Q(codecImport, "ErrPacketLength"))
	f.P("return hl, nil")
}

// emitRegister writes the codec's registration and its Kind and Detect.
func (g *generator) emitCodecType(f *goFile, kindConst, doc string, detect string) {
	f.Pf("// Codec is the %s. Its zero value is ready to use.", doc)
	f.P("type Codec struct{}")
	f.P()
	f.Pf("func init() { %s(Codec{}) }", f.Q(codecImport, "Register"))
	f.P()
	f.P("// Kind returns the head kind of this codec.")
	f.Pf("func (Codec) Kind() %s { return %s }", f.Q(codecImport, "HeadKind"), kindConst)
	f.P()
	f.P("// Detect reports whether b starts like a head of this kind.")
	f.Pf("func (Codec) Detect(b []byte) bool { return %s }", detect)
	f.P()
}

// kindConst is the qualified HeadKind constant of the head kind named kind.
func (g *generator) kindConst(f *goFile, kind string) string {
	e := g.s.Enum("HeadKind")
	return f.Q(codecImport, enumConst(e, e.Lookup(kind)))
}
