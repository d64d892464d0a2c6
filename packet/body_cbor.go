package packet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/raet-go/raet/codec"
)

// CBORBody is the serializer of body kind cbor (codec.BodyKindCBOR), a kind of
// raet-go for peers that are both this implementation
// (github.com/fxamacker/cbor/v2).
//
// Marshal sorts map keys byte-wise (RFC 8949 core deterministic order),
// keeps OrderedMap and struct order, writes integers in their shortest
// form, floats as float64 and time.Time as tag 0 (RFC 3339, nanoseconds).
// Unmarshal requires definite or indefinite maps with text keys, valid
// UTF-8, at most MaxBodyDepth levels, and no trailing bytes. Byte strings
// decode to []byte, time tags to time.Time in UTC, other tags to cbor.Tag.
type CBORBody struct{}

// Kind returns codec.BodyKindCBOR.
func (CBORBody) Kind() codec.BodyKind { return codec.BodyKindCBOR }

var (
	cborEnc     = mustCBOREnc()
	cborDec     = mustCBORDec()
	cborBufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

func mustCBOREnc() cbor.UserBufferEncMode {
	em, err := cbor.EncOptions{
		Sort:    cbor.SortCoreDeterministic,
		Time:    cbor.TimeRFC3339Nano,
		TimeTag: cbor.EncTagRequired,
	}.UserBufferEncMode()
	if err != nil {
		panic("packet: cbor encoder options: " + err.Error()) // static options; a bug if hit
	}
	return em
}

func mustCBORDec() cbor.DecMode {
	dm, err := cbor.DecOptions{
		MaxNestedLevels:  MaxBodyDepth,
		MaxArrayElements: 1 << 24,
		MaxMapPairs:      1 << 24,
		DefaultMapType:   reflect.TypeFor[map[string]any](),
		IntDec:           cbor.IntDecConvertSignedOrBigInt,
		BigIntDec:        cbor.BigIntDecodePointer,
	}.DecMode()
	if err != nil {
		panic("packet: cbor decoder options: " + err.Error()) // static options; a bug if hit
	}
	return dm
}

// Marshal appends the CBOR encoding of the mapping v to dst.
func (CBORBody) Marshal(dst []byte, v any) ([]byte, error) {
	if isEmptyMapping(v) {
		return dst, nil
	}
	if _, _, err := walkValues(v, 0, nil); err != nil {
		return dst, bodyErr(codec.BodyKindCBOR, "marshal", err)
	}
	start := len(dst)
	buf := cborBufPool.Get().(*bytes.Buffer)
	*buf = *bytes.NewBuffer(dst)
	err := cborEnc.MarshalToBuffer(v, buf)
	out := buf.Bytes()
	*buf = bytes.Buffer{}
	cborBufPool.Put(buf)
	if err != nil {
		return dst, bodyErr(codec.BodyKindCBOR, "marshal", fmt.Errorf("%w: %w", ErrUnsupportedValue, err))
	}
	enc := out[start:]
	if len(enc) == 0 || enc[0]>>5 != 5 {
		return dst, bodyErr(codec.BodyKindCBOR, "marshal", fmt.Errorf("%w: got %T", ErrNotMapping, v))
	}
	if len(enc) == 1 && enc[0] == 0xa0 { // empty map
		return dst, nil
	}
	return out, nil
}

// Unmarshal decodes the CBOR map data into v.
func (b CBORBody) Unmarshal(data []byte, v any) error { return unmarshalMapping(b, data, v) }

func (CBORBody) emptyMap() []byte { return []byte{0xa0} }

func (CBORBody) checkMapping(data []byte) error {
	if data[0]>>5 != 5 {
		return ErrNotMapping
	}
	return nil
}

func (CBORBody) decodeMap(data []byte) (map[string]any, error) {
	var m map[string]any
	if err := cborDec.Unmarshal(data, &m); err != nil {
		return nil, cborDepthErr(err)
	}
	normalizeCBOR(m)
	return m, nil
}

func (CBORBody) decodeOrdered(data []byte) (OrderedMap, error) {
	val, rest, err := cborOrderedValue(data, 0)
	if err != nil {
		return nil, cborDepthErr(err)
	}
	if len(rest) != 0 {
		return nil, malformedf("%d bytes after the map", len(rest))
	}
	return val.(OrderedMap), nil
}

func (CBORBody) decodeInto(data []byte, v any) error {
	return cborDepthErr(cborDec.Unmarshal(data, v))
}

// cborDepthErr classes the library's nesting error as ErrBodyTooDeep.
func cborDepthErr(err error) error {
	var depthErr *cbor.MaxNestedLevelError
	if errors.As(err, &depthErr) && !errors.Is(err, ErrBodyTooDeep) {
		return fmt.Errorf("%w: %w", ErrBodyTooDeep, err)
	}
	return err
}

// normalizeCBOR turns the *big.Int values (bignum tags) that fit 64 bits
// into int64 or uint64, matching the integer types of the other kinds, and
// puts time.Time values (time tags) in UTC, so that the result does not
// depend on the local time zone; inside other tags too.
func normalizeCBOR(v any) any {
	switch x := v.(type) {
	case time.Time:
		return x.UTC()
	case cbor.Tag:
		x.Content = normalizeCBOR(x.Content)
		return x
	case *big.Int:
		if x.IsInt64() {
			return x.Int64()
		}
		if x.IsUint64() {
			return x.Uint64()
		}
	case map[string]any:
		for k, e := range x {
			switch e.(type) {
			case *big.Int, time.Time, cbor.Tag, map[string]any, []any:
				x[k] = normalizeCBOR(e)
			}
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeCBOR(e)
		}
	}
	return v
}

// appendCBORHead appends a CBOR head of major type major and argument n.
func appendCBORHead(dst []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(dst, m|byte(n))
	case n <= math.MaxUint8:
		return append(dst, m|24, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, m|25), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(dst, m|27), n)
}

