package spec

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// validate checks the whole spec and derives the computed values (types,
// defaults, flag masks, bitmap bits). Problems go to p.errs.
func (p *parser) validate(s *Spec) {
	if s.Version != 1 {
		p.errorf(0, "version", "unsupported spec version %d (want 1)", s.Version)
	}
	if s.DefaultPort == 0 {
		p.errorf(0, "default_port", "missing (RAET's UDP port, 1 to 65535)")
	}
	p.validateLimits(s)
	p.validateEnums(s)
	p.validateFlags(s)
	p.validateFields(s)
	p.validateHeads(s)
	p.validateBinary(s)
	p.validateLane(s)
	p.validateEnvelope(s)
}

func (p *parser) validateLimits(s *Spec) {
	l := s.Limits
	if l.MaxHeadSize <= 0 || l.MaxPacketSize <= 0 || l.MaxMessageSize <= 0 || l.MaxSegmentCount <= 0 {
		p.errorf(0, "limits", "every limit must be set and positive")
	}
}

func (p *parser) validateEnums(s *Spec) {
	names := map[string]bool{}
	for _, e := range s.Enums {
		if !isGoIdent(e.Name) {
			p.errorf(e.Line, e.Name, "enum name must be an exported Go identifier")
		}
		if names[e.Name] {
			p.errorf(e.Line, e.Name, "duplicate enum")
		}
		names[e.Name] = true
		if len(e.Values) == 0 {
			p.errorf(e.Line, e.Name, "enum has no values")
		}
		vn, vv, vg := map[string]bool{}, map[uint64]bool{}, map[string]bool{}
		for _, v := range e.Values {
			where := e.Name + "." + v.Name
			switch {
			case v.Name == "":
				p.errorf(v.Line, e.Name, "enum value without a name")
			case vn[v.Name]:
				p.errorf(v.Line, where, "duplicate enum value name")
			case vv[v.Value]:
				p.errorf(v.Line, where, "duplicate enum value %d", v.Value)
			case !isGoIdent(v.Go) || vg[v.Go]:
				p.errorf(v.Line, where, "go name %q must be a unique exported Go identifier", v.Go)
			case v.Value > 255:
				p.errorf(v.Line, where, "enum value %d does not fit in a byte", v.Value)
			}
			vn[v.Name], vv[v.Value], vg[v.Go] = true, true, true
		}
	}
}

func (p *parser) validateFlags(s *Spec) {
	f := &s.Flags
	if len(f.Order) == 0 || len(f.Order) > 8 {
		p.errorf(0, "flags", "order must list 1 to 8 flags, got %d", len(f.Order))
	}
	pos := map[string]int{}
	for i, k := range f.Order {
		if _, dup := pos[k]; dup {
			p.errorf(0, "flags", "flag %q appears twice in order", k)
		}
		pos[k] = i
	}
	seen := map[string]bool{}
	for _, b := range f.Bits {
		if !isKey(b.Key) {
			p.errorf(b.Line, b.Key, "flag key must be two lowercase letters")
		}
		if seen[b.Key] {
			p.errorf(b.Line, b.Key, "duplicate flag")
		}
		seen[b.Key] = true
		if !isGoIdent(b.Go) {
			p.errorf(b.Line, b.Key, "go name %q is not an exported Go identifier", b.Go)
		}
		i, ok := pos[b.Key]
		if !ok {
			p.errorf(b.Line, b.Key, "flag is missing from flags.order")
			continue
		}
		b.Mask = uint8(0x80 >> i)
	}
	for _, k := range f.Order {
		if !seen[k] {
			p.errorf(0, "flags", "flag %q in order has no entry in bits", k)
		}
	}
}

var nativeFormats = map[string]bool{"hex": true, "hexfixed": true, "float6": true, "str": true}
var jsonFormats = map[string]bool{"number": true, "hexstring": true, "float": true, "str": true}
var presences = map[string]bool{"": true, Always: true, NonDefault: true, Never: true}

