// Package spec loads and validates the RAET header specification
// (spec/raet.yaml), the one source of truth from which raetgen writes the head
// codecs, the Head type, the enumerations and the wire documentation.
package spec

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DefaultPath is the path of the specification relative to the module root.
const DefaultPath = "spec/raet.yaml"

// Spec is a loaded and validated header specification.
type Spec struct {
	File        string // the path it was read from, for messages
	Version     int
	DefaultPort uint16 // RAET's UDP port

	Limits       Limits
	Heads        Heads
	Flags        Flags
	Fields       []*Field
	ReservedKeys []string
	Enums        []*Enum
	Lane         Lane
	Extensions   []Extension
	Envelope     Envelope
}

// Extension is a raet-go extension outside the head fields, for the
// reference documentation.
type Extension struct {
	Name string `yaml:"name"`
	Doc  string `yaml:"doc"`
}

// Limits are the protocol limits the codecs enforce.
type Limits struct {
	MaxHeadSize     int `yaml:"max_head_size"`
	MaxPacketSize   int `yaml:"max_packet_size"`
	MaxMessageSize  int `yaml:"max_message_size"`
	MaxSegmentCount int `yaml:"max_segment_count"`
}

// Heads holds the framing of each head encoding.
type Heads struct {
	Native NativeHead `yaml:"native"`
	JSON   JSONHead   `yaml:"json"`
	Binary BinaryHead `yaml:"binary"`
}

// NativeHead is the framing of the native (hk=0) head.
type NativeHead struct {
	Kind       string `yaml:"kind"`
	Prefix     string `yaml:"prefix"`
	Separator  string `yaml:"separator"`
	Terminator string `yaml:"terminator"`
}

// JSONHead is the framing of the JSON (hk=1) head.
type JSONHead struct {
	Kind       string `yaml:"kind"`
	Prefix     string `yaml:"prefix"`
	Terminator string `yaml:"terminator"`
}

// BinaryHead is the framing of the binary (hk=2) head.
type BinaryHead struct {
	Kind          string `yaml:"kind"`
	Magic         int    `yaml:"magic"`
	Version       int    `yaml:"version"`
	MagicOffset   int    `yaml:"magic_offset"`
	VersionOffset int    `yaml:"version_offset"`
	BitmapOffset  int    `yaml:"bitmap_offset"`
}

// Flags describes the packed flags byte.
type Flags struct {
	Key   string     `yaml:"key"`
	Go    string     `yaml:"go"`
	Doc   string     `yaml:"doc"`
	Order []string   `yaml:"order"` // most significant bit first
	Bits  []*FlagBit `yaml:"bits"`
}

// FlagBit is one flag of the flags byte.
type FlagBit struct {
	Key  string `yaml:"key"`
	Go   string `yaml:"go"`
	Doc  string `yaml:"doc"`
	Mask uint8  `yaml:"-"` // derived from Flags.Order
	Line int    `yaml:"-"`
}

// Type is the kind of value a field holds.
type Type int

// The field types.
const (
	TypeU8 Type = iota + 1
	TypeU16
	TypeU32
	TypeU64
	TypeF64
	TypeStr
	TypeFlags
	TypeEnum // stored in a u8
)

// Bits is the width in bits of an unsigned integer type (enums and flags are
// 8 bits), or 0 for other types.
func (t Type) Bits() int {
	switch t {
	case TypeU8, TypeEnum, TypeFlags:
		return 8
	case TypeU16:
		return 16
	case TypeU32:
		return 32
	case TypeU64:
		return 64
	}
	return 0
}

// IsUint reports whether values of t are unsigned integers.
func (t Type) IsUint() bool { return t.Bits() > 0 }

// Max is the largest value of an unsigned integer type.
func (t Type) Max() uint64 {
	if b := t.Bits(); b > 0 && b < 64 {
		return 1<<b - 1
	}
	return 1<<64 - 1
}

// Value is a field default: Uint for integer types, Float for f64, Str for str.
type Value struct {
	Uint  uint64
	Float float64
	Str   string
}

// Encoding is how a field appears in a text head (native or JSON).
type Encoding struct {
	Format   string `yaml:"format"`   // native: hex, hexfixed, float6, str; JSON: number, hexstring, float, str
	Width    int    `yaml:"width"`    // digits, for hexfixed and hexstring
	Presence string `yaml:"presence"` // always, nondefault (the default when empty), never
}

// The presence values.
const (
	Always     = "always"
	NonDefault = "nondefault"
	Never      = "never"
)

// BinaryEncoding is how a field appears in the binary head: either at a fixed
// offset with a fixed width, or, when present, behind a bit of the presence
// bitmap with a variable encoding.
type BinaryEncoding struct {
	Presence string `yaml:"presence"` // never, or empty
	Offset   *int   `yaml:"offset"`
	Width    int    `yaml:"width"`
	Encoding string `yaml:"encoding"` // uvarint, u8, f64
}