// cborContainer reads the head of an array or map: its count, or -1 for
// indefinite length.
func cborContainer(data []byte) (n int64, rest []byte, err error) {
	ai := data[0] & 0x1f
	data = data[1:]
	var size int
	switch {
	case ai < 24:
		return int64(ai), data, nil
	case ai == 31:
		return -1, data, nil
	case ai <= 27:
		size = 1 << (ai - 24)
	default:
		return 0, nil, malformedf("cbor additional information %d", ai)
	}
	if len(data) < size {
		return 0, nil, malformedf("truncated cbor")
	}
	var u uint64
	for _, c := range data[:size] {
		u = u<<8 | uint64(c)
	}
	if u > uint64(len(data)-size) { // each item takes a byte at least
		return 0, nil, malformedf("truncated cbor")
	}
	return int64(u), data[size:], nil
}

// cborOrderedValue decodes one CBOR value, arrays and maps by hand (maps
// as OrderedMap) and everything else with the decoder.
func cborOrderedValue(data []byte, depth int) (any, []byte, error) {
	if len(data) == 0 {
		return nil, nil, malformedf("truncated cbor")
	}
	major := data[0] >> 5
	if major != 4 && major != 5 {
		var v any
		rest, err := cborDec.UnmarshalFirst(data, &v)
		if err != nil {
			return nil, nil, err
		}
		return normalizeCBOR(v), rest, nil
	}
	if depth++; depth > MaxBodyDepth {
		return nil, nil, ErrBodyTooDeep
	}
	n, rest, err := cborContainer(data)
	if err != nil {
		return nil, nil, err
	}
	more := func(i int64) (bool, error) {
		if n >= 0 {
			return i < n, nil
		}
		if len(rest) == 0 {
			return false, malformedf("truncated cbor")
		}
		if rest[0] == 0xff {
			rest = rest[1:]
			return false, nil
		}
		return true, nil
	}
	if major == 4 {
		arr := []any{}
		for i := int64(0); ; i++ {
			ok, err := more(i)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				return arr, rest, nil
			}
			var v any
			if v, rest, err = cborOrderedValue(rest, depth); err != nil {
				return nil, nil, err
			}
			arr = append(arr, v)
		}
	}
	b := orderedBuilder{m: OrderedMap{}}
	for i := int64(0); ; i++ {
		ok, err := more(i)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			return b.m, rest, nil
		}
		var key string
		if rest, err = cborDec.UnmarshalFirst(rest, &key); err != nil {
			return nil, nil, err
		}
		var v any
		if v, rest, err = cborOrderedValue(rest, depth); err != nil {
			return nil, nil, err
		}
		b.set(key, v)
	}
}
