package packet

import (
	"fmt"

	"github.com/raet-go/raet/codec"
)

// NadaBody is the serializer of body kind nada (0): no body at all.
// Marshal accepts only the empty mapping (see Serializer) and writes
// nothing; Unmarshal accepts only zero bytes and leaves v untouched.
type NadaBody struct{}

// Kind returns codec.BodyKindNada.
func (NadaBody) Kind() codec.BodyKind { return codec.BodyKindNada }

// Marshal returns dst if v is empty, else an ErrUnsupportedValue error.
func (NadaBody) Marshal(dst []byte, v any) ([]byte, error) {
	if isEmptyMapping(v) {
		return dst, nil
	}
	if b, ok := v.([]byte); ok && len(b) == 0 {
		return dst, nil
	}
	return dst, bodyErr(codec.BodyKindNada, "marshal",
		fmt.Errorf("%w: a nada body carries no data (got %T)", ErrUnsupportedValue, v))
}

// Unmarshal fails unless data is empty.
func (NadaBody) Unmarshal(data []byte, _ any) error {
	if len(data) != 0 {
		return bodyErr(codec.BodyKindNada, "unmarshal", malformedf("%d bytes in a nada body", len(data)))
	}
	return nil
}
