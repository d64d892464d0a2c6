package lane

import "github.com/raet-go/raet/codec"

// The lane names a body's serialization by a pack kind (the head field pk),
// the road by a body kind (bk), and the two number the built-in
// serializers apart:
//
//	pack kind   body kind
//	0 json      1 json
//	1 pack      3 msgpack
//	2 cbor      4 cbor
//	n           n          a serializer plugin's kind, n in 5..254 (zstdjson is 5)
//
// A plugin's kind keeps its number on the lane (spec/raet.yaml, PackKind),
// so that a serializer made for the road (a packet.Serializer of a body
// kind, such as a plugin through plugins/host) serializes lane bodies too.
// Pack kinds 3 and 4 and body kinds nada, raw and unknown have no
// counterpart.

// pluginKind reports whether n is the number of a serializer plugin's
// kind: not a built-in body kind (0..4) nor unknown (255).
func pluginKind(n uint8) bool {
	return n > uint8(codec.BodyKindCBOR) && n != uint8(codec.BodyKindUnknown)
}

// BodyKindOf returns the body kind of the serializer of lane pack kind pk:
// json, msgpack or cbor for the built-in pack kinds, the body kind of the
// same number for a plugin's. ok is false when pk names no serializer.
func BodyKindOf(pk codec.PackKind) (bk codec.BodyKind, ok bool) {
	switch pk {
	case codec.PackKindJSON:
		return codec.BodyKindJSON, true
	case codec.PackKindPack:
		return codec.BodyKindMsgpack, true
	case codec.PackKindCBOR:
		return codec.BodyKindCBOR, true
	}
	if pluginKind(uint8(pk)) {
		return codec.BodyKind(pk), true
	}
	return 0, false
}

// PackKindOf returns the lane pack kind of body kind bk, the inverse of
// BodyKindOf. ok is false for the body kinds a lane cannot carry (nada,
// raw, unknown).
func PackKindOf(bk codec.BodyKind) (pk codec.PackKind, ok bool) {
	switch bk {
	case codec.BodyKindJSON:
		return codec.PackKindJSON, true
	case codec.BodyKindMsgpack:
		return codec.PackKindPack, true
	case codec.BodyKindCBOR:
		return codec.PackKindCBOR, true
	}
	if pluginKind(uint8(bk)) {
		return codec.PackKind(bk), true
	}
	return 0, false
}
