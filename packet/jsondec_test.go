package packet

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// ---------------------------------------------------------------------------
// The oracle: JSONBody.Unmarshal as it was before the one-pass decoder,
// scanJSON's checks followed by encoding/json with UseNumber.

func oracleEOF(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return malformedf("data after the JSON object")
		}
		return malformed(err)
	}
	return nil
}

func oracleNumber(n json.Number) (any, error) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		return intFromString(s)
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, malformedf("number %q out of range", s)
	}
	return f, nil
}

func oracleFixNumbers(v any) error {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if n, ok := e.(json.Number); ok {
				var err error
				if x[k], err = oracleNumber(n); err != nil {
					return err
				}
			} else if err := oracleFixNumbers(e); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if n, ok := e.(json.Number); ok {
				var err error
				if x[i], err = oracleNumber(n); err != nil {
					return err
				}
			} else if err := oracleFixNumbers(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// oracleJSONMap decodes data into a map. It departs from the old map
// decoder in one point: that converted the numbers only after decoding, so
// a number out of range in the value of a duplicate key that a later one
// replaced went unnoticed ({"a":1e400,"a":1} was accepted into a map,
// rejected into an OrderedMap). The new decoder rejects it into both; so
// does the oracle, given the result of oracleJSONOrdered for the same data,
// whose token-based decoding converts every number.
func oracleJSONMap(data []byte, errOrdered error) (map[string]any, error) {
	if err := scanJSON(data); err != nil {
		return nil, err
	}
	if errors.Is(errOrdered, ErrMalformedBody) && strings.Contains(errOrdered.Error(), "out of range") {
		return nil, errOrdered
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, malformed(err)
	}
	if err := oracleEOF(dec); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, ErrNotMapping
	}
	if err := oracleFixNumbers(m); err != nil {
		return nil, err
	}
	return m, nil
}

func oracleJSONOrdered(data []byte) (OrderedMap, error) {
	if err := scanJSON(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, malformed(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, ErrNotMapping
	}
	m, err := oracleObject(dec, 1)
	if err != nil {
		return nil, err
	}
	if err := oracleEOF(dec); err != nil {
		return nil, err
	}
	return m, nil
}

func oracleObject(dec *json.Decoder, depth int) (OrderedMap, error) {
	if depth > MaxBodyDepth {
		return nil, ErrBodyTooDeep
	}
	b := orderedBuilder{m: OrderedMap{}}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, malformed(err)
		}
		if d, ok := tok.(json.Delim); ok && d == '}' {
			return b.m, nil
		}
		key, ok := tok.(string)
		if !ok {
			return nil, malformedf("object key is %T", tok)
		}
		if tok, err = dec.Token(); err != nil {
			return nil, malformed(err)
		}
		val, err := oracleValue(dec, tok, depth)
		if err != nil {
			return nil, err
		}
		b.set(key, val)
	}
}

func oracleValue(dec *json.Decoder, tok json.Token, depth int) (any, error) {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			return oracleObject(dec, depth+1)
		case '[':
			if depth+1 > MaxBodyDepth {
				return nil, ErrBodyTooDeep
			}
			arr := []any{}
			for {
				tok, err := dec.Token()
				if err != nil {
					return nil, malformed(err)
				}
				if d, ok := tok.(json.Delim); ok && d == ']' {
					return arr, nil
				}
				v, err := oracleValue(dec, tok, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
		}
		return nil, malformedf("unexpected %v", t)
	case json.Number:
		return oracleNumber(t)
	case string, bool, nil:
		return t, nil
	}
	return nil, malformedf("unexpected token %T", tok)
}

// ---------------------------------------------------------------------------
// Comparison

// errClass names the sentinel an error wraps.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrBodyTooDeep):
		return "too deep"
	case errors.Is(err, ErrNotMapping):
		return "not a mapping"
	case errors.Is(err, ErrMalformedBody):
		return "malformed"
	}
	return "unexpected error " + err.Error()
}