func (p *parser) validateFields(s *Spec) {
	keys, gos := map[string]bool{}, map[string]bool{}
	for _, b := range s.Flags.Bits {
		keys[b.Key] = true
	}
	for _, k := range s.ReservedKeys {
		keys[k] = true
	}
	leadingDone := false
	var flagsField *Field
	for _, f := range s.Fields {
		if !isKey(f.Key) {
			p.errorf(f.Line, f.Key, "field key must be two lowercase letters")
		}
		if keys[f.Key] {
			p.errorf(f.Line, f.Key, "duplicate key (a field, flag or reserved key already uses it)")
		}
		keys[f.Key] = true
		if !isGoIdent(f.Go) || gos[f.Go] {
			p.errorf(f.Line, f.Key, "go name %q must be a unique exported Go identifier", f.Go)
		}
		gos[f.Go] = true
		if f.Leading && leadingDone {
			p.errorf(f.Line, f.Key, "leading fields must come first")
		}
		if !f.Leading {
			leadingDone = true
		}
		f.Type, f.Enum = p.parseType(s, f.TypeName, f.Line, f.Key)
		if f.Type == TypeFlags {
			if f.Key != s.Flags.Key {
				p.errorf(f.Line, f.Key, "type flags belongs to the flags key %q", s.Flags.Key)
			}
			flagsField = f
		}
		f.Value = p.parseDefault(&f.Default, f.Type, f.Enum, f.Line, f.Key)
		p.checkEncoding(f, "native", f.Native, nativeFormats)
		p.checkEncoding(f, "json", f.JSON, jsonFormats)
		if f.Leading && (f.Native.Presence != Always || f.JSON.Presence != Always) {
			p.errorf(f.Line, f.Key, "leading fields must be always present in native and json heads")
		}
		for _, a := range f.Accept {
			if f.Type.IsUint() && a > f.Type.Max() {
				p.errorf(f.Line, f.Key, "accepted value %d does not fit in %s", a, f.TypeName)
			}
		}
	}
	if flagsField == nil {
		p.errorf(0, "flags", "no field has type flags (key %q)", s.Flags.Key)
	}
	if len(s.Fields) == 0 || s.Fields[0].Key != "ri" || s.Fields[0].Type != TypeStr {
		p.errorf(0, "fields", "the first field must be the string field ri")
	}
	for _, need := range []string{"pl", "hl", "hk"} {
		if f := s.Field(need); f == nil || !f.Type.IsUint() {
			p.errorf(0, "fields", "the codecs need an integer field %q", need)
		}
	}
}

func (p *parser) checkEncoding(f *Field, name string, e Encoding, formats map[string]bool) {
	where := f.Key
	if !presences[e.Presence] {
		p.errorf(f.Line, where, "%s presence %q is not one of always, nondefault, never", name, e.Presence)
	}
	if !formats[e.Format] {
		p.errorf(f.Line, where, "%s format %q is unknown", name, e.Format)
		return
	}
	switch e.Format {
	case "hex", "hexfixed", "hexstring", "number":
		if !f.Type.IsUint() {
			p.errorf(f.Line, where, "%s format %s needs an integer type, not %s", name, e.Format, f.TypeName)
		}
	case "float6", "float":
		if f.Type != TypeF64 {
			p.errorf(f.Line, where, "%s format %s needs type f64", name, e.Format)
		}
	case "str":
		if f.Type != TypeStr {
			p.errorf(f.Line, where, "%s format str needs type str", name)
		}
	}
	if e.Format == "hexfixed" || e.Format == "hexstring" {
		if e.Width <= 0 || e.Width > 16 {
			p.errorf(f.Line, where, "%s format %s needs a width of 1 to 16 digits", name, e.Format)
		} else if f.Type.IsUint() && f.Value.Uint > maxDigits(e.Width) {
			p.errorf(f.Line, where, "%s width %d cannot hold the default %#x", name, e.Width, f.Value.Uint)
		}
	}
	if f.Type == TypeStr && e.Presence != Always && e.Presence != Never {
		p.errorf(f.Line, where, "%s: string fields must be always or never present", name)
	}
}

