package packet

import (
	"bytes"

	"github.com/vmihailenco/msgpack/v5"
)

// KV is one entry of an OrderedMap.
type KV struct {
	Key   string
	Value any
}

// OrderedMap is a mapping that keeps its key order, the Go form of the
// reference's ordered dicts. Marshal writes its entries in slice order (the
// keys should be unique); Unmarshal into *OrderedMap fills it in wire order,
// with nested mappings as OrderedMap too. It implements the json, msgpack
// and cbor (un)marshaler interfaces, so it also works inside structs handed
// to those libraries. A nil OrderedMap nested in a value encodes as null,
// like a nil map.
type OrderedMap []KV

// Get returns the value of the first entry with key.
func (m OrderedMap) Get(key string) (any, bool) {
	for i := range m {
		if m[i].Key == key {
			return m[i].Value, true
		}
	}
	return nil, false
}

// orderedBuilder appends entries, replacing the value of a duplicate key in
// place (Python dict semantics). It indexes keys once the map grows.
type orderedBuilder struct {
	m   OrderedMap
	idx map[string]int
}

func (b *orderedBuilder) set(key string, val any) {
	if b.idx == nil && len(b.m) < 8 {
		for i := range b.m {
			if b.m[i].Key == key {
				b.m[i].Value = val
				return
			}
		}
		b.m = append(b.m, KV{key, val})
		return
	}
	if b.idx == nil {
		b.idx = make(map[string]int, 2*len(b.m))
		for i := range b.m {
			b.idx[b.m[i].Key] = i
		}
	}
	if i, ok := b.idx[key]; ok {
		b.m[i].Value = val
		return
	}
	b.idx[key] = len(b.m)
	b.m = append(b.m, KV{key, val})
}

// MarshalJSON implements json.Marshaler with the JSONBody encoding, but for
// the values that a json body cannot carry, which it writes as
// encoding/json does (bytes as base64, a time.Time in RFC 3339), as a
// method called by encoding/json in any context should. JSONBody.Marshal
// refuses them (ErrCannotCarry).
func (m OrderedMap) MarshalJSON() ([]byte, error) {
	return appendJSON(nil, m, 0, true)
}

// UnmarshalJSON implements json.Unmarshaler, keeping key order. A JSON
// null leaves m unchanged, as encoding/json does for maps.
func (m *OrderedMap) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	v, err := unmarshalJSONOrdered(data)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (m OrderedMap) EncodeMsgpack(enc *msgpack.Encoder) error {
	if m == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeMapLen(len(m)); err != nil {
		return err
	}
	for i := range m {
		if err := enc.EncodeString(m[i].Key); err != nil {
			return err
		}
		if err := enc.Encode(m[i].Value); err != nil {
			return err
		}
	}
	return nil
}

// DecodeMsgpack implements msgpack.CustomDecoder, keeping key order.
func (m *OrderedMap) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw()
	if err != nil {
		return err
	}
	d := mpDecoder{data: raw, ordered: true, build: true}
	v, err := d.value(0)
	if err != nil {
		return err
	}
	switch v := v.(type) {
	case OrderedMap:
		*m = v
	case nil:
		*m = nil
	default:
		return ErrNotMapping
	}
	return nil
}

// MarshalCBOR implements cbor.Marshaler.
func (m OrderedMap) MarshalCBOR() ([]byte, error) {
	if m == nil {
		return []byte{0xf6}, nil // null
	}
	out := appendCBORHead(nil, 5, uint64(len(m)))
	for i := range m {
		k, err := cborEnc.Marshal(m[i].Key)
		if err != nil {
			return nil, err
		}
		v, err := cborEnc.Marshal(m[i].Value)
		if err != nil {
			return nil, err
		}
		out = append(append(out, k...), v...)
	}
	return out, nil
}

// UnmarshalCBOR implements cbor.Unmarshaler, keeping key order.
func (m *OrderedMap) UnmarshalCBOR(data []byte) error {
	if len(data) > 0 && data[0] == 0xf6 {
		*m = nil
		return nil
	}
	v, rest, err := cborOrderedValue(data, 0)
	if err != nil {
		return err
	}
	om, ok := v.(OrderedMap)
	if !ok {
		return ErrNotMapping
	}
	if len(rest) != 0 {
		return malformedf("%d bytes after the value", len(rest))
	}
	*m = om
	return nil
}