// checkJSONDifferential decodes data with the new decoder and the oracle,
// into both targets, and fails unless they agree on acceptance, error
// class and result. It also checks the public Unmarshal on the same input.
func checkJSONDifferential(t *testing.T, data []byte) {
	t.Helper()
	wantO, oerrO := oracleJSONOrdered(data)
	gotM, errM := unmarshalJSONMap(data)
	wantM, oerrM := oracleJSONMap(data, oerrO)
	if errClass(errM) != errClass(oerrM) {
		t.Fatalf("map %q: got %v (%s), oracle %v (%s)", data, errM, errClass(errM), oerrM, errClass(oerrM))
	}
	if errM == nil && !deepEqual(gotM, wantM) {
		t.Fatalf("map %q:\n got %#v\nwant %#v", data, gotM, wantM)
	}
	gotO, errO := unmarshalJSONOrdered(data)
	if errClass(errO) != errClass(oerrO) {
		t.Fatalf("ordered %q: got %v (%s), oracle %v (%s)", data, errO, errClass(errO), oerrO, errClass(oerrO))
	}
	if errO == nil && !deepEqual(gotO, wantO) {
		t.Fatalf("ordered %q:\n got %#v\nwant %#v", data, gotO, wantO)
	}
	if len(data) == 0 { // Unmarshal's own rule
		return
	}
	var a any
	err := JSONBody{}.Unmarshal(data, &a)
	var be *BodyError
	if err != nil && !errors.As(err, &be) {
		t.Fatalf("*any %q: untyped error %T %v", data, err, err)
	}
	if errClass(err) != errClass(oerrM) || err == nil && !deepEqual(a, wantM) {
		t.Fatalf("*any %q: got %#v, %v; oracle %#v, %v", data, a, err, wantM, oerrM)
	}
}

