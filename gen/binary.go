package gen

import (
	"fmt"
	"strings"

	"github.com/raet-go/raet/spec"
)

// emitBinary writes codec/binary/header_gen.go: our compact head. Layout:
// a fixed prefix (magic, format version and the fixed fields at their
// offsets, big endian), the presence bitmap (bit i set when bitmap field i
// follows; field 0 is the low bit of the first byte), then each present field
// in bitmap order as uvarint, u8 or f64.
func (g *generator) emitBinary() error {
	s := g.s
	bh := s.Heads.Binary
	f := g.newFile("codec/binary/header_gen.go", "binary")
	kindConst := g.kindConst(f, bh.Kind)
	cq := func(name string) string { return f.Q(codecImport, name) }
	be := f.Q("encoding/binary", "BigEndian")
	bmBytes := s.BitmapBytes()
	fixedLen := bh.BitmapOffset + bmBytes

	f.P("const (")
	f.Pf("magic = %#02x // first byte; not ASCII, so never the start of a text head", bh.Magic)
	f.Pf("version = %d // binary head format version", bh.Version)
	f.Pf("bitmapOffset = %d", bh.BitmapOffset)
	f.Pf("fixedLen = %d // magic, version, fixed fields and bitmap", fixedLen)
	f.P(")")
	f.P()
	g.emitCodecType(f, kindConst, "binary (hk=2) RAET head of raet-go: fixed fields, a presence bitmap, then the present fields",
		"len(b) > 0 && b[0] == magic")

	// Append.
	f.P("// Append appends the binary head h to b. See codec.Codec.")
	f.Pf("func (Codec) Append(b []byte, h *%s) ([]byte, error) {", cq("Head"))
	for _, fd := range s.Fields {
		if fd.Binary.Fixed() && fd.Key != "hl" && fd.Binary.Width*8 < fd.Type.Bits() {
			f.Pf("if uint64(h.%s) >= 1<<%d {", fd.Go, 8*fd.Binary.Width)
			f.Pf("return b, &%s{Kind: %s, Field: %q, Offset: %d, Err: %s}", cq("Error"), kindConst, fd.Key, *fd.Binary.Offset, cq("ErrRange"))
			f.P("}")
		}
	}
	f.P("start := len(b)")
	prefix := make([]string, fixedLen)
	for i := range prefix {
		prefix[i] = "0"
	}
	prefix[bh.MagicOffset] = "magic"
	prefix[bh.VersionOffset] = "version"
	f.Pf("b = append(b, %s)", strings.Join(prefix, ", "))
	for _, fd := range s.Fields {
		if fd.Binary.Fixed() && fd.Key != "hl" {
			g.putFixed(f, fd, "b", "start+", "h."+fd.Go)
		}
	}
	for _, fd := range s.BitmapFields() {
		f.Pf("if %s {", notDefault(fd))
		f.Pf("b[start+bitmapOffset+%d] |= %#02x", fd.Bit/8, 1<<(fd.Bit%8))
		switch fd.Binary.Encoding {
		case "u8":
			f.Pf("b = append(b, byte(h.%s))", fd.Go)
		case "uvarint":
			f.Pf("b = %s(b, uint64(h.%s))", f.Q("encoding/binary", "AppendUvarint"), fd.Go)
		case "f64":
			f.Pf("b = %s.AppendUint64(b, %s(h.%s))", be, f.Q("math", "Float64bits"), fd.Go)
		}
		f.P("}")
	}
	hlf := fieldByKey(s, "hl")
	g.emitHeadLengthPatch(f, kindConst, "hl", func(hlExpr string) {
		g.putFixed(f, hlf, "b", "start+", hlExpr)
	})
	f.P("}")
	f.P()

	plf := fieldByKey(s, "pl")
	f.P("// SetPacketLength writes pl into the packet length field of an encoded head.")
	f.P("func (Codec) SetPacketLength(head []byte, pl int) error {")
	f.Pf("if len(head) < fixedLen { return &%s{Kind: %s, Field: \"pl\", Offset: len(head), Err: %s} }", cq("Error"), kindConst, cq("ErrShort"))
	f.Pf("if pl < 0 || pl >= 1<<%d { return &%s{Kind: %s, Field: \"pl\", Offset: %d, Err: %s} }", 8*plf.Binary.Width, cq("Error"), kindConst, *plf.Binary.Offset, cq("ErrRange"))
	g.putFixed(f, plf, "head", "", "pl")
	f.P("return nil")
	f.P("}")
	f.P()

	// Decode.
	f.P("func fail(field string, off int, err error) error {")
	f.Pf("return &%s{Kind: %s, Field: field, Offset: off, Err: err}", cq("Error"), kindConst)
	f.P("}")
	f.P()
	f.P("// Decode decodes the binary head at the start of the datagram b. See codec.Codec.")
	f.P("// It does not allocate unless it fails.")
	f.Pf("func (Codec) Decode(b []byte, h *%s) (int, error) {", cq("Head"))
	f.Pf("if len(b) == 0 || b[0] != magic { if len(b) == 0 { return 0, fail(\"\", 0, %s) }; return 0, fail(\"\", 0, %s) }", cq("ErrShort"), cq("ErrPrefix"))
	f.Pf("if len(b) < fixedLen { return 0, fail(\"\", len(b), %s) }", cq("ErrShort"))
	f.Pf("if b[%d] != version { return 0, fail(\"\", %d, %s) }", bh.VersionOffset, bh.VersionOffset, cq("ErrUnsupported"))
	f.P("h.Reset()")
	f.Pf("h.HeadKind = %s", kindConst)
	for _, fd := range s.Fields {
		if fd.Binary.Fixed() {
			f.Pf("h.%s = %s(%s)", fd.Go, goType(fd.Type, fd.Enum, s.Flags.Go, "codec."), getFixed(fd, "b"))
		}
	}
	f.P("hl := int(h.HeadLength)")
	f.Pf("if hl < fixedLen { return 0, fail(\"hl\", %d, %s) }", *hlf.Binary.Offset, cq("ErrHeadLength"))
	f.Pf("if hl > len(b) { return 0, fail(\"hl\", %d, %s) }", *hlf.Binary.Offset, cq("ErrShort"))
	f.P("p := b[:hl]")
	nbits := len(s.BitmapFields())
	for i := 0; i < bmBytes; i++ {
		used := nbits - 8*i
		if used >= 8 {
			continue
		}
		mask := byte(0xff) << used
		f.Pf("if p[bitmapOffset+%d]&%#02x != 0 { return 0, fail(\"\", bitmapOffset+%d, %s) }", i, mask, i, cq("ErrUnknownKey"))
	}
	f.P("pos := fixedLen")
	for _, fd := range s.BitmapFields() {
		f.Pf("if p[bitmapOffset+%d]&%#02x != 0 {", fd.Bit/8, 1<<(fd.Bit%8))
		switch fd.Binary.Encoding {
		case "u8":
			f.Pf("if pos >= hl { return 0, fail(%q, pos, %s) }", fd.Key, cq("ErrShort"))
			f.P("v := uint64(p[pos])")
			g.emitSetField(f, fd, kindConst, "pos")
			f.P("pos++")
		case "uvarint":
			f.Pf("v, n := %s(p[pos:])", f.Q("encoding/binary", "Uvarint"))
			f.Pf("if n == 0 { return 0, fail(%q, pos, %s) }", fd.Key, cq("ErrShort"))
			if fd.Type.Bits() < 64 {
				f.Pf("if n < 0 || v > %#x { return 0, fail(%q, pos, %s) }", fd.Type.Max(), fd.Key, cq("ErrValue"))
			} else {
				f.Pf("if n < 0 { return 0, fail(%q, pos, %s) }", fd.Key, cq("ErrValue"))
			}
			g.emitSetField(f, fd, kindConst, "pos")
			f.P("pos += n")
		case "f64":
			f.Pf("if hl-pos < 8 { return 0, fail(%q, pos, %s) }", fd.Key, cq("ErrShort"))
			f.Pf("h.%s = %s(%s.Uint64(p[pos:]))", fd.Go, f.Q("math", "Float64frombits"), be)
			f.P("pos += 8")
		}
		f.P("}")
	}
	f.Pf("if pos != hl { return 0, fail(\"hl\", pos, %s) }", cq("ErrHeadLength"))
	f.Pf("if int(h.PacketLength) != len(b) { return 0, fail(\"pl\", %d, %s) }", *plf.Binary.Offset, cq("ErrPacketLength"))
	f.P("return hl, nil")
	f.P("}")
	return g.add(f)
}

// putFixed writes the big-endian store of expr into a fixed field of buf,
// whose index expressions start with base.
func (g *generator) putFixed(f *goFile, fd *spec.Field, buf, base, expr string) {
	off, w := *fd.Binary.Offset, fd.Binary.Width
	for i := 0; i < w; i++ {
		shift := 8 * (w - 1 - i)
		if shift == 0 {
			f.Pf("%s[%s%d] = byte(%s)", buf, base, off+i, expr)
		} else {
			f.Pf("%s[%s%d] = byte(%s >> %d)", buf, base, off+i, expr, shift)
		}
	}
}

// getFixed is the uint64 expression reading a fixed field from buf.
func getFixed(fd *spec.Field, buf string) string {
	off, w := *fd.Binary.Offset, fd.Binary.Width
	var parts []string
	for i := 0; i < w; i++ {
		shift := 8 * (w - 1 - i)
		if shift == 0 {
			parts = append(parts, fmt.Sprintf("uint64(%s[%d])", buf, off+i))
		} else {
			parts = append(parts, fmt.Sprintf("uint64(%s[%d])<<%d", buf, off+i, shift))
		}
	}
	return strings.Join(parts, " | ")
}