func (p *parser) validateHeads(s *Spec) {
	h := s.Heads
	if h.Native.Prefix == "" || h.Native.Separator == "" || h.Native.Terminator == "" {
		p.errorf(0, "heads.native", "prefix, separator and terminator must be set")
	}
	if h.JSON.Prefix == "" || h.JSON.Terminator == "" {
		p.errorf(0, "heads.json", "prefix and terminator must be set")
	}
	hk := s.Enum("HeadKind")
	if hk == nil {
		p.errorf(0, "enums", "the enum HeadKind is required")
		return
	}
	for name, kind := range map[string]string{"native": h.Native.Kind, "json": h.JSON.Kind, "binary": h.Binary.Kind} {
		if hk.Lookup(kind) == nil {
			p.errorf(0, "heads."+name, "kind %q is not a HeadKind value", kind)
		}
	}
	magic := h.Binary.Magic
	if magic < 0 || magic > 255 {
		p.errorf(0, "heads.binary", "magic %#x is not a byte", magic)
	}
	for _, pre := range []string{h.Native.Prefix, h.JSON.Prefix} {
		if pre != "" && int(pre[0]) == magic {
			p.errorf(0, "heads.binary", "magic %#x can be confused with the head prefix %q", magic, pre)
		}
	}
	if h.Binary.Version < 1 || h.Binary.Version > 255 {
		p.errorf(0, "heads.binary", "version %d must be 1 to 255", h.Binary.Version)
	}
}

// validateBinary checks the fixed layout of the binary head (no overlaps,
// widths that hold the defaults), gives each other field its bitmap bit and
// checks its encoding.
func (p *parser) validateBinary(s *Spec) {
	type region struct {
		name       string
		start, end int
		line       int
	}
	b := s.Heads.Binary
	regions := []region{
		{"magic", b.MagicOffset, b.MagicOffset + 1, 0},
		{"version", b.VersionOffset, b.VersionOffset + 1, 0},
	}
	bit := 0
	for _, f := range s.Fields {
		e := f.Binary
		switch {
		case e.Presence == Never:
			if e.Fixed() || e.Encoding != "" {
				p.errorf(f.Line, f.Key, "binary presence never takes no offset or encoding")
			}
		case e.Presence != "":
			p.errorf(f.Line, f.Key, "binary presence %q is not never or empty", e.Presence)
		case e.Fixed():
			if e.Encoding != "" {
				p.errorf(f.Line, f.Key, "a fixed binary field takes no encoding")
			}
			if !f.Type.IsUint() || e.Width <= 0 || e.Width > 8 {
				p.errorf(f.Line, f.Key, "a fixed binary field needs an integer type and a width of 1 to 8 bytes")
				continue
			}
			if e.Width < 8 && f.Value.Uint >= 1<<(8*e.Width) {
				p.errorf(f.Line, f.Key, "binary width %d cannot hold the default %d", e.Width, f.Value.Uint)
			}
			regions = append(regions, region{f.Key, *e.Offset, *e.Offset + e.Width, f.Line})
		default:
			switch e.Encoding {
			case "uvarint", "u8":
				if !f.Type.IsUint() || (e.Encoding == "u8" && f.Type.Bits() > 8) {
					p.errorf(f.Line, f.Key, "binary encoding %s does not fit type %s", e.Encoding, f.TypeName)
				}
			case "f64":
				if f.Type != TypeF64 {
					p.errorf(f.Line, f.Key, "binary encoding f64 needs type f64")
				}
			default:
				p.errorf(f.Line, f.Key, "binary encoding %q is not uvarint, u8 or f64", e.Encoding)
			}
			f.Bit = bit
			bit++
		}
	}
	sort.Slice(regions, func(i, j int) bool { return regions[i].start < regions[j].start })
	end := 0
	for i, r := range regions {
		if r.start < 0 {
			p.errorf(r.line, r.name, "binary offset %d is negative", r.start)
		}
		if i > 0 && r.start < regions[i-1].end {
			p.errorf(r.line, r.name, "binary bytes %d..%d overlap %s (bytes %d..%d)",
				r.start, r.end-1, regions[i-1].name, regions[i-1].start, regions[i-1].end-1)
		}
		end = max(end, r.end)
	}
	if b.BitmapOffset != end {
		p.errorf(0, "heads.binary", "bitmap_offset %d must follow the fixed fields directly (at %d)", b.BitmapOffset, end)
	}
	if b.MagicOffset != 0 {
		p.errorf(0, "heads.binary", "the magic byte must be first (magic_offset 0)")
	}
}

