package packet

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
)

// deepEqual is reflect.DeepEqual that also takes NaN as equal to NaN.
func deepEqual(a, b any) bool {
	switch x := a.(type) {
	case float64: // -0 is not 0; NaN is NaN
		y, ok := b.(float64)
		return ok && (x == y && math.Signbit(x) == math.Signbit(y) || math.IsNaN(x) && math.IsNaN(y))
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !deepEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if !deepEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case OrderedMap:
		y, ok := b.(OrderedMap)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if x[i].Key != y[i].Key || !deepEqual(x[i].Value, y[i].Value) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func golden(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func mustBig(s string) *big.Int {
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return b
}

// The Go form of the "ordered" sample of testdata/gen_python_vectors.py.
func pySample() OrderedMap {
	return OrderedMap{
		{"name", "Zoë"},
		{"emoji", "😀 ok"},
		{"ctl", "\x00\x1f\x7f\b\f\n\r\t\"\\/"},
		{"html", "<a href='x'>&</a>"},
		{"floats", []any{1.0, 1e16, 1e-05, 0.0001, math.Copysign(0, -1), 1.5, 123456789012345678.0, 0.1,
			9999999999999998.0, 1e-7, 2.5e-5, 1e22, 5e-324}},
		{"ints", []any{int64(0), int64(-1), int64(math.MaxInt64), uint64(math.MaxUint64), int64(math.MinInt64),
			mustBig("123456789012345678901234567890")}},
		{"nested", OrderedMap{{"b", true}, {"a", nil}, {"z", []any{}}}},
		{"sep", "\u2028\u2029"},
		{"empty", OrderedMap{}},
	}
}

// The Go form of the "packed" sample of testdata/gen_python_vectors.py, as
// decoded from the current format (bytes as []byte).
func mpSample(bytesVal any) OrderedMap {
	return OrderedMap{
		{"subject", "hello main"}, {"n", int64(1)}, {"neg", int64(-33)}, {"big", int64(1 << 40)}, {"f", 1.5},
		{"bytes", bytesVal}, {"list", []any{int64(1), "two", nil, true, false}},
		{"nested", OrderedMap{{"k", "é"}}}, {"long", strings.Repeat("x", 40)},
		{"u64", uint64(math.MaxUint64)}, {"i8", int64(-100)},
	}
}

func toMap(m OrderedMap) map[string]any { return plain(m).(map[string]any) }

// plain converts the OrderedMaps in v, at any depth, to map[string]any.
func plain(v any) any {
	switch x := v.(type) {
	case OrderedMap:
		out := make(map[string]any, len(x))
		for _, kv := range x {
			out[kv.Key] = plain(kv.Value)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	}
	return v
}

var mappingKinds = []Serializer{JSONBody{}, MsgpackBody{}, CBORBody{}}

// JSON bytes equal to Python's json.dumps(separators=(',', ':')).
func TestJSONPythonIdentical(t *testing.T) {
	want := golden(t, "json_ordered.golden")
	got, err := JSONBody{}.Marshal(nil, pySample())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("ordered sample:\n got %s\nwant %s", got, want)
	}
	// Python's bytes decode to the same values and re-encode identically.
	var om OrderedMap
	if err := (JSONBody{}).Unmarshal(want, &om); err != nil {
		t.Fatal(err)
	}
	if !deepEqual(om, pySample()) {
		t.Fatalf("decoded %#v", om)
	}
	if again, _ := (JSONBody{}).Marshal(nil, om); !bytes.Equal(again, want) {
		t.Fatalf("re-encoded:\n got %s\nwant %s", again, want)
	}
	// map[string]any: keys sorted, as sort_keys=True.
	m := map[string]any{"zeta": 1, "alpha": "β", "mid": []any{1, 2}, "Upper": nil}
	got, err = JSONBody{}.Marshal(nil, m)
	if err != nil || !bytes.Equal(got, golden(t, "json_sorted.golden")) {
		t.Fatalf("sorted sample: %s, %v", got, err)
	}
}

func TestJSONMarshalValues(t *testing.T) {
	type inner struct {
		B string  `json:"b"`
		A float64 `json:"a"`
		X []byte  `json:"x,omitempty"`
	}
	cases := []struct {
		in   any
		want string
	}{
		{map[string]any{"a": "x\xffy"}, `{"a":"x\ufffdy"}`},
		{map[string]string{"b": "é", "a": "1"}, `{"a":"1","b":"\u00e9"}`},
		{map[string]any{"l": []string{"é", "x"}}, `{"l":["\u00e9","x"]}`},
		{map[string]any{"f32": float32(0.1), "i8": int8(-3), "u": uint(7)}, `{"f32":0.1,"i8":-3,"u":7}`},
		{map[string]any{"n": json.Number("1.50")}, `{"n":1.50}`},
		{map[string]any{"nil map": map[string]any(nil), "nil slice": []any(nil), "nil om": OrderedMap(nil)},
			`{"nil map":null,"nil om":null,"nil slice":null}`},
		{inner{B: "é", A: 3, X: []byte{1}}, `{"b":"\u00e9","a":3,"x":"AQ=="}`},
		{&inner{B: "\x7f<>"}, `{"b":"\u007f<>","a":0}`},
		{json.RawMessage(`{ "k" : "é😀" }`), `{"k":"\u00e9\ud83d\ude00"}`},
		{OrderedMap{{"s", inner{B: "ü"}}}, `{"s":{"b":"\u00fc","a":0}}`},
	}
	for _, c := range cases {
		got, err := JSONBody{}.Marshal([]byte("pre:"), c.in)
		if err != nil || string(got) != "pre:"+c.want {
			t.Errorf("%#v:\n got %s, %v\nwant pre:%s", c.in, got, err, c.want)
		}
	}
}

func TestPyFloat(t *testing.T) {
	cases := map[float64]string{
		0: "0.0", 1: "1.0", -2.5: "-2.5", 1e15: "1000000000000000.0", 1e16: "1e+16", 1.5e300: "1.5e+300",
		0.001: "0.001", 0.0001: "0.0001", 0.00001: "1e-05", 1.7976931348623157e308: "1.7976931348623157e+308",
		123.456: "123.456", 1 / 3.0: "0.3333333333333333", 2e-308: "2e-308",
	}
	for f, want := range cases {
		got, err := appendFloat(nil, f, 64)
		if err != nil || string(got) != want {
			t.Errorf("%v: got %s, want %s", f, got, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := JSONBody{}.Marshal(nil, map[string]any{"f": f})
		if !errors.Is(err, ErrUnsupportedValue) {
			t.Errorf("%v: %v, want ErrUnsupportedValue", f, err)
		}
	}
}

func TestJSONUnmarshalTypes(t *testing.T) {
	in := `{"i":1,"f":1.0,"e":1e2,"neg":-7,"u":18446744073709551615,"b":123456789012345678901234567890,` +
		`"s":"\u00e9\ud83d\ude00\n","n":null,"t":true,"a":[1,{"x":2.5}],"o":{}}`
	want := map[string]any{
		"i": int64(1), "f": 1.0, "e": 100.0, "neg": int64(-7), "u": uint64(math.MaxUint64),
		"b": mustBig("123456789012345678901234567890"), "s": "é😀\n", "n": nil, "t": true,
		"a": []any{int64(1), map[string]any{"x": 2.5}}, "o": map[string]any{},
	}
	var m map[string]any
	if err := (JSONBody{}).Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	if !deepEqual(m, want) {
		t.Fatalf("got %#v", m)
	}
	var a any
	if err := (JSONBody{}).Unmarshal([]byte(in), &a); err != nil || !deepEqual(a, want) {
		t.Fatalf("*any: %#v, %v", a, err)
	}
	// Struct targets go through encoding/json.
	var s struct {
		I int    `json:"i"`
		S string `json:"s"`
	}
	if err := (JSONBody{}).Unmarshal([]byte(in), &s); err != nil || s.I != 1 || s.S != "é😀\n" {
		t.Fatalf("struct: %+v, %v", s, err)
	}
	// Duplicate keys: first position, last value.
	var om OrderedMap
	if err := (JSONBody{}).Unmarshal([]byte(`{"a":1,"b":2,"a":3}`), &om); err != nil {
		t.Fatal(err)
	}
	if !deepEqual(om, OrderedMap{{"a", int64(3)}, {"b", int64(2)}}) {
		t.Fatalf("duplicates: %#v", om)
	}
}

func TestDuplicateKeysMany(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("{")
	for i := range 20 {
		sb.WriteString(`"k` + string(rune('a'+i)) + `":1,`)
	}
	sb.WriteString(`"ka":2}`)
	var om OrderedMap
	if err := (JSONBody{}).Unmarshal([]byte(sb.String()), &om); err != nil {
		t.Fatal(err)
	}
	if len(om) != 20 || om[0].Key != "ka" || om[0].Value != int64(2) {
		t.Fatalf("got %v", om)
	}
}

// The empty mapping is zero bytes, and zero bytes are the empty mapping.
func TestEmptyMapping(t *testing.T) {
	type omitted struct {
		A int `json:"a,omitempty" msgpack:"a,omitempty" cbor:"a,omitempty"`
	}
	empties := []any{nil, map[string]any{}, map[string]any(nil), map[string]string{}, OrderedMap{},
		OrderedMap(nil), struct{}{}, omitted{}, (*omitted)(nil), &OrderedMap{}}
	for _, s := range mappingKinds {
		for _, v := range empties {
			got, err := s.Marshal([]byte("pre"), v)
			if err != nil || string(got) != "pre" {
				t.Errorf("%T %#v: %q, %v, want nothing appended", s, v, got, err)
			}
		}
		var m map[string]any
		if err := s.Unmarshal(nil, &m); err != nil || m == nil || len(m) != 0 {
			t.Errorf("%T: zero bytes into map: %#v, %v", s, m, err)
		}
		var om OrderedMap
		if err := s.Unmarshal([]byte{}, &om); err != nil || om == nil || len(om) != 0 {
			t.Errorf("%T: zero bytes into OrderedMap: %#v, %v", s, om, err)
		}
		var a any
		if err := s.Unmarshal(nil, &a); err != nil || !deepEqual(a, map[string]any{}) {
			t.Errorf("%T: zero bytes into any: %#v, %v", s, a, err)
		}
		st := omitted{A: 5}
		if err := s.Unmarshal(nil, &st); err != nil || st.A != 5 {
			t.Errorf("%T: zero bytes into struct: %+v, %v", s, st, err)
		}
		ms := map[string]string(nil)
		if err := s.Unmarshal(nil, &ms); err != nil || ms == nil {
			t.Errorf("%T: zero bytes into map[string]string: %#v, %v", s, ms, err)
		}
	}
	// The encoded empty map unmarshals too.
	for s, enc := range map[Serializer][]byte{JSONBody{}: []byte(" {} "), MsgpackBody{}: {0x80}, CBORBody{}: {0xa0}} {
		var m map[string]any
		if err := s.Unmarshal(enc, &m); err != nil || m == nil || len(m) != 0 {
			t.Errorf("%T: %x: %#v, %v", s, enc, m, err)
		}
	}
}

func TestNotMapping(t *testing.T) {
	values := []any{[]any{1}, []any{}, "s", 1, 1.5, true, []byte("x"), []string{"a"}, json.Number("1")}
	for _, s := range mappingKinds {
		for _, v := range values {
			got, err := s.Marshal([]byte("pre"), v)
			var be *BodyError
			if !errors.Is(err, ErrNotMapping) || !errors.As(err, &be) || be.Kind != s.Kind() || be.Op != "marshal" {
				t.Errorf("%T marshal %#v: %v, want *BodyError with ErrNotMapping", s, v, err)
			}
			if string(got) != "pre" {
				t.Errorf("%T marshal %#v: dst changed to %q", s, v, got)
			}
		}
	}
	inputs := map[Serializer][]string{
		JSONBody{}:    {`[1]`, `"s"`, `1`, `null`, `true`, "  []", `[{"a":1}]`},
		MsgpackBody{}: {"\x91\x01", "\xa1x", "\x01", "\xc0", "\xc3", "\x90"},
		CBORBody{}:    {"\x81\x01", "\x61x", "\x01", "\xf6", "\xf5", "\xc1\xa0"},
	}
	for s, list := range inputs {
		for _, in := range list {
			for _, target := range []any{new(map[string]any), new(OrderedMap), new(any), new(struct{ A int })} {
				err := s.Unmarshal([]byte(in), target)
				var be *BodyError
				if !errors.Is(err, ErrNotMapping) || !errors.As(err, &be) || be.Op != "unmarshal" {
					t.Errorf("%T unmarshal %q into %T: %v, want ErrNotMapping", s, in, target, err)
				}
			}
		}
	}
	want := "raet: unmarshal json body: body is not a mapping"
	if err := (JSONBody{}).Unmarshal([]byte("[]"), new(map[string]any)); err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestMalformed(t *testing.T) {
	inputs := map[Serializer][]string{
		JSONBody{}: {`{"a":1`, `{"a":1}x`, `{"a":1} {"b":2}`, "{\"a\":\"\xff\"}", `{"a":NaN}`, `{"a":1e400}`,
			"  ", `{"a":01}`, `{a:1}`, `{"a":"\ud800"`, `{"a":[1,]}`, `{"a":-}`, `{"a":Infinity}`},
		MsgpackBody{}: {"\x81\xa1a", "\x81\x01\x01", "\x80\x00", "\x81\xa1a\xc1", "\xdf\xff\xff\xff\xff",
			"\x81\xa1a\xdb\xff\xff\xff\xff", "\x81\xa1a\xdd\x00\x00\x00\x05\x01", "\x81\xc0\x01", "\x81\xa1a\xd7\xff" +
				"\xff\xff\xff\xff\x00\x00\x00\x00", "\xde\x00"},
		CBORBody{}: {"\xa1\x61", "\xa0\x00", "\xa1\x01\x01", "\xa1\x61\xff\x01", "\xbf\x61a\x01", "\xa1\x61a\x1c",
			"\xbb\xff\xff\xff\xff\xff\xff\xff\xff"},
	}
	for s, list := range inputs {
		for _, in := range list {
			for _, target := range []any{new(map[string]any), new(OrderedMap)} {
				err := s.Unmarshal([]byte(in), target)
				if !errors.Is(err, ErrMalformedBody) {
					t.Errorf("%T unmarshal %q into %T: %v, want ErrMalformedBody", s, in, target, err)
				}
			}
		}
	}
	// Unsupported targets.
	for _, s := range mappingKinds {
		for _, target := range []any{nil, map[string]any{}, (*map[string]any)(nil), 3} {
			if err := s.Unmarshal([]byte("{}"), target); !errors.Is(err, ErrUnsupportedValue) {
				t.Errorf("%T into %#v: %v, want ErrUnsupportedValue", s, target, err)
			}
		}
	}
}

func nested(open, closeStr, leaf string, depth int) string {
	return strings.Repeat(open, depth) + leaf + strings.Repeat(closeStr, depth)
}

func TestDepth(t *testing.T) {
	// The top-level mapping is level 1; MaxBodyDepth-1 arrays fit inside.
	type input struct{ ok, deep, absurd []byte }
	mk := func(prefix, open, closeStr, leaf, suffix string) input {
		return input{
			[]byte(prefix + nested(open, closeStr, leaf, MaxBodyDepth-1) + suffix),
			[]byte(prefix + nested(open, closeStr, leaf, MaxBodyDepth) + suffix),
			[]byte(prefix + nested(open, closeStr, leaf, 1_000_000) + suffix),
		}
	}
	inputs := map[Serializer]input{
		JSONBody{}:    mk(`{"a":`, "[", "]", "1", "}"),
		MsgpackBody{}: mk("\x81\xa1a", "\x91", "", "\x01", ""),
		CBORBody{}:    mk("\xa1\x61a", "\x81", "", "\x01", ""),
	}
	for s, in := range inputs {
		for _, target := range []any{new(map[string]any), new(OrderedMap), new(struct{ A any })} {
			if err := s.Unmarshal(in.ok, target); err != nil {
				t.Errorf("%T %T: depth %d: %v", s, target, MaxBodyDepth, err)
			}
			if err := s.Unmarshal(in.deep, target); !errors.Is(err, ErrBodyTooDeep) {
				t.Errorf("%T %T: depth %d: %v, want ErrBodyTooDeep", s, target, MaxBodyDepth+1, err)
			}
			if err := s.Unmarshal(in.absurd, target); !errors.Is(err, ErrBodyTooDeep) {
				t.Errorf("%T %T: depth 1e6: %v, want ErrBodyTooDeep", s, target, err)
			}
		}
	}
	// Cycles and deep values are refused on marshal rather than
	// overflowing the stack.
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	list := []any{nil}
	list[0] = list
	om := OrderedMap{{"x", nil}}
	om[0].Value = om
	for _, s := range mappingKinds {
		for _, v := range []any{cyclic, map[string]any{"l": list}, om} {
			if _, err := s.Marshal(nil, v); !errors.Is(err, ErrBodyTooDeep) {
				t.Errorf("%T cyclic: %v, want ErrBodyTooDeep", s, err)
			}
		}
	}
}

// msgpack bytes equal to msgpack-python 1.0's, and both the current and the
// old raw format decode.
func TestMsgpackPython(t *testing.T) {
	current := golden(t, "msgpack_current.golden")
	got, err := MsgpackBody{}.Marshal(nil, mpSample([]byte{0x00, 0xff}))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, current) {
		t.Fatalf("marshal:\n got %x\nwant %x", got, current)
	}
	for name, c := range map[string]struct {
		data  []byte
		bytes any
	}{
		"current": {current, []byte{0x00, 0xff}},
		"old raw": {golden(t, "msgpack_old_raw.golden"), "\x00\xff"},
	} {
		var om OrderedMap
		if err := (MsgpackBody{}).Unmarshal(c.data, &om); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := mpSample(c.bytes); !deepEqual(om, want) {
			t.Fatalf("%s: got %#v\nwant %#v", name, om, want)
		}
		var m map[string]any
		if err := (MsgpackBody{}).Unmarshal(c.data, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := toMap(mpSample(c.bytes)); !deepEqual(m, want) {
			t.Fatalf("%s: got %#v\nwant %#v", name, m, want)
		}
		var s struct {
			Subject string `msgpack:"subject"`
			Long    string `msgpack:"long"`
			N       int    `msgpack:"n"`
		}
		if err := (MsgpackBody{}).Unmarshal(c.data, &s); err != nil || s.Subject != "hello main" || s.N != 1 ||
			len(s.Long) != 40 {
			t.Fatalf("%s: struct %+v, %v", name, s, err)
		}
	}
}

func TestMsgpackValues(t *testing.T) {
	cases := map[string]struct {
		hex  string
		want map[string]any
	}{
		"bin key":        {"81c4016b01", map[string]any{"k": int64(1)}},
		"str8 key":       {"81d9016b01", map[string]any{"k": int64(1)}},
		"raw16 value":    {"81a16bda0003616263", map[string]any{"k": "abc"}},
		"raw32 non-utf8": {"81a16bdb00000002fffe", map[string]any{"k": "\xff\xfe"}},
		"float32":        {"81a166ca3fc00000", map[string]any{"f": 1.5}},
		"ints":           {"84a161cc80a162cdffffa163d1ff00a164ce80000000", map[string]any{"a": int64(128), "b": int64(65535), "c": int64(-256), "d": int64(1 << 31)}},
		"neg fixint":     {"81a161e0", map[string]any{"a": int64(-32)}},
		"int64":          {"81a161d38000000000000000", map[string]any{"a": int64(math.MinInt64)}},
		"timestamp32":    {"81a174d6ff00000001", map[string]any{"t": time.Unix(1, 0).UTC()}},
		"timestamp64":    {"81a174d7ff0000000400000002", map[string]any{"t": time.Unix(2, 1).UTC()}},
		"timestamp96":    {"81a174c70cff00000003fffffffffffffffe", map[string]any{"t": time.Unix(-2, 3).UTC()}},
		"map16":          {"de0001a16101", map[string]any{"a": int64(1)}},
		"array16":        {"81a161dc00020102", map[string]any{"a": []any{int64(1), int64(2)}}},
		"empty bin":      {"81a162c400", map[string]any{"b": []byte{}}},
	}
	for name, c := range cases {
		data, _ := hex.DecodeString(c.hex)
		var m map[string]any
		if err := (MsgpackBody{}).Unmarshal(data, &m); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !deepEqual(m, c.want) {
			t.Errorf("%s: got %#v, want %#v", name, m, c.want)
		}
	}
	// Unknown extension types are not supported.
	if err := (MsgpackBody{}).Unmarshal([]byte("\x81\xa1a\xd4\x05\x00"), new(map[string]any)); !errors.Is(err, ErrUnsupportedValue) {
		t.Errorf("ext 5: %v", err)
	}
	// time.Time round trip through vmihailenco's encoder.
	tm := time.Date(2020, 5, 1, 12, 0, 0, 123, time.UTC)
	enc, err := MsgpackBody{}.Marshal(nil, map[string]any{"t": tm})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := (MsgpackBody{}).Unmarshal(enc, &m); err != nil || !m["t"].(time.Time).Equal(tm) {
		t.Fatalf("time: %v, %v", m, err)
	}
	// Compact integers and sorted keys.
	enc, _ = MsgpackBody{}.Marshal(nil, map[string]any{"b": int64(1), "a": 300})
	if hex.EncodeToString(enc) != "82a161cd012ca16201" {
		t.Fatalf("compact ints: %x", enc)
	}
}

func TestCBOR(t *testing.T) {
	// Sorted keys, shortest integers.
	enc, err := CBORBody{}.Marshal(nil, map[string]any{"b": 1, "a": int64(-2)})
	if err != nil || hex.EncodeToString(enc) != "a2616121616201" {
		t.Fatalf("sorted: %x, %v", enc, err)
	}
	// Ordered round trip, byte for byte.
	om := OrderedMap{{"z", int64(1)}, {"a", OrderedMap{{"y", "é"}, {"b", []any{int64(3), nil, 1.5}}}},
		{"bin", []byte{1, 2}}, {"u", uint64(math.MaxUint64)}, {"neg", int64(math.MinInt64)},
		{"huge", mustBig("-123456789012345678901234567890")}}
	enc, err = CBORBody{}.Marshal(nil, om)
	if err != nil {
		t.Fatal(err)
	}
	var back OrderedMap
	if err := (CBORBody{}).Unmarshal(enc, &back); err != nil {
		t.Fatal(err)
	}
	if !deepEqual(back, om) {
		t.Fatalf("ordered round trip: %#v", back)
	}
	if again, _ := (CBORBody{}).Marshal(nil, back); !bytes.Equal(again, enc) {
		t.Fatalf("re-encoded %x, want %x", again, enc)
	}
	var m map[string]any
	if err := (CBORBody{}).Unmarshal(enc, &m); err != nil || !deepEqual(m, toMap(om)) {
		t.Fatalf("map: %#v, %v", m, err)
	}
	// Indefinite lengths, bignum tags.
	for in, want := range map[string]OrderedMap{
		"bf616101ff":                   {{"a", int64(1)}},
		"bf61619f0102ffff":             {{"a", []any{int64(1), int64(2)}}},
		"a16161c249010000000000000000": {{"a", mustBig("18446744073709551616")}},
		"a16161c24105":                 {{"a", int64(5)}},
		"a16161c248ffffffffffffffff":   {{"a", uint64(math.MaxUint64)}},
	} {
		data, _ := hex.DecodeString(in)
		var got OrderedMap
		if err := (CBORBody{}).Unmarshal(data, &got); err != nil || !deepEqual(got, want) {
			t.Errorf("%s: %#v, %v", in, got, err)
		}
		var gm map[string]any
		if err := (CBORBody{}).Unmarshal(data, &gm); err != nil || !deepEqual(gm, toMap(want)) {
			t.Errorf("%s map: %#v, %v", in, gm, err)
		}
	}
}

func TestRawBody(t *testing.T) {
	var r RawBody
	if r.Kind() != codec.BodyKindRaw {
		t.Fatal("kind")
	}
	for _, v := range []any{[]byte("kettle"), "kettle"} {
		got, err := r.Marshal([]byte("a "), v)
		if err != nil || string(got) != "a kettle" {
			t.Errorf("%T: %q, %v", v, got, err)
		}
	}
	if got, err := r.Marshal([]byte("x"), nil); err != nil || string(got) != "x" {
		t.Errorf("nil: %q, %v", got, err)
	}
	if _, err := r.Marshal(nil, 3); !errors.Is(err, ErrUnsupportedValue) {
		t.Errorf("int: %v", err)
	}
	data := []byte("fish")
	buf := make([]byte, 0, 16)
	if err := r.Unmarshal(data, &buf); err != nil || string(buf) != "fish" || cap(buf) != 16 {
		t.Errorf("*[]byte: %q, %v", buf, err)
	}
	var s string
	var a any
	if err := r.Unmarshal(data, &s); err != nil || s != "fish" {
		t.Errorf("*string: %q, %v", s, err)
	}
	if err := r.Unmarshal(data, &a); err != nil || !bytes.Equal(a.([]byte), data) {
		t.Errorf("*any: %v, %v", a, err)
	}
	data[0] = 'd'
	if string(a.([]byte)) != "fish" || string(buf) != "fish" {
		t.Error("raw unmarshal aliases its input")
	}
	for _, target := range []any{nil, new(int), (*[]byte)(nil)} {
		if err := r.Unmarshal(data, target); !errors.Is(err, ErrUnsupportedValue) {
			t.Errorf("%T: %v", target, err)
		}
	}
}

func TestNadaBody(t *testing.T) {
	var n NadaBody
	if got, err := n.Marshal([]byte("x"), nil); err != nil || string(got) != "x" {
		t.Errorf("nil: %q, %v", got, err)
	}
	if _, err := n.Marshal(nil, map[string]any{"a": 1}); !errors.Is(err, ErrUnsupportedValue) {
		t.Errorf("non-empty: %v", err)
	}
	if err := n.Unmarshal(nil, nil); err != nil {
		t.Errorf("empty: %v", err)
	}
	if err := n.Unmarshal([]byte{1}, nil); !errors.Is(err, ErrMalformedBody) {
		t.Errorf("non-empty: %v", err)
	}
}

func TestSerializerFor(t *testing.T) {
	for _, k := range []codec.BodyKind{codec.BodyKindNada, codec.BodyKindJSON, codec.BodyKindRaw, codec.BodyKindMsgpack, codec.BodyKindCBOR} {
		s, err := SerializerFor(k)
		if err != nil || s.Kind() != k {
			t.Errorf("kind %d: %v, %v", k, s, err)
		}
	}
	for _, k := range []codec.BodyKind{5, 254} {
		_, err := SerializerFor(k)
		var be *BodyError
		if !errors.Is(err, ErrUnknownBodyKind) || !errors.As(err, &be) || be.Kind != k || be.Op != "lookup" {
			t.Errorf("kind %d: %v", k, err)
		}
	}
}

// OrderedMap keeps its order inside structs handled by the libraries.
func TestOrderedMapInStruct(t *testing.T) {
	type wrap struct {
		M OrderedMap `json:"m" msgpack:"m" cbor:"m"`
		N int        `json:"n" msgpack:"n" cbor:"n"`
	}
	in := wrap{M: OrderedMap{{"z", int64(1)}, {"a", OrderedMap{{"y", "é"}, {"b", int64(2)}}}}, N: 7}
	for _, s := range mappingKinds {
		enc, err := s.Marshal(nil, in)
		if err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		var out wrap
		if err := s.Unmarshal(enc, &out); err != nil || out.N != 7 || !deepEqual(out.M, in.M) {
			t.Errorf("%T: %+v, %v", s, out, err)
		}
		// A null (nil) OrderedMap field.
		enc, err = s.Marshal(nil, wrap{N: 1})
		if err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		out = wrap{}
		if err := s.Unmarshal(enc, &out); err != nil || out.M != nil || out.N != 1 {
			t.Errorf("%T null: %+v, %v", s, out, err)
		}
	}
	if got, _ := (JSONBody{}).Marshal(nil, in); string(got) != `{"m":{"z":1,"a":{"y":"\u00e9","b":2}},"n":7}` {
		t.Errorf("json: %s", got)
	}
}

// Marshal keeps what dst held and appends in place when it has room.
func TestMarshalAppends(t *testing.T) {
	for _, s := range mappingKinds {
		dst := make([]byte, 3, 256)
		copy(dst, "abc")
		out, err := s.Marshal(dst, map[string]any{"k": "v"})
		if err != nil || string(out[:3]) != "abc" || &out[0] != &dst[0] || len(out) <= 3 {
			t.Errorf("%T: %q, %v", s, out, err)
		}
		var m map[string]any
		if err := s.Unmarshal(out[3:], &m); err != nil || m["k"] != "v" {
			t.Errorf("%T: back %v, %v", s, m, err)
		}
	}
}

// ---------------------------------------------------------------------------
// Fuzzing

// bodySeeds returns encodings of assorted mappings, from the encoder.
func bodySeeds(tb testing.TB, s Serializer) [][]byte {
	values := []any{
		pySample(), mpSample([]byte{1}), map[string]any{"a": []any{1, "x", nil, true, 2.5, map[string]any{"b": "é"}}},
		OrderedMap{{"subject", "hello main"}, {"n", int64(1)}, {"from", "other"}},
		map[string]any{"misseds": []any{1, 2, 3}},
	}
	var seeds [][]byte
	for _, v := range values {
		enc, err := s.Marshal(nil, v)
		if err != nil { // msgpack has no integers beyond 64 bits
			continue
		}
		seeds = append(seeds, enc)
	}
	return append(seeds, nil)
}

// fuzzBody checks that Unmarshal never panics, that the map and ordered
// decoders agree, and that what decodes re-encodes to the same value.
func fuzzBody(t *testing.T, s Serializer, data []byte) {
	var m map[string]any
	errM := s.Unmarshal(data, &m)
	var om OrderedMap
	errO := s.Unmarshal(data, &om)
	var st fuzzTarget
	if err := s.Unmarshal(data, &st); errors.Is(err, errDecoderPanic) {
		t.Fatal(err) // a library panic, caught only by the last guard
	}
	if (errM == nil) != (errO == nil) {
		t.Fatalf("map decoder: %v; ordered decoder: %v", errM, errO)
	}
	if errM != nil {
		var be *BodyError
		if !errors.As(errM, &be) {
			t.Fatalf("untyped error %T: %v", errM, errM)
		}
		return
	}
	if !deepEqual(toMap(om), m) {
		t.Fatalf("decoders disagree:\n%#v\n%#v", m, om)
	}
	enc, err := s.Marshal(nil, m)
	if err != nil {
		t.Fatalf("re-marshal map: %v", err)
	}
	var m2 map[string]any
	if err := s.Unmarshal(enc, &m2); err != nil {
		t.Fatalf("unmarshal re-marshaled map %x: %v", enc, err)
	}
	if !deepEqual(m, m2) {
		t.Fatalf("map round trip:\n%#v\n%#v", m, m2)
	}
	enc, err = s.Marshal(nil, om)
	if err != nil {
		t.Fatalf("re-marshal ordered: %v", err)
	}
	var om2 OrderedMap
	if err := s.Unmarshal(enc, &om2); err != nil {
		t.Fatalf("unmarshal re-marshaled ordered %x: %v", enc, err)
	}
	if !deepEqual(om, om2) {
		t.Fatalf("ordered round trip:\n%#v\n%#v", om, om2)
	}
	if enc2, _ := s.Marshal(nil, om2); !bytes.Equal(enc, enc2) {
		t.Fatalf("ordered encoding not stable:\n%x\n%x", enc, enc2)
	}
}

// fuzzTarget is a struct of the kinds of fields a library user decodes
// into; the library decoders fill it.
type fuzzTarget struct {
	A any            `json:"a" msgpack:"a" cbor:"a"`
	S string         `json:"s" msgpack:"s" cbor:"s"`
	M map[string]any `json:"m" msgpack:"m" cbor:"m"`
	L []any          `json:"l" msgpack:"l" cbor:"l"`
	I []int          `json:"i" msgpack:"i" cbor:"i"`
	N *fuzzTarget    `json:"n" msgpack:"n" cbor:"n"`
	O OrderedMap     `json:"o" msgpack:"o" cbor:"o"`
	B []byte         `json:"b" msgpack:"b" cbor:"b"`
}

// mpDupCrasher is the input the fuzzer found: an 11-entry msgpack map
// whose keys repeat, decoded into a struct with an any field, made the
// library set the second value into the first one in place and panic.
var mpDupCrasher = func() []byte {
	b := []byte{0x8b}
	for i := range 11 {
		b = append(b, 0xa1, "aAs"[i%3], byte(i))
	}
	return b
}()

func TestDuplicateKeysIntoStruct(t *testing.T) {
	type target struct {
		A any `json:"a" msgpack:"a" cbor:"a"`
		N struct {
			X any `json:"x" msgpack:"x" cbor:"x"`
		} `json:"n" msgpack:"n" cbor:"n"`
	}
	// {"a":1,"n":{"x":"p","x":"q"},"a":2}. The last value wins, as in the
	// dynamic values. (The CBOR library keeps the first value in a nested
	// struct; CBOR is only spoken between raet-go estates.)
	inputs := map[Serializer][]byte{
		JSONBody{}:    []byte(`{"a":1,"n":{"x":"p","x":"q"},"a":2}`),
		MsgpackBody{}: []byte("\x83\xa1a\x01\xa1n\x82\xa1x\xa1p\xa1x\xa1q\xa1a\x02"),
	}
	for s, data := range inputs {
		var got target
		if err := s.Unmarshal(data, &got); err != nil {
			t.Fatalf("%v: %v", s.Kind(), err)
		}
		if fmt.Sprint(got.A) != "2" || got.N.X != "q" {
			t.Errorf("%v: got %+v, want the last values a=2, n.x=q", s.Kind(), got)
		}
	}
	var got target
	if err := (CBORBody{}).Unmarshal([]byte("\xa3\x61a\x01\x61n\xa2\x61x\x61p\x61x\x61q\x61a\x02"), &got); err != nil {
		t.Fatal(err)
	}
	// The crasher: keys a, A, s, a, A, s, ... with the values 0 to 10.
	var st struct {
		A any `msgpack:"a"`
		S any `msgpack:"s"`
	}
	if err := (MsgpackBody{}).Unmarshal(mpDupCrasher, &st); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(st.A, st.S) != "9 8" {
		t.Fatalf("crasher decoded to %+v, want the last values a=9 s=8", st)
	}
}

// TestDecoderPanicGuard: a target that makes the msgpack library panic
// whatever the input (an any field that already holds a value) gets an
// error, not a crash.
func TestDecoderPanicGuard(t *testing.T) {
	st := struct {
		A any `msgpack:"a"`
	}{A: 5}
	err := MsgpackBody{}.Unmarshal([]byte("\x81\xa1a\x01"), &st)
	if !errors.Is(err, ErrMalformedBody) || !errors.Is(err, errDecoderPanic) {
		t.Fatalf("err = %v, want a malformed body from a caught panic", err)
	}
}

func FuzzJSONUnmarshal(f *testing.F) {
	for _, seed := range bodySeeds(f, JSONBody{}) {
		f.Add(seed)
	}
	f.Add(golden(f, "json_ordered.golden"))
	f.Add([]byte(`{"a":[[[[{}]]]],"b":"\ud83d\ude00","c":-0.0e-0}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzBody(t, JSONBody{}, data) })
}

func FuzzMsgpackUnmarshal(f *testing.F) {
	for _, seed := range bodySeeds(f, MsgpackBody{}) {
		f.Add(seed)
	}
	f.Add(golden(f, "msgpack_current.golden"))
	f.Add(golden(f, "msgpack_old_raw.golden"))
	f.Add([]byte("\x81\xa1t\xc7\x0c\xff\x00\x00\x00\x03\xff\xff\xff\xff\xff\xff\xff\xfe"))
	f.Add(mpDupCrasher)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzBody(t, MsgpackBody{}, data) })
}

func FuzzCBORUnmarshal(f *testing.F) {
	for _, seed := range bodySeeds(f, CBORBody{}) {
		f.Add(seed)
	}
	f.Add([]byte("\xbf\x61a\x9f\x01\xff\xff"))
	f.Add([]byte("\xa1\x61a\xc2\x49\x01\x00\x00\x00\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzBody(t, CBORBody{}, data) })
}

func FuzzRawUnmarshal(f *testing.F) {
	f.Add([]byte("This is a fine kettle of fish."))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b []byte
		if err := (RawBody{}).Unmarshal(data, &b); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("%v", err)
		}
		enc, err := RawBody{}.Marshal(nil, b)
		if err != nil || !bytes.Equal(enc, data) {
			t.Fatalf("%v", err)
		}
	})
}

// ---------------------------------------------------------------------------
// Benchmarks

func benchSample() map[string]any {
	return map[string]any{"subject": "hello main", "n": 1, "from": "other", "list": []any{1, 2, 3}, "ok": true}
}

func benchBody(b *testing.B, s Serializer, unmarshal bool) {
	v := benchSample()
	enc, err := s.Marshal(nil, v)
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		if unmarshal {
			var m map[string]any
			err = s.Unmarshal(enc, &m)
		} else {
			_, err = s.Marshal(dst, v)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBodyMarshal(b *testing.B) {
	for _, s := range mappingKinds {
		b.Run(s.Kind().String(), func(b *testing.B) { benchBody(b, s, false) })
	}
}

func BenchmarkBodyUnmarshal(b *testing.B) {
	for _, s := range mappingKinds {
		b.Run(s.Kind().String(), func(b *testing.B) { benchBody(b, s, true) })
	}
}

func TestRegisterSerializer(t *testing.T) {
	if err := RegisterSerializer(JSONBody{}); err == nil {
		t.Fatal("replaced a built-in kind")
	}
	s := upperRaw{}
	if err := RegisterSerializer(s); err != nil {
		t.Fatal(err)
	}
	defer UnregisterSerializer(s.Kind())
	if err := RegisterSerializer(s); err == nil {
		t.Fatal("registered a kind twice")
	}
	got, err := SerializerFor(s.Kind())
	if err != nil || got.Kind() != s.Kind() {
		t.Fatalf("SerializerFor = %v, %v", got, err)
	}
	UnregisterSerializer(s.Kind())
	if _, err := SerializerFor(s.Kind()); !errors.Is(err, ErrUnknownBodyKind) {
		t.Fatalf("after unregister: %v", err)
	}
}

// upperRaw is a test serializer of an unused body kind.
type upperRaw struct{ RawBody }

func (upperRaw) Kind() codec.BodyKind { return 200 }

// Two registries hold different serializers for one kind; a nil registry
// is the process-wide one.
func TestRegistryPerStack(t *testing.T) {
	a, b := NewRegistry(), NewRegistry()
	if err := a.Register(upperRaw{}); err != nil {
		t.Fatal(err)
	}
	other := otherRaw{}
	if err := b.Register(other); err != nil {
		t.Fatal(err)
	}
	sa, errA := a.Lookup(200)
	sb, errB := b.Lookup(200)
	if errA != nil || errB != nil || sa != (upperRaw{}) || sb != other {
		t.Fatalf("a: %v %v; b: %v %v", sa, errA, sb, errB)
	}
	if _, err := SerializerFor(200); !errors.Is(err, ErrUnknownBodyKind) {
		t.Fatalf("the process-wide registry sees a stack's kind: %v", err)
	}
	if err := a.Register(JSONBody{}); err == nil {
		t.Fatal("replaced a built-in kind")
	}
	if s, err := b.Lookup(codec.BodyKindMsgpack); err != nil || s != (MsgpackBody{}) {
		t.Fatalf("built-in kind: %v %v", s, err)
	}
	var none *Registry
	if err := none.Register(upperRaw{}); err != nil {
		t.Fatal(err)
	}
	defer UnregisterSerializer(200)
	if s, err := SerializerFor(200); err != nil || s != (upperRaw{}) {
		t.Fatalf("nil registry is not the process-wide one: %v %v", s, err)
	}
	a.Unregister(200)
	if _, err := a.Lookup(200); !errors.Is(err, ErrUnknownBodyKind) {
		t.Fatalf("after unregister: %v", err)
	}
}

type otherRaw struct{ RawBody }

func (otherRaw) Kind() codec.BodyKind { return 200 }
