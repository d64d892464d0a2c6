package lane

import (
	"testing"

	"github.com/raet-go/raet/codec"
)

func TestKindMapping(t *testing.T) {
	pairs := []struct {
		pk codec.PackKind
		bk codec.BodyKind
	}{
		{codec.PackKindJSON, codec.BodyKindJSON},
		{codec.PackKindPack, codec.BodyKindMsgpack},
		{codec.PackKindCBOR, codec.BodyKindCBOR},
		{codec.PackKindZstdJSON, codec.BodyKindZstdJSON},
		{200, 200}, // a plugin kind nobody declared: by number
	}
	for _, p := range pairs {
		if bk, ok := BodyKindOf(p.pk); !ok || bk != p.bk {
			t.Errorf("BodyKindOf(%v) = %v, %v; want %v", p.pk, bk, ok, p.bk)
		}
		if pk, ok := PackKindOf(p.bk); !ok || pk != p.pk {
			t.Errorf("PackKindOf(%v) = %v, %v; want %v", p.bk, pk, ok, p.pk)
		}
	}
	for _, pk := range []codec.PackKind{3, 4, 255} {
		if bk, ok := BodyKindOf(pk); ok {
			t.Errorf("BodyKindOf(%v) = %v; want none", pk, bk)
		}
	}
	for _, bk := range []codec.BodyKind{codec.BodyKindNada, codec.BodyKindRaw, codec.BodyKindUnknown} {
		if pk, ok := PackKindOf(bk); ok {
			t.Errorf("PackKindOf(%v) = %v; want none", bk, pk)
		}
	}
	// The two are inverse over every value.
	for n := range 256 {
		if bk, ok := BodyKindOf(codec.PackKind(n)); ok {
			if pk, ok := PackKindOf(bk); !ok || pk != codec.PackKind(n) {
				t.Errorf("pack kind %d -> body kind %v -> %v, %v", n, bk, pk, ok)
			}
		}
		if pk, ok := PackKindOf(codec.BodyKind(n)); ok {
			if bk, ok := BodyKindOf(pk); !ok || bk != codec.BodyKind(n) {
				t.Errorf("body kind %d -> pack kind %v -> %v, %v", n, pk, bk, ok)
			}
		}
	}
}

// Every plugin pack kind the spec declares has the number, and the name,
// of a body kind the spec declares (spec/raet.yaml: "a serializer
// plugin's pack kind is its BodyKind value"), and every plugin body kind
// is declared as a pack kind too.
func TestSpecPluginKindsAgree(t *testing.T) {
	for n := range 256 {
		if !pluginKind(uint8(n)) {
			continue
		}
		pk, bk := codec.PackKind(n), codec.BodyKind(n)
		if pk.Valid() != bk.Valid() {
			t.Errorf("kind %d: declared as a pack kind %v, as a body kind %v", n, pk.Valid(), bk.Valid())
		}
		if pk.Valid() && pk.String() != bk.String() {
			t.Errorf("kind %d: pack kind %q, body kind %q", n, pk, bk)
		}
	}
}