func (p *parser) validateLane(s *Spec) {
	l := &s.Lane
	if len(l.Fields) == 0 {
		p.errorf(0, "lane", "the lane page head has no fields")
		return
	}
	if l.Prefix == "" || l.Terminator == "" || l.MaxPageSize <= 0 {
		p.errorf(0, "lane", "prefix, terminator and max_page_size must be set")
	}
	keys := map[string]bool{}
	for _, f := range l.Fields {
		where := "lane." + f.Key
		if !isKey(f.Key) || keys[f.Key] {
			p.errorf(f.Line, where, "lane key must be two unique lowercase letters")
		}
		keys[f.Key] = true
		f.Type, f.Enum = p.parseType(s, f.TypeName, f.Line, where)
		f.Value = p.parseDefault(&f.Default, f.Type, f.Enum, f.Line, where)
		switch f.Format {
		case "hex":
			if !f.Type.IsUint() {
				p.errorf(f.Line, where, "format hex needs an integer type")
			}
		case "hexfixed":
			if !f.Type.IsUint() || f.Width <= 0 || f.Width > 16 {
				p.errorf(f.Line, where, "format hexfixed needs an integer type and a width of 1 to 16")
			} else if f.Value.Uint > maxDigits(f.Width) {
				p.errorf(f.Line, where, "width %d cannot hold the default %#x", f.Width, f.Value.Uint)
			}
		case "str":
			if f.Type != TypeStr {
				p.errorf(f.Line, where, "format str needs type str")
			} else if f.Width > 0 && f.Value.Str != "" && len(f.Value.Str) != f.Width {
				p.errorf(f.Line, where, "the default %q is not %d characters", f.Value.Str, f.Width)
			}
		default:
			p.errorf(f.Line, where, "lane format %q is not hex, hexfixed or str", f.Format)
		}
	}
	if l.Fields[0].Key != "ri" {
		p.errorf(l.Fields[0].Line, "lane", "the first lane field must be ri")
	}
}

func (p *parser) parseType(s *Spec, name string, line int, where string) (Type, *Enum) {
	switch name {
	case "u8":
		return TypeU8, nil
	case "u16":
		return TypeU16, nil
	case "u32":
		return TypeU32, nil
	case "u64":
		return TypeU64, nil
	case "f64":
		return TypeF64, nil
	case "str":
		return TypeStr, nil
	case "flags":
		return TypeFlags, nil
	}
	if en, ok := strings.CutPrefix(name, "enum:"); ok {
		if e := s.Enum(en); e != nil {
			return TypeEnum, e
		}
		p.errorf(line, where, "unknown enum %q", en)
		return TypeEnum, nil
	}
	p.errorf(line, where, "unknown type %q", name)
	return 0, nil
}