// jsonDiffSeeds returns encoder output of varied values and hand-written
// inputs that probe the corners of the grammar.
func jsonDiffSeeds(tb testing.TB) [][]byte {
	values := []any{
		pySample(), mpSample("\x01\x02\x03"),
		map[string]any{"data": strings.Repeat("x", 1013)},
		map[string]any{"": "", "k\x00\u2028": "\x01\x1f\x7f\u0080\uffff\U0010ffff😀é\"\\/<>&"},
		OrderedMap{{"z", 1}, {"a", -1.5e-300}, {"m", []any{[]any{}, OrderedMap{}, map[string]any{}, nil}}},
		map[string]any{"ints": []any{0, -1, math.MaxInt64, math.MinInt64, uint64(math.MaxUint64),
			mustBig("-123456789012345678901234567890")}},
		map[string]any{"floats": []any{0.1, 1e21, 1e-7, math.MaxFloat64, math.SmallestNonzeroFloat64,
			math.Copysign(0, -1), float32(0.1)}},
		map[string]any{"deep": nestedValue(MaxBodyDepth - 1)},
	}
	var seeds [][]byte
	for _, v := range values {
		enc, err := JSONBody{}.Marshal(nil, v)
		if err != nil {
			tb.Fatalf("marshal %#v: %v", v, err)
		}
		seeds = append(seeds, enc)
	}
	for _, s := range []string{
		``, ` `, `{}`, " \t\r\n{ \t\r\n} \t\r\n", `{"a":1}`, `{"a" : [ 1 , 2 ] , "b" : { } }`,
		// strings and escapes
		`{"a":"\"\\\/\b\f\n\r\t"}`, `{"a":"\u00e9\u20AC\u0000\u001f"}`, `{"a":"\ud83d\ude00"}`,
		`{"a":"\uD83D\uDE00"}`, `{"a":"\ud83d"}`, `{"a":"\ude00"}`, `{"a":"\ud83dx"}`,
		`{"a":"\ud83d\ud83d\ude00"}`, `{"a":"\ud83d\u0041"}`, `{"a":"\ud83d\n"}`, `{"a":"\udbff\udfff"}`,
		`{"a":"\ude00\ud83d"}`, `{"a":"\ud83d\u12"}`, `{"a":"\u12"}`, `{"a":"\ud83d\"}`, `{"a":"\x"}`,
		`{"a":"\'"}`, `{"a":"\U0041"}`, `{"\u0061":1,"a":2}`, "{\"a\":\"\x01\"}", "{\"a\":\"\t\"}",
		"{\"a\":\"\x7f\"}", `{"a":"é€😀"}`, "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xc0\xaf\"}",
		"{\"a\":\"\xff\"}", "{\"a\":\"\\u00e9\xff\"}", `{"a":"\\"}`, `{"a":"\\\""}`, `{"a":"`, `{"a":"\`,
		// numbers
		`{"a":0}`, `{"a":-0}`, `{"a":-0.0}`, `{"a":0.0e0}`, `{"a":1E+2}`, `{"a":1e-2}`, `{"a":1.5e3}`,
		`{"a":1e400}`, `{"a":-1e400}`, `{"a":1e-400}`, `{"a":1.7976931348623159e308}`,
		`{"a":9223372036854775807}`, `{"a":9223372036854775808}`, `{"a":-9223372036854775808}`,
		`{"a":-9223372036854775809}`, `{"a":18446744073709551615}`, `{"a":18446744073709551616}`,
		`{"a":999999999999999999}`, `{"a":-999999999999999999}`, `{"a":1000000000000000000}`,
		`{"a":123456789012345678901234567890123456789}`, `{"a":00}`, `{"a":01}`, `{"a":-01}`,
		`{"a":1.}`, `{"a":.1}`, `{"a":1e}`, `{"a":1e+}`, `{"a":+1}`, `{"a":-}`, `{"a":0x10}`,
		`{"a":1_000}`, `{"a":NaN}`, `{"a":Infinity}`, `{"a":-Infinity}`, `{"a":1.5.5}`, `{"a":--1}`,
		// literals
		`{"a":true,"b":false,"c":null}`, `{"a":tru}`, `{"a":True}`, `{"a":nul}`, `{"a":nulll}`,
		`{"a":truefalse}`, `{"a":f}`,
		// structure
		`{"a":1,"a":2}`, `{"a":1,"b":2,"a":3}`, `{"a":{"x":1},"a":{"y":2}}`, `{"a":[]}`, `{"a":[ ]}`,
		`{"a":[1,[2,[]],{}]}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":}`,
		`{"a":1 "b":2}`, `{1:2}`, `{'a':1}`, `{a:1}`, `{"a":1}}`, `{"a":1}]`, `{"a":1`, `{"a`, `{`,
		`{"a":1}x`, `{"a":1} {"b":2}`, `{"a":1}` + "\xff", "\xff{}", `[1]`, `[1] ` + "\xff", `"s"`,
		`null`, `1`, "\ufeff{}", "\v{}", `{"a":[}`, `{"a":{]}`, `{"a":"[[[[{{{{"}`,
		// nesting: at the limit, beyond it, and beyond it after a fault
		`{"a":` + nested("[", "]", "1", MaxBodyDepth-1) + `}`,
		`{"a":` + nested("[", "]", "1", MaxBodyDepth) + `}`,
		`{"a":` + nested(`{"b":`, "}", "1", MaxBodyDepth-1) + `}`,
		`{"a":` + nested(`{"b":`, "}", "1", MaxBodyDepth) + `}`,
		`{"a":x` + strings.Repeat("[", MaxBodyDepth+1),
		`{"a":1}` + strings.Repeat("[", MaxBodyDepth+1),
		`{"a":"` + "\xff" + `",` + strings.Repeat("[", MaxBodyDepth+1),
		`[` + strings.Repeat("[", MaxBodyDepth+1),
		`{"a":` + strings.Repeat("[", MaxBodyDepth-1) + `"\"` + strings.Repeat("[", 10),
	} {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// nestedValue returns depth levels of arrays and maps, alternating.
func nestedValue(depth int) any {
	var v any = "leaf"
	for i := range depth {
		if i%2 == 0 {
			v = []any{v}
		} else {
			v = map[string]any{"k": v}
		}
	}
	return v
}

func TestJSONDecodeDifferential(t *testing.T) {
	seeds := jsonDiffSeeds(t)
	for _, s := range seeds {
		checkJSONDifferential(t, s)
	}
	// Random JSON-ish texts and single-byte mutations of the seeds.
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		checkJSONDifferential(t, randomJSON(rng))
		s := bytes.Clone(seeds[rng.IntN(len(seeds))])
		if len(s) > 0 {
			const subst = "{}[]\",:\\ u0e-.+1x\xff\x00"
			s[rng.IntN(len(s))] = subst[rng.IntN(len(subst))]
		}
		checkJSONDifferential(t, s)
	}
}

// randomJSON writes a random object, mostly valid, sometimes with a
// random fault.
func randomJSON(rng *rand.Rand) []byte {
	var b []byte
	var value func(depth int)
	space := func() {
		if rng.IntN(8) == 0 {
			b = append(b, " \t\r\n"[rng.IntN(4)])
		}
	}
	str := func() {
		b = append(b, '"')
		for range rng.IntN(6) {
			switch rng.IntN(10) {
			case 0:
				b = append(b, `\u`...)
				b = append(b, []string{"d83d", "de00", "DBFF", "dfff", "0000", "00e9", "fffe"}[rng.IntN(7)]...)
			case 1:
				b = append(b, '\\', `"\/bfnrt`[rng.IntN(8)])
			case 2:
				b = append(b, "é😀\u2028"[rng.IntN(3)*2:]...)
			default:
				b = append(b, byte('a'+rng.IntN(3)))
			}
		}
		b = append(b, '"')
	}
	value = func(depth int) {
		space()
		switch k := rng.IntN(9); {
		case k == 0 && depth < 6:
			b = append(b, '{')
			for i := range rng.IntN(4) {
				if i > 0 {
					b = append(b, ',')
				}
				space()
				str()
				space()
				b = append(b, ':')
				value(depth + 1)
			}
			b = append(b, '}')
		case k == 1 && depth < 6:
			b = append(b, '[')
			for i := range rng.IntN(4) {
				if i > 0 {
					b = append(b, ',')
				}
				value(depth + 1)
			}
			b = append(b, ']')
		case k == 2:
			str()
		case k == 3:
			b = append(b, []string{"true", "false", "null"}[rng.IntN(3)]...)
		default:
			b = append(b, []string{"0", "-0", "1", "-12", "1.5", "-0.0", "1e3", "2E-2", "1e400",
				"18446744073709551615", "-9223372036854775809", "99999999999999999999999"}[rng.IntN(12)]...)
		}
		space()
	}
	b = append(b, '{')
	for i := range rng.IntN(5) {
		if i > 0 {
			b = append(b, ',')
		}
		space()
		str()
		b = append(b, ':')
		value(1)
	}
	b = append(b, '}')
	if rng.IntN(4) == 0 {
		const subst = "{}[]\",:\\ \x01\xff"
		b[rng.IntN(len(b))] = subst[rng.IntN(len(subst))]
	}
	return b
}

func FuzzJSONDecodeDifferential(f *testing.F) {
	for _, s := range jsonDiffSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkJSONDifferential(t, data) })
}

