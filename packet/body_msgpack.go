package packet

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"sync"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/raet-go/raet/codec"
	"github.com/vmihailenco/msgpack/v5"
)

// MsgpackBody is the serializer of body kind msgpack (3).
//
// Marshal (github.com/vmihailenco/msgpack/v5, compact integers, sorted map
// keys) writes what msgpack-python 1.0 writes with its defaults for the
// same ordered mapping: the smallest integer format, float64 for floats,
// str (fixstr/str8/str16/str32) for strings, bin for []byte. A *big.Int
// or json.Number is written as the integer (or float) it holds; an integer
// beyond 64 bits and a CBOR tag are ErrCannotCarry (msgpack-python refuses
// such integers too), never bytes or a map.
//
// Unmarshal accepts both the current format (as msgpack-python 1.0 writes
// it and reads it with raw=False) and the old one of raet before 2020 (no
// bin type; strings and bytes both as raw, which shares its type codes with
// str): every str/raw value decodes to a Go string, whatever its bytes
// (Python would reject raw bytes that are not UTF-8; we keep them), and
// every bin value to []byte. Map keys must be str/raw or bin (like
// msgpack-python's strict_map_key) and become strings. The timestamp
// extension (-1) decodes to a UTC time.Time; other extension types are
// ErrUnsupportedValue. Trailing bytes are ErrMalformedBody. Into a target
// that is not a default one, a map with a duplicate key is decoded as if
// only its last value were there.
type MsgpackBody struct{}

// Kind returns codec.BodyKindMsgpack.
func (MsgpackBody) Kind() codec.BodyKind { return codec.BodyKindMsgpack }

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func (w *appendWriter) WriteByte(c byte) error {
	w.b = append(w.b, c)
	return nil
}

type mpEncState struct {
	w   appendWriter
	enc *msgpack.Encoder
}

var mpEncPool = sync.Pool{New: func() any {
	s := &mpEncState{}
	s.enc = msgpack.NewEncoder(&s.w)
	return s
}}

// Marshal appends the MessagePack encoding of the mapping v to dst.
func (MsgpackBody) Marshal(dst []byte, v any) ([]byte, error) {
	if isEmptyMapping(v) {
		return dst, nil
	}
	v, _, err := walkValues(v, 0, mpCarry)
	if err != nil {
		return dst, bodyErr(codec.BodyKindMsgpack, "marshal", err)
	}
	start := len(dst)
	st := mpEncPool.Get().(*mpEncState)
	st.w.b = dst
	st.enc.UseCompactInts(true)
	st.enc.SetSortMapKeys(true)
	err = st.enc.Encode(v)
	out := st.w.b
	st.w.b = nil
	mpEncPool.Put(st)
	if err != nil {
		return dst, bodyErr(codec.BodyKindMsgpack, "marshal", fmt.Errorf("%w: %w", ErrUnsupportedValue, err))
	}
	enc := out[start:]
	if len(enc) == 0 || !isMsgpackMap(enc[0]) {
		return dst, bodyErr(codec.BodyKindMsgpack, "marshal", fmt.Errorf("%w: got %T", ErrNotMapping, v))
	}
	if len(enc) == 1 && enc[0] == 0x80 { // empty fixmap
		return dst, nil
	}
	return out, nil
}

// mpCarry refuses what msgpack cannot carry and writes integers as
// integers, whatever their Go type (the library would write a *big.Int as
// bytes and a json.Number as a string).
func mpCarry(v any) (any, bool, error) {
	switch x := v.(type) {
	case *big.Int:
		if x != nil {
			return mpBigInt(x)
		}
	case big.Int:
		return mpBigInt(&x)
	case json.Number:
		if n, err := intFromString(string(x)); err == nil {
			if b, ok := n.(*big.Int); ok {
				return mpBigInt(b)
			}
			return n, true, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return v, false, fmt.Errorf("%w: invalid json.Number %q", ErrUnsupportedValue, string(x))
		}
		return f, true, nil
	case cbor.Tag, cbor.RawTag:
		return v, false, carryError{"a CBOR tag in msgpack"}
	}
	return v, false, nil
}

func mpBigInt(x *big.Int) (any, bool, error) {
	switch {
	case x.IsInt64():
		return x.Int64(), true, nil
	case x.IsUint64():
		return x.Uint64(), true, nil
	}
	return x, false, carryError{"an integer beyond 64 bits in msgpack"}
}

func isMsgpackMap(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }

// Unmarshal decodes the MessagePack map data into v.
func (b MsgpackBody) Unmarshal(data []byte, v any) error { return unmarshalMapping(b, data, v) }

func (MsgpackBody) emptyMap() []byte { return []byte{0x80} }

func (MsgpackBody) checkMapping(data []byte) error {
	if !isMsgpackMap(data[0]) {
		return ErrNotMapping
	}
	return nil
}

func (MsgpackBody) decodeMap(data []byte) (map[string]any, error) {
	d := mpDecoder{data: data, build: true}
	v, err := d.all()
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

func (MsgpackBody) decodeOrdered(data []byte) (OrderedMap, error) {
	d := mpDecoder{data: data, build: true, ordered: true}
	v, err := d.all()
	if err != nil {
		return nil, err
	}
	return v.(OrderedMap), nil
}

// decodeInto validates data and hands it to the library. A map with a
// duplicate key, at any depth, is first rewritten without it (first
// position, last value, as everywhere else): the library would decode the
// second value into the first one in place, which panics for a value held
// in an interface.
func (b MsgpackBody) decodeInto(data []byte, v any) error {
	d := mpDecoder{data: data, track: true}
	if _, err := d.all(); err != nil {
		return err
	}
	if d.dup {
		om, err := b.decodeOrdered(data)
		if err != nil {
			return err
		}
		if data, err = b.Marshal(nil, om); err != nil {
			return err
		}
	}
	if err := msgpack.Unmarshal(data, v); err != nil {
		return malformed(err)
	}
	return nil
}

// all decodes the one value that d.data must hold.
func (d *mpDecoder) all() (any, error) {
	val, err := d.value(0)
	if err == nil && d.off != len(d.data) {
		err = malformedf("%d bytes after the map", len(d.data)-d.off)
	}
	return val, err
}

// mpDecoder walks MessagePack data without recursion beyond MaxBodyDepth.
// With build unset it only validates; otherwise it builds our dynamic
// values (OrderedMap for maps if ordered).
type mpDecoder struct {
	data    []byte
	off     int
	build   bool
	ordered bool
	// With track (and build unset), dup reports a map with a duplicate
	// key; keys holds the keys of the maps being validated.
	track bool
	dup   bool
	keys  [][]byte
}

var errTruncated = malformedf("truncated msgpack")

// take returns the next n bytes.
func (d *mpDecoder) take(n uint64) ([]byte, error) {
	if n > uint64(len(d.data)-d.off) {
		return nil, errTruncated
	}
	b := d.data[d.off : d.off+int(n)]
	d.off += int(n)
	return b, nil
}

func (d *mpDecoder) uint(n int) (uint64, error) {
	b, err := d.take(uint64(n))
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	return binary.BigEndian.Uint64(b), nil
}

// value decodes one value; depth counts the containers around it.
func (d *mpDecoder) value(depth int) (any, error) {
	b, err := d.take(1)
	if err != nil {
		return nil, err
	}
	c := b[0]
	switch {
	case c <= 0x7f: // positive fixint
		return int64(c), nil
	case c >= 0xe0: // negative fixint
		return int64(int8(c)), nil
	case c <= 0x8f: // fixmap
		return d.mapBody(uint64(c&0x0f), depth)
	case c <= 0x9f: // fixarray
		return d.arrayBody(uint64(c&0x0f), depth)
	case c <= 0xbf: // fixstr / fixraw
		return d.str(uint64(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6: // bin 8/16/32
		n, err := d.uint(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		p, err := d.take(n)
		if err != nil || !d.build {
			return nil, err
		}
		return bytes.Clone(p), nil // never nil, even when empty
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32
		n, err := d.uint(1 << (c - 0xc7))
		if err != nil {
			return nil, err
		}
		return d.ext(n)
	case 0xca:
		n, err := d.uint(4)
		return float64(math.Float32frombits(uint32(n))), err
	case 0xcb:
		n, err := d.uint(8)
		return math.Float64frombits(n), err
	case 0xcc, 0xcd, 0xce, 0xcf: // uint 8/16/32/64
		n, err := d.uint(1 << (c - 0xcc))
		if err != nil {
			return nil, err
		}
		if n > math.MaxInt64 {
			return n, nil
		}
		return int64(n), nil
	case 0xd0:
		n, err := d.uint(1)
		return int64(int8(n)), err
	case 0xd1:
		n, err := d.uint(2)
		return int64(int16(n)), err
	case 0xd2:
		n, err := d.uint(4)
		return int64(int32(n)), err
	case 0xd3:
		n, err := d.uint(8)
		return int64(n), err
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16
		return d.ext(1 << (c - 0xd4))
	case 0xd9, 0xda, 0xdb: // str 8/16/32 (raw 16/32 in the old format)
		n, err := d.uint(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(n)
	case 0xdc, 0xdd: // array 16/32
		n, err := d.uint(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.arrayBody(n, depth)
	case 0xde, 0xdf: // map 16/32
		n, err := d.uint(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return d.mapBody(n, depth)
	}
	return nil, malformedf("msgpack type code 0x%02x", c) // 0xc1, never used
}

func (d *mpDecoder) str(n uint64) (any, error) {
	p, err := d.take(n)
	if err != nil || !d.build {
		return nil, err
	}
	return string(p), nil
}

func (d *mpDecoder) ext(n uint64) (any, error) {
	t, err := d.uint(1)
	if err != nil {
		return nil, err
	}
	p, err := d.take(n)
	if err != nil || !d.build {
		return nil, err
	}
	if int8(t) != -1 {
		return nil, fmt.Errorf("%w: msgpack extension type %d", ErrUnsupportedValue, int8(t))
	}
	var sec, nsec int64
	switch len(p) {
	case 4:
		sec = int64(binary.BigEndian.Uint32(p))
	case 8:
		x := binary.BigEndian.Uint64(p)
		nsec, sec = int64(x>>34), int64(x&(1<<34-1))
	case 12:
		nsec, sec = int64(binary.BigEndian.Uint32(p)), int64(binary.BigEndian.Uint64(p[4:]))
	default:
		return nil, malformedf("msgpack timestamp of %d bytes", len(p))
	}
	if nsec >= 1e9 {
		return nil, malformedf("msgpack timestamp nanoseconds %d", nsec)
	}
	return time.Unix(sec, nsec).UTC(), nil
}

func (d *mpDecoder) arrayBody(n uint64, depth int) (any, error) {
	if depth++; depth > MaxBodyDepth {
		return nil, ErrBodyTooDeep
	}
	if n > uint64(len(d.data)-d.off) { // each element takes a byte at least
		return nil, errTruncated
	}
	var arr []any
	if d.build {
		arr = make([]any, 0, n)
	}
	for range n {
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		if d.build {
			arr = append(arr, v)
		}
	}
	if !d.build {
		return nil, nil
	}
	return arr, nil
}

func (d *mpDecoder) mapBody(n uint64, depth int) (any, error) {
	if depth++; depth > MaxBodyDepth {
		return nil, ErrBodyTooDeep
	}
	if n > uint64(len(d.data)-d.off)/2 { // each key and value takes a byte at least
		return nil, errTruncated
	}
	var (
		m map[string]any
		b orderedBuilder
	)
	if d.build {
		if d.ordered {
			b.m = make(OrderedMap, 0, n)
		} else {
			m = make(map[string]any, n)
		}
	}
	base := len(d.keys)
	for range n {
		key, err := d.key()
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth)
		if err != nil {
			return nil, err
		}
		switch {
		case !d.build:
		case d.ordered:
			b.set(key, v)
		default:
			m[key] = v
		}
	}
	switch {
	case d.track:
		if !d.dup && hasDup(d.keys[base:]) {
			d.dup = true
		}
		d.keys = d.keys[:base]
		return nil, nil
	case !d.build:
		return nil, nil
	case d.ordered:
		return b.m, nil
	}
	return m, nil
}

// hasDup reports whether keys holds a key twice.
func hasDup(keys [][]byte) bool {
	if len(keys) <= 16 {
		for i := range keys {
			for j := range i {
				if bytes.Equal(keys[i], keys[j]) {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		if _, ok := seen[string(k)]; ok {
			return true
		}
		seen[string(k)] = struct{}{}
	}
	return false
}

// key reads a map key: str/raw or bin, returned as a string.
func (d *mpDecoder) key() (string, error) {
	b, err := d.take(1)
	if err != nil {
		return "", err
	}
	var n uint64
	switch c := b[0]; {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xda || c == 0xdb:
		n, err = d.uint(1 << (c - 0xd9))
	case c == 0xc4 || c == 0xc5 || c == 0xc6:
		n, err = d.uint(1 << (c - 0xc4))
	default:
		return "", malformedf("msgpack map key type code 0x%02x is not a string", c)
	}
	if err != nil {
		return "", err
	}
	p, err := d.take(n)
	if err != nil || !d.build {
		if err == nil && d.track {
			d.keys = append(d.keys, p)
		}
		return "", err
	}
	return string(p), nil
}
