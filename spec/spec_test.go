package spec

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func loadText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("raet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoadRealSpec(t *testing.T) {
	s, err := Load("raet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A few facts of the protocol description, read back through the spec.
	if f := s.Field("pl"); f == nil || f.Native.Width != 4 || f.JSON.Width != 7 || !f.Leading {
		t.Errorf("pl: %+v", f)
	}
	if f := s.Field("sc"); f == nil || f.Value.Uint != 1 {
		t.Errorf("sc default: %+v", f)
	}
	if e := s.Enum("HeadKind"); e == nil || e.Lookup("json").Value != 1 || !e.Lookup("binary").Unimplemented {
		t.Errorf("HeadKind: %+v", e)
	}
	masks := map[string]uint8{}
	for _, b := range s.Flags.Bits {
		masks[b.Key] = b.Mask
	}
	if masks["vf"] != 0x80 || masks["af"] != 0x10 || masks["wf"] != 0x04 || masks["cf"] != 0x01 {
		t.Errorf("flag masks %v", masks)
	}
	// The enums of head fields (the road's and the lane's) go with the
	// heads; the keep's and the bus's do not.
	for name, head := range map[string]bool{"HeadKind": true, "PacketKind": true, "PackKind": true, "AutoMode": false, "BusPolicy": false} {
		if got := s.HeadEnum(s.Enum(name)); got != head {
			t.Errorf("HeadEnum(%s) = %v, want %v", name, got, head)
		}
	}
	if len(s.Lane.Fields) != 9 {
		t.Errorf("lane has %d fields", len(s.Lane.Fields))
	}
}

// lineOf is the 1-based line of the first occurrence of sub in text.
func lineOf(t *testing.T, text, sub string) int {
	t.Helper()
	i := strings.Index(text, sub)
	if i < 0 {
		t.Fatalf("%q not in spec", sub)
	}
	return strings.Count(text[:i], "\n") + 1
}

// Each broken spec gives an *Error naming the file, the line and the field.
func TestValidationErrors(t *testing.T) {
	orig := loadText(t)
	for _, tc := range []struct {
		name       string
		from, to   string // the edit
		line       string // the error's line is this substring's line in the edited text
		field, msg string
	}{
		{"duplicate key", "  - key: de\n", "  - key: se\n", "  - key: se\n    go: DestinationID", "se", "duplicate key"},
		{"default of the wrong type", "    type: u32\n    default: 0\n    doc: session id", "    type: u32\n    default: zero\n    doc: session id", "default: zero", "si", "not an unsigned integer"},
		{"default too big for the type", "    type: u8\n    default: 0\n    doc: protocol version", "    type: u8\n    default: 300\n    doc: protocol version", "default: 300", "vn", "does not fit"},
		{"width that cannot hold the default", "    type: u32\n    default: 0\n    doc: packet length", "    type: u32\n    default: 70000\n    doc: packet length", "  - key: pl", "pl", "width 4 cannot hold the default"},
		{"unknown enum", "type: enum:BodyKind", "type: enum:BodyKindz", "  - key: bk", "bk", `unknown enum "BodyKindz"`},
		{"enum default not a value", "    type: enum:CoatKind\n    default: 0", "    type: enum:CoatKind\n    default: 200", "default: 200", "ck", "not a value of CoatKind"},
		{"binary layout overlap", "binary: {offset: 5, width: 1}", "binary: {offset: 4, width: 1}", "  - key: fg", "fg", "overlap hl"},
		{"unknown key", "    doc: packet kind\n", "    doc: packet kind\n    colour: red\n", "colour: red", "fields", `unknown key "colour"`},
		{"bad key", "  - key: fl\n", "  - key: FL\n", "  - key: FL", "FL", "two lowercase letters"},
		{"no default port", "default_port: 7530\n", "", "", "default_port", "missing"},
		{"magic like a text head", "magic: 0xd2", "magic: 0x72", "", "heads.binary", "can be confused"},
		{"flag missing from order", "order: [vf, df, nf, af, sf, wf, bf, cf]", "order: [vf, df, nf, af, sf, wf, bf]", "{key: cf", "cf", "missing from flags.order"},
		{"duplicate enum value", "{name: raw, go: Raw, value: 2", "{name: raw, go: Raw, value: 1", "{name: raw", "BodyKind.raw", "duplicate enum value 1"},
		{"binary encoding too narrow", "    type: u32\n    default: 0\n    doc: transaction id\n    native: {format: hex}\n    json: {format: number}\n    binary: {encoding: uvarint}", "    type: u32\n    default: 0\n    doc: transaction id\n    native: {format: hex}\n    json: {format: number}\n    binary: {encoding: u8}", "  - key: ti", "ti", "does not fit type u32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(orig, tc.from) {
				t.Fatalf("spec has no %q", tc.from)
			}
			text := strings.Replace(orig, tc.from, tc.to, 1)
			_, err := Parse("spec/raet.yaml", []byte(text))
			if err == nil {
				t.Fatal("no error")
			}
			var found *Error
			for _, e := range unjoin(err) {
				var se *Error
				if errors.As(e, &se) && se.Field == tc.field && strings.Contains(se.Msg, tc.msg) {
					found = se
				}
			}
			if found == nil {
				t.Fatalf("no error for field %q saying %q in:\n%v", tc.field, tc.msg, err)
			}
			if found.File != "spec/raet.yaml" {
				t.Errorf("file %q", found.File)
			}
			if tc.line != "" {
				if want := lineOf(t, text, tc.line); found.Line != want {
					t.Errorf("line %d, want %d (%v)", found.Line, want, found)
				}
			}
			if !strings.HasPrefix(found.Error(), "spec/raet.yaml:") {
				t.Errorf("message %q does not start with the file", found.Error())
			}
		})
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestYAMLSyntaxError(t *testing.T) {
	_, err := Parse("x.yaml", []byte("version: 1\nfields: [\n"))
	var se *Error
	if !errors.As(err, &se) || se.File != "x.yaml" || se.Line == 0 {
		t.Fatalf("got %v", err)
	}
}