// ---------------------------------------------------------------------------
// Edge cases, pinned

func TestJSONDecodeEdgeCases(t *testing.T) {
	const (
		ok     = ""
		bad    = "malformed"
		deep   = "too deep"
		notMap = "not a mapping"
	)
	fffd := "\ufffd"
	cases := []struct {
		in   string
		want any // the value of key "a" in the map target, if the class is ok
		err  string
	}{
		{`{"a":"\"\\\/\b\f\n\r\t"}`, "\"\\/\b\f\n\r\t", ok},
		{`{"a":"x\u00e9\u20ACy\u0000"}`, "xé€y\x00", ok},
		{`{"a":"\ud83d\ude00"}`, "😀", ok},
		{`{"a":"\uD83D\uDE00"}`, "😀", ok},
		{`{"a":"\udbff\udfff"}`, "\U0010ffff", ok},
		{`{"a":"\ud83d"}`, fffd, ok},
		{`{"a":"\ude00"}`, fffd, ok},
		{`{"a":"\ude00\ud83d"}`, fffd + fffd, ok},
		{`{"a":"\ud83dx"}`, fffd + "x", ok},
		{`{"a":"\ud83d\ud83d\ude00"}`, fffd + "😀", ok},
		{`{"a":"\ud83d\u0041"}`, fffd + "A", ok},
		{`{"a":"\ud83d\n"}`, fffd + "\n", ok},
		{`{"a":"\ud83d\u12"}`, nil, bad},
		{`{"a":"\u12"}`, nil, bad},
		{`{"a":"\x"}`, nil, bad},
		{`{"a":"\'"}`, nil, bad},
		{"{\"a\":\"\x01\"}", nil, bad},
		{"{\"a\":\"\t\"}", nil, bad},
		{"{\"a\":\"\x7f\"}", "\x7f", ok},
		{`{"a":"é€😀"}`, "é€😀", ok},
		{"{\"a\":\"\xed\xa0\x80\"}", nil, bad}, // a surrogate in UTF-8
		{"{\"a\":\"\xc0\xaf\"}", nil, bad},     // overlong
		{"{\"a\":\"\\n\xff\"}", nil, bad},
		{`{"a":1}` + "\xff", nil, bad},
		{"\xff{}", nil, bad},
		{"[1] \xff", nil, bad},
		{`[1]`, nil, notMap},
		{"\ufeff{}", nil, notMap},
		{`{"a":0}`, int64(0), ok},
		{`{"a":-0}`, int64(0), ok},
		{`{"a":-0.0}`, math.Copysign(0, -1), ok},
		{`{"a":1E+2}`, 100.0, ok},
		{`{"a":1e-400}`, 0.0, ok},
		{`{"a":1e400}`, nil, bad},
		{`{"a":-1e400}`, nil, bad},
		{`{"a":999999999999999999}`, int64(999999999999999999), ok},
		{`{"a":-9223372036854775808}`, int64(math.MinInt64), ok},
		{`{"a":9223372036854775808}`, uint64(1 << 63), ok},
		{`{"a":18446744073709551615}`, uint64(math.MaxUint64), ok},
		{`{"a":18446744073709551616}`, mustBig("18446744073709551616"), ok},
		{`{"a":-9223372036854775809}`, mustBig("-9223372036854775809"), ok},
		{`{"a":01}`, nil, bad},
		{`{"a":1.}`, nil, bad},
		{`{"a":.1}`, nil, bad},
		{`{"a":1e+}`, nil, bad},
		{`{"a":+1}`, nil, bad},
		{`{"a":NaN}`, nil, bad},
		{`{"a":-Infinity}`, nil, bad},
		{`{"a":true}`, true, ok},
		{`{"a":null}`, nil, ok},
		{`{"a":nulll}`, nil, bad},
		{`{"a":True}`, nil, bad},
		{`{"a":1,"a":2}`, int64(2), ok},
		{`{"a":1e400,"a":2}`, nil, bad}, // the old map decoder accepted this
		{`{"a":[1e400],"a":2}`, nil, bad},
		{`{"a":{"x":1},"a":{"y":2}}`, map[string]any{"y": int64(2)}, ok},
		{`{"a":[ ]}`, []any{}, ok},
		{`{"a":[{},[]]}`, []any{map[string]any{}, []any{}}, ok},
		{`{"a":[1,]}`, nil, bad},
		{`{"a":1,}`, nil, bad},
		{`{"a":1}}`, nil, bad},
		{`{"a":1} {"b":2}`, nil, bad},
		{" \t\r\n{\"a\" : 1 } \t\r\n", int64(1), ok},
		{"\v{}", nil, notMap},
		{" ", nil, bad},
		{`{"a":"[[[[{{{{"}`, "[[[[{{{{", ok},
		{`{"a":` + nested("[", "]", "1", MaxBodyDepth-1) + `}`, nil, ok},
		{`{"a":` + nested("[", "]", "1", MaxBodyDepth) + `}`, nil, deep},
		{`{"a":` + nested(`{"b":`, "}", "1", MaxBodyDepth) + `}`, nil, deep},
		{`{"a":` + nested("[", "]", "1", 1_000_000) + `}`, nil, deep},
		// The error class precedence of scanJSON: invalid UTF-8, then not a
		// mapping, then too deep, then any other fault.
		{`{"a":x` + strings.Repeat("[", MaxBodyDepth), nil, deep},
		{`{"a":1}` + strings.Repeat("{", MaxBodyDepth), nil, bad},
		{`{"a":1}` + strings.Repeat("{", MaxBodyDepth+1), nil, deep},
		{`{"a":"` + "\xff" + `",` + strings.Repeat("[", MaxBodyDepth), nil, bad},
		{`{"a":` + strings.Repeat("[", MaxBodyDepth) + "\xff", nil, bad},
		{`[` + strings.Repeat("[", MaxBodyDepth+1), nil, notMap},
	}
	for _, c := range cases {
		for _, ordered := range []bool{false, true} {
			var got any
			var err error
			if ordered {
				var om OrderedMap
				err = JSONBody{}.Unmarshal([]byte(c.in), &om)
				got = plain(om)
			} else {
				var m map[string]any
				err = JSONBody{}.Unmarshal([]byte(c.in), &m)
				got = m
			}
			name := c.in
			if len(name) > 40 {
				name = name[:40] + "…"
			}
			if c.err != ok {
				var be *BodyError
				if errClass(err) != c.err || !errors.As(err, &be) {
					t.Errorf("%q (ordered %v): %v, want a *BodyError %s", name, ordered, err, c.err)
				}
				continue
			}
			if err != nil {
				t.Errorf("%q (ordered %v): %v", name, ordered, err)
				continue
			}
			if c.want != nil || strings.Contains(c.in, "null") {
				if v := got.(map[string]any)["a"]; !deepEqual(v, c.want) {
					t.Errorf("%q (ordered %v): a = %#v, want %#v", name, ordered, v, c.want)
				}
			}
		}
	}
}

