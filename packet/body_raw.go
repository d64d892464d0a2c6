package packet

import (
	"bytes"
	"fmt"

	"github.com/raet-go/raet/codec"
)

// RawBody is the serializer of body kind raw (2): bytes as they are; the
// allow handshake uses it. There is no mapping rule.
//
// Marshal accepts []byte, string and nil. Unmarshal accepts *[]byte (the
// bytes are copied into the slice's existing storage when it is large
// enough), *string and *any (a fresh []byte).
type RawBody struct{}

// Kind returns codec.BodyKindRaw.
func (RawBody) Kind() codec.BodyKind { return codec.BodyKindRaw }

// Marshal appends the bytes of v to dst.
func (RawBody) Marshal(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return dst, nil
	case []byte:
		return append(dst, x...), nil
	case string:
		return append(dst, x...), nil
	}
	return dst, bodyErr(codec.BodyKindRaw, "marshal",
		fmt.Errorf("%w: raw body needs []byte or string, got %T", ErrUnsupportedValue, v))
}

// Unmarshal copies data into v.
func (RawBody) Unmarshal(data []byte, v any) error {
	switch p := v.(type) {
	case *[]byte:
		if p != nil {
			*p = append((*p)[:0], data...)
			return nil
		}
	case *string:
		if p != nil {
			*p = string(data)
			return nil
		}
	case *any:
		if p != nil {
			*p = bytes.Clone(data)
			return nil
		}
	}
	return bodyErr(codec.BodyKindRaw, "unmarshal",
		fmt.Errorf("%w: raw body needs *[]byte, *string or *any, got %T", ErrUnsupportedValue, v))
}
