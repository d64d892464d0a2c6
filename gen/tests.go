package gen

import (
	"fmt"
	"strconv"

	"github.com/raet-go/raet/spec"
)

const codectestImport = Module + "/codec/codectest"

// lengthFields are set by the codecs themselves, so random heads and samples
// leave them alone.
func lengthField(f *spec.Field) bool { return f.Key == "pl" || f.Key == "hl" || f.Key == "hk" }

// emitCodecTest writes codec/codectest/random_gen.go (random heads and one
// sample per field, for the tests of every codec) and the round-trip test
// file of each codec.
func (g *generator) emitCodecTest() error {
	f := g.newFile("codec/codectest/random_gen.go", "codectest")
	fl := g.s.Flags
	f.P("// RandomHead returns a head with random values, each field at its default")
	f.P("// half the time. Floats are multiples of 1/64, so that every head kind")
	f.P("// carries them exactly. The length fields and hk are left for the codecs.")
	f.Pf("func RandomHead(r *%s) %s {", f.Q("math/rand/v2", "Rand"), f.Q(codecImport, "Head"))
	f.Pf("var h %s", f.Q(codecImport, "Head"))
	f.P("h.Reset()")
	for _, fd := range g.headFields() {
		if lengthField(fd) {
			continue
		}
		t := goType(fd.Type, fd.Enum, fl.Go, "codec.")
		if len(fd.Accept) == 1 { // no choice to make
			f.Pf("h.%s = %d // the only value accepted", fd.Go, fd.Accept[0])
			continue
		}
		f.P("if r.IntN(2) == 0 {")
		switch {
		case len(fd.Accept) > 0:
			f.Pf("h.%s = %s([]uint64{%s}[r.IntN(%d)])", fd.Go, t, joinUints(fd.Accept), len(fd.Accept))
		case fd.Type == spec.TypeF64:
			f.Pf("h.%s = float64(r.IntN(1<<24)) / 64", fd.Go)
		case fd.Type.Bits() == 64:
			f.Pf("h.%s = r.Uint64()", fd.Go)
		default:
			f.Pf("h.%s = %s(r.Uint64N(%d))", fd.Go, t, fd.Type.Max()+1)
		}
		f.P("}")
	}
	f.P("return h")
	f.P("}")
	f.P()
	f.P("// Samples returns, for each field that can differ from its default, a")
	f.P("// default head with that field alone set to the largest value its type holds.")
	f.P("func Samples() []Sample {")
	f.P("var out []Sample")
	f.Pf("var h %s", f.Q(codecImport, "Head"))
	for _, fd := range g.headFields() {
		if lengthField(fd) {
			continue
		}
		val := ""
		switch {
		case len(fd.Accept) > 0:
			for _, a := range fd.Accept {
				if a != fd.Value.Uint {
					val = strconv.FormatUint(a, 10)
				}
			}
			if val == "" {
				continue // only its default is accepted
			}
		case fd.Type == spec.TypeF64:
			val = "1048575.984375"
		case fd.Type.Bits() > 0:
			val = strconv.FormatUint(fd.Type.Max(), 10)
			if fd.Type.Max() == fd.Value.Uint {
				val = strconv.FormatUint(fd.Type.Max()-1, 10)
			}
		}
		f.P("h.Reset()")
		f.Pf("h.%s = %s", fd.Go, val)
		bit := fd.Bit
		f.Pf("out = append(out, Sample{Key: %q, Bit: %d, Leading: %v, Head: h})", fd.Key, bit, fd.Leading)
	}
	f.P("return out")
	f.P("}")
	f.P()
	nh := g.s.Heads.Native
	f.P("// NativeMarker reports whether a native head carries the sample's field line.")
	f.Pf("func NativeMarker(enc []byte, s Sample) bool { return %s(enc, []byte(%q+s.Key+\" \")) }", f.Q("bytes", "Contains"), nh.Separator)
	f.P()
	f.P("// JSONMarker reports whether a JSON head carries the sample's key.")
	f.Pf("func JSONMarker(enc []byte, s Sample) bool { return %s(enc, []byte(`,\"`+s.Key+`\":`)) }", f.Q("bytes", "Contains"))
	f.P()
	f.P("// BinaryMarker reports whether a binary head has the sample's bitmap bit set.")
	f.Pf("func BinaryMarker(enc []byte, s Sample) bool { const off = %d; return s.Bit >= 0 && len(enc) > off+s.Bit/8 && enc[off+s.Bit/8]&(1<<(s.Bit%%8)) != 0 }", g.s.Heads.Binary.BitmapOffset)
	if err := g.add(f); err != nil {
		return err
	}
	for _, c := range []struct{ dir, pkg, marker string }{
		{"native", "native", "native"},
		{"json", "json", "json"},
		{"binary", "binary", "binary"},
	} {
		t := g.newFile("codec/"+c.dir+"/header_gen_test.go", c.pkg)
		tq := func(name string) string { return t.Q(codectestImport, name) }
		tt := t.Q("testing", "T")
		t.P("func TestRoundTripRandom(t *", tt, ") { ", tq("RoundTrip"), "(t, Codec{}, 5000) }")
		t.P()
		t.P("func TestFieldSamples(t *", tt, ") { ", tq("CheckSamples"), "(t, Codec{}, ", tq(marker(c.marker)), ") }")
		t.P()
		t.P("func FuzzDecode(f *", t.Q("testing", "F"), ") { ", tq("FuzzDecode"), "(f, Codec{}) }")
		if err := g.add(t); err != nil {
			return err
		}
	}
	return nil
}

func marker(kind string) string {
	return map[string]string{"native": "NativeMarker", "json": "JSONMarker", "binary": "BinaryMarker"}[kind]
}

func joinUints(vs []uint64) string {
	out := ""
	for i, v := range vs {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprint(v)
	}
	return out
}
