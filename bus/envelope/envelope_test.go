package envelope_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/protocol"
)

// samples has one envelope of every kind, with every field set somewhere.
func samples() []envelope.Envelope {
	return []envelope.Envelope{
		{Version: 1, Kind: protocol.BusKindHello, Epoch: 1<<63 + 5, Time: -3, Groups: []string{"g1", "g2"}, Credit: 4, Reply: true},
		{Version: 1, Kind: protocol.BusKindSub, ID: 7, Filters: []string{"orders.>", "*.x"}, Seq: 99, Policy: protocol.BusPolicyCut,
			HWM: 1000, Replay: protocol.BusReplaySinceSeq, ReplayArg: 42, Epoch: 3},
		{Version: 1, Kind: protocol.BusKindPub, ID: 7, Subject: "orders.new", Seq: 100, Index: 3, Time: 1700000000000000000,
			Origin: "alice", Drops: map[string]uint64{"a.b": 2, "c": 1 << 40}, Body: map[string]any{"n": int64(1)}},
		{Version: 1, Kind: protocol.BusKindGap, ID: 7, Missed: 12, Seq: 50, Index: 4, Epoch: 9},
		{Version: 1, Kind: protocol.BusKindRep, ID: 1 << 50, Error: "no responder", Body: "text"},
		{Version: 1, Kind: protocol.BusKindJob, ID: 5, Deadline: 30000, Body: []any{int64(1), "x"}},
	}
}

// Every envelope goes through each body kind and comes back the same.
func TestRoundTrip(t *testing.T) {
	for _, kind := range []codec.BodyKind{codec.BodyKindJSON, codec.BodyKindMsgpack, codec.BodyKindCBOR} {
		ser, err := packet.SerializerFor(kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range samples() {
			raw, err := ser.Marshal(nil, e.Map())
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := ser.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			var got envelope.Envelope
			if err := envelope.Decode(m, &got); err != nil {
				t.Fatalf("%v %s: %v", kind, raw, err)
			}
			if !reflect.DeepEqual(got, e) {
				t.Errorf("%v: got %+v, want %+v", kind, got, e)
			}
		}
	}
}

// The JSON bytes of a request, as a reference estate would write them.
func TestJSONBytes(t *testing.T) {
	e := envelope.Envelope{Version: 1, Kind: protocol.BusKindReq, ID: 3, Subject: "svc.echo", Deadline: 2000,
		Body: packet.OrderedMap{{Key: "x", Value: 1}}}
	raw, err := packet.JSONBody{}.Marshal(nil, e.Map())
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"bv":1,"ek":9,"id":3,"sj":"svc.echo","dl":2000,"bd":{"x":1}}`; string(raw) != want {
		t.Fatalf("got %s, want %s", raw, want)
	}
}

func TestDecodeErrors(t *testing.T) {
	long := make([]any, envelope.MaxList+1)
	for i := range long {
		long[i] = "x"
	}
	for _, tc := range []struct {
		m   map[string]any
		key string
		err error
	}{
		{map[string]any{"x": 1}, "", envelope.ErrNotEnvelope},
		{map[string]any{"bv": int64(2), "ek": int64(1)}, "bv", envelope.ErrVersion},
		{map[string]any{"bv": int64(1)}, "ek", envelope.ErrMissing},
		{map[string]any{"bv": int64(1), "ek": int64(256)}, "ek", envelope.ErrType},
		{map[string]any{"bv": int64(1), "ek": int64(1), "id": int64(-1)}, "id", envelope.ErrType},
		{map[string]any{"bv": int64(1), "ek": int64(1), "hw": int64(1 << 32)}, "hw", envelope.ErrType},
		{map[string]any{"bv": int64(1), "ek": int64(1), "sj": int64(1)}, "sj", envelope.ErrType},
		{map[string]any{"bv": int64(1), "ek": int64(1), "fi": []any{"a", int64(1)}}, "fi", envelope.ErrType},
		{map[string]any{"bv": int64(1), "ek": int64(1), "fi": long}, "fi", envelope.ErrTooLong},
		{map[string]any{"bv": int64(1), "ek": int64(1), "dm": map[string]any{"a": "b"}}, "dm", envelope.ErrType},
		{map[string]any{"bv": int64(1), "ek": int64(1), "rq": int64(1)}, "rq", envelope.ErrType},
		{map[string]any{"bv": int64(1), "ek": int64(1), "tm": 1.5}, "tm", envelope.ErrType},
	} {
		var e envelope.Envelope
		err := envelope.Decode(tc.m, &e)
		if !errors.Is(err, tc.err) {
			t.Errorf("%v: error %v, want %v", tc.m, err, tc.err)
		}
		var ee *envelope.Error
		if tc.key != "" && (!errors.As(err, &ee) || ee.Key != tc.key) {
			t.Errorf("%v: error %v does not name key %s", tc.m, err, tc.key)
		}
	}
}