// parseDefault checks that the default node has the field's type and returns
// its value.
func (p *parser) parseDefault(n *yaml.Node, t Type, e *Enum, line int, where string) Value {
	if n.Kind == 0 {
		p.errorf(line, where, "no default")
		return Value{}
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n.Line, where, "the default must be a scalar")
		return Value{}
	}
	switch {
	case t == TypeStr:
		if n.Tag != "!!str" {
			p.errorf(n.Line, where, "the default %q is not a string", n.Value)
		}
		return Value{Str: n.Value}
	case t == TypeF64:
		v, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || (n.Tag != "!!float" && n.Tag != "!!int") || math.IsNaN(v) || math.IsInf(v, 0) {
			p.errorf(n.Line, where, "the default %q is not a finite number", n.Value)
		}
		return Value{Float: v}
	case t.IsUint():
		v, err := strconv.ParseUint(n.Value, 0, 64)
		if err != nil || n.Tag != "!!int" {
			p.errorf(n.Line, where, "the default %q is not an unsigned integer", n.Value)
			return Value{}
		}
		if v > t.Max() {
			p.errorf(n.Line, where, "the default %d does not fit the type", v)
		}
		if t == TypeEnum && e != nil {
			found := false
			for _, ev := range e.Values {
				found = found || ev.Value == v
			}
			if !found {
				p.errorf(n.Line, where, "the default %d is not a value of %s", v, e.Name)
			}
		}
		return Value{Uint: v}
	}
	return Value{}
}

func maxDigits(width int) uint64 {
	if width >= 16 {
		return math.MaxUint64
	}
	return 1<<(4*width) - 1
}

func isKey(k string) bool {
	return len(k) == 2 && k[0] >= 'a' && k[0] <= 'z' && k[1] >= 'a' && k[1] <= 'z'
}

func isGoIdent(s string) bool {
	if s == "" || s[0] < 'A' || s[0] > 'Z' {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// String describes a type as the spec writes it.
func (t Type) String() string {
	switch t {
	case TypeU8:
		return "u8"
	case TypeU16:
		return "u16"
	case TypeU32:
		return "u32"
	case TypeU64:
		return "u64"
	case TypeF64:
		return "f64"
	case TypeStr:
		return "str"
	case TypeFlags:
		return "flags"
	case TypeEnum:
		return "enum"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// envelopeKindEnum is the enumeration of the envelope kinds that fields'
// kinds lists name.
const envelopeKindEnum = "BusKind"

func (p *parser) validateEnvelope(s *Spec) {
	e := &s.Envelope
	if len(e.Fields) == 0 {
		return
	}
	if e.MaxList <= 0 {
		p.errorf(0, "envelope", "max_list must be positive")
	}
	kinds := s.Enum(envelopeKindEnum)
	if kinds == nil {
		p.errorf(0, "envelope", "the envelope needs the enum %s", envelopeKindEnum)
	}
	keys, gos := map[string]bool{}, map[string]bool{}
	for _, f := range e.Fields {
		where := "envelope." + f.Key
		if !isKey(f.Key) || keys[f.Key] {
			p.errorf(f.Line, where, "envelope key must be two unique lowercase letters")
		}
		if !isGoIdent(f.Go) || gos[f.Go] {
			p.errorf(f.Line, where, "go name %q must be a unique exported Go identifier", f.Go)
		}
		keys[f.Key], gos[f.Go] = true, true
		if en, ok := strings.CutPrefix(f.TypeName, "enum:"); ok {
			if f.Enum = s.Enum(en); f.Enum == nil {
				p.errorf(f.Line, where, "unknown enum %q", en)
			}
		} else if !slices.Contains(EnvelopeTypes, f.TypeName) {
			p.errorf(f.Line, where, "envelope type %q is not enum:<Name> or one of %v", f.TypeName, EnvelopeTypes)
		}
		if len(f.Kinds) == 0 {
			p.errorf(f.Line, where, "kinds must list the envelope kinds that carry it, or all")
		}
		for _, k := range f.Kinds {
			if k != "all" && kinds != nil && kinds.Lookup(k) == nil {
				p.errorf(f.Line, where, "kind %q is not a value of %s", k, envelopeKindEnum)
			}
		}
	}
	required := 0
	for _, f := range e.Fields {
		if f.Required {
			required++
		}
	}
	if required > 8 { // the decoder marks them in one byte
		p.errorf(0, "envelope", "at most 8 required fields (%d)", required)
	}
	if e.Fields[0].Key != "bv" || e.Fields[0].TypeName != "u8" || !e.Fields[0].Required {
		p.errorf(e.Fields[0].Line, "envelope", "the first envelope field must be bv, a required u8 (the version)")
	}
}
