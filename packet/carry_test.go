package packet

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
)

// A value that a body kind cannot carry is refused with ErrCannotCarry at
// any depth of the dynamic values, never re-encoded as something else.
func TestBodiesRefuseWhatTheyCannotCarry(t *testing.T) {
	big70 := new(big.Int).Lsh(big.NewInt(1), 70)
	wrap := func(v any) []any {
		return []any{
			map[string]any{"v": v},
			OrderedMap{{"a", 1}, {"v", v}},
			map[string]any{"l": []any{1, map[string]any{"v": v}}},
		}
	}
	cases := []struct {
		s Serializer
		v any
	}{
		{JSONBody{}, []byte{1, 2}},
		{JSONBody{}, time.Unix(1, 0).UTC()},
		{JSONBody{}, cbor.Tag{Number: 99, Content: 1}},
		{MsgpackBody{}, big70},
		{MsgpackBody{}, new(big.Int).Neg(big70)},
		{MsgpackBody{}, *big70},
		{MsgpackBody{}, json.Number("1180591620717411303424")},
		{MsgpackBody{}, cbor.Tag{Number: 99, Content: 1}},
	}
	for _, c := range cases {
		for _, v := range wrap(c.v) {
			out, err := c.s.Marshal([]byte("pre"), v)
			var be *BodyError
			if !errors.Is(err, ErrCannotCarry) || !errors.Is(err, ErrUnsupportedValue) ||
				!errors.As(err, &be) || be.Kind != c.s.Kind() || be.Op != "marshal" {
				t.Errorf("%v %#v: err = %v, want a marshal BodyError with ErrCannotCarry", c.s.Kind(), v, err)
			}
			if string(out) != "pre" {
				t.Errorf("%v %#v: dst changed to %q", c.s.Kind(), v, out)
			}
		}
	}
	// At the top level these are no mappings, as before.
	if _, err := (JSONBody{}).Marshal(nil, []byte("{}")); !errors.Is(err, ErrNotMapping) {
		t.Errorf("json []byte at the top: %v, want ErrNotMapping", err)
	}
	// CBOR carries them all.
	for _, c := range cases {
		if _, err := (CBORBody{}).Marshal(nil, map[string]any{"v": c.v}); err != nil {
			t.Errorf("cbor %#v: %v", c.v, err)
		}
	}
}

// Integers held in a *big.Int or json.Number go into msgpack as integers,
// and the caller's value is left as it was.
func TestMsgpackIntegersOfOtherTypes(t *testing.T) {
	in := map[string]any{"b": big.NewInt(-5), "u": new(big.Int).SetUint64(1 << 63),
		"n": json.Number("7"), "f": json.Number("1.5"), "l": []any{OrderedMap{{"x", big.NewInt(300)}}}}
	want := map[string]any{"b": int64(-5), "u": uint64(1 << 63), "n": int64(7), "f": 1.5,
		"l": []any{OrderedMap{{"x", int64(300)}}}}
	got, err := MsgpackBody{}.Marshal(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := MsgpackBody{}.Marshal(nil, want)
	if err != nil || !bytes.Equal(got, exp) {
		t.Fatalf("got %x, want %x (%v)", got, exp, err)
	}
	if in["b"].(*big.Int).Int64() != -5 || in["l"].([]any)[0].(OrderedMap)[0].Value.(*big.Int).Int64() != 300 {
		t.Fatal("the caller's value was changed")
	}
	if _, err := (MsgpackBody{}).Marshal(nil, map[string]any{"n": json.Number("x")}); !errors.Is(err, ErrUnsupportedValue) {
		t.Fatalf("bad json.Number: %v", err)
	}
}

// A body re-sent through an OrderedMap keeps its key order in its own kind
// and in the others, and what the other kind cannot carry is refused.
func TestResendKeepsOrder(t *testing.T) {
	const in = `{"z":1,"a":[2,{"y":null,"b":"\u00e9"}],"m":1.5}`
	var om OrderedMap
	if err := (JSONBody{}).Unmarshal([]byte(in), &om); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Serializer{JSONBody{}, MsgpackBody{}, CBORBody{}} {
		enc, err := s.Marshal(nil, om)
		if err != nil {
			t.Fatalf("%v: %v", s.Kind(), err)
		}
		var back OrderedMap
		if err := s.Unmarshal(enc, &back); err != nil {
			t.Fatalf("%v: %v", s.Kind(), err)
		}
		again, err := JSONBody{}.Marshal(nil, back)
		if err != nil || string(again) != in {
			t.Fatalf("%v: back in json %s, %v; want %s", s.Kind(), again, err, in)
		}
	}
	// A json body with an integer beyond 64 bits, re-sent in msgpack, and a
	// msgpack body with bytes, re-sent in json.
	if err := (JSONBody{}).Unmarshal([]byte(`{"a":1,"big":1180591620717411303424}`), &om); err != nil {
		t.Fatal(err)
	}
	if _, err := (MsgpackBody{}).Marshal(nil, om); !errors.Is(err, ErrCannotCarry) {
		t.Fatalf("json big int into msgpack: %v", err)
	}
	if err := (MsgpackBody{}).Unmarshal([]byte("\x82\xa1a\x01\xa1b\xc4\x02\x01\x02"), &om); err != nil {
		t.Fatal(err)
	}
	if _, err := (JSONBody{}).Marshal(nil, om); !errors.Is(err, ErrCannotCarry) {
		t.Fatalf("msgpack bytes into json: %v", err)
	}
}

// OrderedMap.MarshalJSON, which encoding/json calls in any context (a
// dissector's output), writes what a json body refuses as encoding/json
// would.
func TestOrderedMapMarshalJSONLenient(t *testing.T) {
	om := OrderedMap{{"z", []byte{1, 2, 3}}, {"a", time.Unix(0, 0).UTC()}}
	got, err := json.Marshal(om)
	if want := `{"z":"AQID","a":"1970-01-01T00:00:00Z"}`; err != nil || string(got) != want {
		t.Fatalf("got %s, %v; want %s", got, err, want)
	}
	if _, err := (JSONBody{}).Marshal(nil, om); !errors.Is(err, ErrCannotCarry) {
		t.Fatalf("JSONBody.Marshal: %v", err)
	}
}