// Fixed reports whether the field sits at a fixed offset.
func (b BinaryEncoding) Fixed() bool { return b.Offset != nil }

// Field is one head field.
type Field struct {
	Key      string         `yaml:"key"`
	Go       string         `yaml:"go"`
	TypeName string         `yaml:"type"`
	Default  yaml.Node      `yaml:"default"`
	Doc      string         `yaml:"doc"`
	Leading  bool           `yaml:"leading"`
	Native   Encoding       `yaml:"native"`
	JSON     Encoding       `yaml:"json"`
	Binary   BinaryEncoding `yaml:"binary"`
	Accept   []uint64       `yaml:"accept"` // when set, the only values a decoder accepts

	Type  Type  `yaml:"-"`
	Enum  *Enum `yaml:"-"` // for TypeEnum
	Value Value `yaml:"-"` // the parsed default
	Line  int   `yaml:"-"`
	Bit   int   `yaml:"-"` // index in the binary presence bitmap, or -1
}

// Enum is an enumeration.
type Enum struct {
	Name   string       `yaml:"name"`
	Doc    string       `yaml:"doc"`
	Values []*EnumValue `yaml:"values"`
	Line   int          `yaml:"-"`
}

// Lookup returns the value named name.
func (e *Enum) Lookup(name string) *EnumValue {
	for _, v := range e.Values {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// EnumValue is one value of an enumeration.
type EnumValue struct {
	Name          string `yaml:"name"`
	Go            string `yaml:"go"`
	Value         uint64 `yaml:"value"`
	Doc           string `yaml:"doc"`
	Unimplemented bool   `yaml:"unimplemented"` // declared by the reference but never implemented
	Ours          bool   `yaml:"ours"`          // an extension of raet-go
	Line          int    `yaml:"-"`
}

// Lane is the lane (UXD) page head.
type Lane struct {
	Prefix      string       `yaml:"prefix"`
	Terminator  string       `yaml:"terminator"`
	MaxPageSize int          `yaml:"max_page_size"`
	Fields      []*LaneField `yaml:"fields"`
}

// LaneField is one field of the lane page head; every one is always present.
type LaneField struct {
	Key      string    `yaml:"key"`
	Go       string    `yaml:"go"`
	TypeName string    `yaml:"type"`
	Default  yaml.Node `yaml:"default"`
	Format   string    `yaml:"format"` // hex, hexfixed, str
	Width    int       `yaml:"width"`  // digits for hexfixed; exact length for str when set
	Doc      string    `yaml:"doc"`

	Type  Type  `yaml:"-"`
	Enum  *Enum `yaml:"-"`
	Value Value `yaml:"-"`
	Line  int   `yaml:"-"`
}

// Envelope is the bus envelope: the body mapping of a messaging-pattern
// message (package bus). Its fields are keys of that mapping, not of a head.
type Envelope struct {
	MaxList int              `yaml:"max_list"` // most items of a strs or counts field
	Fields  []*EnvelopeField `yaml:"fields"`
}

// EnvelopeField is one key of the bus envelope. Type is one of EnvelopeTypes
// or enum:<Name>.
type EnvelopeField struct {
	Key      string   `yaml:"key"`
	Go       string   `yaml:"go"`
	TypeName string   `yaml:"type"`
	Required bool     `yaml:"required"`
	Kinds    []string `yaml:"kinds"` // the envelope kinds (BusKind names) that carry it, or [all]
	Doc      string   `yaml:"doc"`

	Enum *Enum `yaml:"-"` // for enum:<Name>
	Line int   `yaml:"-"`
}

// EnvelopeTypes are the value types of envelope fields besides enum:<Name>.
var EnvelopeTypes = []string{"u8", "u32", "u64", "i64", "bool", "str", "strs", "counts", "any"}

// Field returns the field with the two-letter key, or nil.
func (s *Spec) Field(key string) *Field {
	for _, f := range s.Fields {
		if f.Key == key {
			return f
		}
	}
	return nil
}

// Enum returns the enumeration named name, or nil.
func (s *Spec) Enum(name string) *Enum {
	for _, e := range s.Enums {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// HeadEnum reports whether a field of the road head or of the lane page
// head has the type e: such an enumeration belongs with the heads (package
// codec), any other in package protocol.
func (s *Spec) HeadEnum(e *Enum) bool {
	for _, f := range s.Fields {
		if f.Enum == e {
			return true
		}
	}
	for _, f := range s.Lane.Fields {
		if f.Enum == e {
			return true
		}
	}
	return false
}

// BitmapFields are the fields with a bit in the binary presence bitmap, in
// bit order.
func (s *Spec) BitmapFields() []*Field {
	var out []*Field
	for _, f := range s.Fields {
		if f.Bit >= 0 {
			out = append(out, f)
		}
	}
	return out
}

// BitmapBytes is the width of the binary presence bitmap.
func (s *Spec) BitmapBytes() int { return (len(s.BitmapFields()) + 7) / 8 }

// Error is a problem found in a spec file. It names the file, the line and,
// where there is one, the field.
type Error struct {
	File  string
	Line  int
	Field string // a field key, enum name or section; may be empty
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		fmt.Fprintf(&b, "%s: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and validates the spec file at path.
func Load(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	return Parse(path, data)
}

// raw mirrors the file's top level.
type raw struct {
	Version      int         `yaml:"version"`
	DefaultPort  uint16      `yaml:"default_port"`
	Limits       Limits      `yaml:"limits"`
	Heads        Heads       `yaml:"heads"`
	Flags        yaml.Node   `yaml:"flags"`
	Fields       yaml.Node   `yaml:"fields"`
	ReservedKeys []string    `yaml:"reserved_keys"`
	Enums        yaml.Node   `yaml:"enums"`
	Lane         yaml.Node   `yaml:"lane"`
	Extensions   []Extension `yaml:"extensions"`
	Envelope     yaml.Node   `yaml:"envelope"`
}

// Parse parses and validates a spec; name is used in error messages.
// All problems found are returned together (errors.Join of *Error).
func Parse(name string, data []byte) (*Spec, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, &Error{File: name, Line: yamlLine(err), Msg: err.Error()}
	}
	p := &parser{file: name}
	var r raw
	if len(root.Content) == 0 {
		return nil, &Error{File: name, Msg: "empty spec"}
	}
	p.decode(root.Content[0], &r, "")
	s := &Spec{File: name, Version: r.Version, DefaultPort: r.DefaultPort, Limits: r.Limits, Heads: r.Heads, ReservedKeys: r.ReservedKeys, Extensions: r.Extensions}
	p.decode(&r.Flags, &s.Flags, "flags")
	for i, b := range s.Flags.Bits {
		b.Line = itemLine(&r.Flags, "bits", i)
	}
	for _, n := range seq(&r.Fields) {
		f := &Field{Line: n.Line, Bit: -1}
		p.decode(n, f, "fields")
		s.Fields = append(s.Fields, f)
	}
	for _, n := range seq(&r.Enums) {
		e := &Enum{Line: n.Line}
		p.decode(n, e, "enums")
		for i, v := range e.Values {
			v.Line = itemLine(n, "values", i)
		}
		s.Enums = append(s.Enums, e)
	}
	if r.Lane.Kind != 0 {
		p.decode(&r.Lane, &s.Lane, "lane")
		for i, f := range s.Lane.Fields {
			f.Line = itemLine(&r.Lane, "fields", i)
		}
	}
	if r.Envelope.Kind != 0 {
		p.decode(&r.Envelope, &s.Envelope, "envelope")
		for i, f := range s.Envelope.Fields {
			f.Line = itemLine(&r.Envelope, "fields", i)
		}
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	p.validate(s)
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return s, nil
}

type parser struct {
	file string
	errs []error
}

func (p *parser) errorf(line int, field, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// decode decodes n into v, refusing mapping keys that v does not declare.
func (p *parser) decode(n *yaml.Node, v any, where string) {
	p.checkKeys(n, reflect.TypeOf(v).Elem(), where)
	if err := n.Decode(v); err != nil {
		p.errorf(yamlLine(err, n.Line), where, "%v", stripYAML(err))
	}
}

// checkKeys reports unknown keys in the mappings of n, recursively along the
// struct type t.
func (p *parser) checkKeys(n *yaml.Node, t reflect.Type, where string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				p.checkKeys(c, t.Elem(), where)
			}
			return
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode || t == reflect.TypeFor[yaml.Node]() {
		return
	}
	fields := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if tag != "" && tag != "-" {
			fields[tag] = sf
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		sf, ok := fields[k.Value]
		if !ok {
			what := where
			if what == "" {
				what = "spec"
			}
			p.errorf(k.Line, what, "unknown key %q", k.Value)
			continue
		}
		p.checkKeys(v, sf.Type, where)
	}
}

func seq(n *yaml.Node) []*yaml.Node {
	if n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// itemLine is the line of item i of the sequence under key in mapping n.
func itemLine(n *yaml.Node, key string, i int) int {
	for j := 0; j+1 < len(n.Content); j += 2 {
		if n.Content[j].Value == key {
			if s := n.Content[j+1]; s.Kind == yaml.SequenceNode && i < len(s.Content) {
				return s.Content[i].Line
			}
		}
	}
	return n.Line
}

func yamlLine(err error, fallback ...int) int {
	var te *yaml.TypeError
	var line int
	msg := err.Error()
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	if _, e := fmt.Sscanf(strings.TrimPrefix(msg, "yaml: "), "line %d:", &line); e == nil {
		return line
	}
	if len(fallback) > 0 {
		return fallback[0]
	}
	return 0
}

func stripYAML(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return strings.Join(te.Errors, "; ")
	}
	return strings.TrimPrefix(err.Error(), "yaml: ")
}
