package envelope_test

import (
	"reflect"
	"testing"

	"github.com/raet-go/raet/bus/envelope"
	"github.com/raet-go/raet/packet"
)

// FuzzDecode decodes arbitrary JSON bodies as envelopes: never a panic, and
// whatever decodes encodes back to an envelope that decodes the same.
func FuzzDecode(f *testing.F) {
	for _, e := range samples() {
		raw, err := packet.JSONBody{}.Marshal(nil, e.Map())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var m map[string]any
		if err := (packet.JSONBody{}).Unmarshal(raw, &m); err != nil {
			return
		}
		var e envelope.Envelope
		if envelope.Decode(m, &e) != nil {
			return
		}
		again, err := packet.JSONBody{}.Marshal(nil, e.Map())
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var m2 map[string]any
		if err := (packet.JSONBody{}).Unmarshal(again, &m2); err != nil {
			t.Fatal(err)
		}
		var e2 envelope.Envelope
		if err := envelope.Decode(m2, &e2); err != nil {
			t.Fatalf("%s: %v", again, err)
		}
		e.Body, e2.Body = nil, nil
		if len(e.Filters) == 0 {
			e.Filters = nil
		}
		if len(e.Groups) == 0 {
			e.Groups = nil
		}
		if len(e.Drops) == 0 {
			e.Drops = nil
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("%+v became %+v", e, e2)
		}
	})
}