func TestJSONDecodeDuplicatesOrdered(t *testing.T) {
	var om OrderedMap
	in := `{"a":1,"b":{"x":1,"y":2,"x":3},"a":[{"c":1,"c":2}]}`
	if err := (JSONBody{}).Unmarshal([]byte(in), &om); err != nil {
		t.Fatal(err)
	}
	want := OrderedMap{
		{"a", []any{OrderedMap{{"c", int64(2)}}}},
		{"b", OrderedMap{{"x", int64(3)}, {"y", int64(2)}}},
	}
	if !deepEqual(om, want) {
		t.Fatalf("got %#v", om)
	}
}

// Malformed input is reported with the offset of the fault.
func TestJSONDecodeErrorOffset(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"b":x}`:            "offset 11",
		`{"a":"\q"}`:               "offset 7",
		"{\"a\":\"ab\x01\"}":       "offset 8",
		`{"a":1} x`:                "offset 8",
		`{"a":1e999}`:              "offset 5",
		"{\"a\":\"\\u00e9\xff\"}":  "invalid UTF-8",
		`{"a":"abc`:                "end of JSON input",
		`{"abc":"\u12x4"}`:         "offset 8",
		`{"abc":[1,2` + "\n" + `}`: "offset 12",
	} {
		err := JSONBody{}.Unmarshal([]byte(in), new(map[string]any))
		if !errors.Is(err, ErrMalformedBody) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want ErrMalformedBody mentioning %q", in, err, want)
		}
	}
}

// Decoded values do not alias the input, and a failed decoding leaves
// nothing behind in the pooled decoder.
func TestJSONDecodeNoAliasing(t *testing.T) {
	data := []byte(`{"k":"value","e":"\u00e9scaped","l":["x"]}`)
	var m map[string]any
	if err := (JSONBody{}).Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'Z'
	}
	if m["k"] != "value" || m["e"] != "éscaped" || m["l"].([]any)[0] != "x" {
		t.Fatalf("aliased: %#v", m)
	}
	for k := range m {
		if k != "k" && k != "e" && k != "l" {
			t.Fatalf("aliased key %q", k)
		}
	}
	d := newJSONDecoder([]byte(`{"a":[1,{"b":[2,3,`), false)
	if err := d.top(); err == nil {
		t.Fatal("no error")
	}
	d.reset()
	for _, kv := range d.kvs[:cap(d.kvs)] {
		if kv.Key != "" || kv.Value != nil {
			t.Fatalf("entry %#v left on the stack", kv)
		}
	}
	for _, v := range d.vals[:cap(d.vals)] {
		if v != nil {
			t.Fatalf("element %#v left on the stack", v)
		}
	}
}

// A string without escapes costs one allocation (plus its boxing in any).
func TestJSONDecodeAllocs(t *testing.T) {
	if raceEnabled() {
		t.Skip("allocation counts are meaningless under -race")
	}
	data := []byte(`{"data":"` + strings.Repeat("x", 1013) + `"}`)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := unmarshalJSONMap(data); err != nil {
			t.Fatal(err)
		}
	})
	// The map and its group, the key, the string and its boxing.
	if allocs > 5 {
		t.Errorf("%v allocations per decoding, want 5", allocs)
	}
}
