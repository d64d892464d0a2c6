package packet

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/raet-go/raet/codec"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/fxamacker/cbor/v2"
	"github.com/vmihailenco/msgpack/v5"
)

// MaxBodyDepth is the deepest nesting of mappings and arrays that a body
// may have, counting the top-level mapping as 1. Unmarshal rejects deeper
// input with ErrBodyTooDeep instead of recursing without bound, and Marshal
// rejects deeper values (which also catches reference cycles in map[string]any,
// []any and OrderedMap values). The reference's decoders give up at about
// 1000 levels; 500 keeps everything we send decodable there.
const MaxBodyDepth = 500

// Errors of the body layer. They are wrapped in a *BodyError; test with
// errors.Is.
var (
	// ErrNotMapping: a json, msgpack or cbor body (or the value to marshal)
	// is not a mapping.
	ErrNotMapping = errors.New("raet: body is not a mapping")
	// ErrBodyTooDeep: nesting exceeds MaxBodyDepth.
	ErrBodyTooDeep = errors.New("raet: body nested too deeply")
	// ErrMalformedBody: the bytes are not valid for the body kind (syntax,
	// truncation, trailing data, invalid UTF-8 in JSON, non-string map key,
	// number out of range). The decoder's own error is wrapped too.
	ErrMalformedBody = errors.New("raet: malformed body")
	// ErrUnsupportedValue: a value (or unmarshal target) the serializer
	// cannot handle, such as NaN in JSON or a non-pointer target.
	ErrUnsupportedValue = errors.New("raet: unsupported body value")
	// ErrUnknownBodyKind: SerializerFor got a kind it does not know.
	ErrUnknownBodyKind = errors.New("raet: unknown body kind")
)

// BodyError reports a failure to marshal, unmarshal or look up a body.
type BodyError struct {
	Kind codec.BodyKind // body kind (bk)
	Op   string         // "marshal", "unmarshal" or "lookup"
	Err  error          // wraps one of the Err* sentinels above
}

// Error implements error.
func (e *BodyError) Error() string {
	return "raet: " + e.Op + " " + e.Kind.String() + " body: " +
		strings.TrimPrefix(e.Err.Error(), "raet: ")
}

// Unwrap returns the wrapped error.
func (e *BodyError) Unwrap() error { return e.Err }

func bodyErr(kind codec.BodyKind, op string, err error) error {
	return &BodyError{Kind: kind, Op: op, Err: err}
}

// malformed wraps a decoder's error so that errors.Is finds both
// ErrMalformedBody and the cause.
func malformed(cause error) error {
	return fmt.Errorf("%w: %w", ErrMalformedBody, cause)
}

func malformedf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformedBody}, args...)...)
}

// Serializer encodes and decodes the body of one body kind. Implementations
// in this package are stateless and safe for concurrent use.
//
// The mapping kinds (json, msgpack, cbor) follow the reference's rules:
//   - The value must be a mapping, otherwise ErrNotMapping. Mappings are
//     map[string]any (and other maps with string keys), OrderedMap, structs
//     and anything else that encodes as a map.
//   - The empty mapping is written as zero bytes, never as {}: nil, a nil or
//     empty map or OrderedMap, a nil pointer, and any value that encodes to
//     an empty map (a struct{} or a struct whose fields are all omitted).
//     Zero bytes unmarshal to an empty mapping, exactly as an encoded {}
//     would.
//   - Key order: map keys are sorted (byte-wise, as encoding/json does);
//     OrderedMap and structs keep their order. Use OrderedMap to reproduce
//     the bytes of a body whose order matters, such as one from the
//     reference (Python dicts keep insertion order).
//
// Unmarshal into *map[string]any (or *any, which gets a map[string]any) is
// the default. *OrderedMap keeps the wire's key order. Any other pointer is
// handed to the underlying library after the input was checked (mapping,
// depth, well-formedness). Decoded values never alias data. Dynamic values
// have these types in all three kinds: nested mappings are map[string]any
// (OrderedMap under an *OrderedMap target), arrays []any, strings string,
// byte strings []byte, integers int64, or uint64 above MaxInt64, or *big.Int
// beyond 64 bits (json, cbor), other numbers float64, booleans bool, null nil.
// A duplicate key keeps its first position and its last value, like a Python
// dict.
//
// Marshal appends to dst and returns the extended slice; on error it returns
// dst unchanged (its spare capacity may have been written).
type Serializer interface {
	// Kind returns the body kind (bk).
	Kind() codec.BodyKind
	// Marshal appends the encoding of v to dst.
	Marshal(dst []byte, v any) ([]byte, error)
	// Unmarshal decodes data into the value v points to.
	Unmarshal(data []byte, v any) error
}

// BatchSerializer is a Serializer whose every call costs much, like a
// serializer plugin's (a call to another process, ~60 µs): the stacks make
// its calls in batches, from goroutines of their own, never per packet and
// never on their protocol goroutine. plugins/host.Serializer is one.
type BatchSerializer interface {
	Serializer
	// MarshalBatch encodes the mappings vs in one call, out[i] for vs[i].
	// When only some items fail, the error should have a method
	// ItemErrors() []error with one entry per item, nil for those that
	// worked (plugins/host.BatchError has it).
	MarshalBatch(ctx context.Context, vs []any) (out [][]byte, err error)
	// UnmarshalBatch decodes bodies[i] into the value vs[i] points to, in
	// one call. Its error is as MarshalBatch's.
	UnmarshalBatch(ctx context.Context, bodies [][]byte, vs []any) error
}

// SerializerFor returns the built-in serializer of a body kind.
// A registry of plugin serializers, if any, belongs on top of this.
func SerializerFor(kind codec.BodyKind) (Serializer, error) {
	switch kind {
	case codec.BodyKindNada:
		return NadaBody{}, nil
	case codec.BodyKindJSON:
		return JSONBody{}, nil
	case codec.BodyKindRaw:
		return RawBody{}, nil
	case codec.BodyKindMsgpack:
		return MsgpackBody{}, nil
	case codec.BodyKindCBOR:
		return CBORBody{}, nil
	}
	if s := registered(kind); s != nil {
		return s, nil
	}
	return nil, bodyErr(kind, "lookup", ErrUnknownBodyKind)
}

var (
	_ Serializer = NadaBody{}
	_ Serializer = JSONBody{}
	_ Serializer = RawBody{}
	_ Serializer = MsgpackBody{}
	_ Serializer = CBORBody{}
)

// ---------------------------------------------------------------------------
// OrderedMap

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

// MarshalJSON implements json.Marshaler with the JSONBody encoding.
func (m OrderedMap) MarshalJSON() ([]byte, error) {
	return appendJSON(nil, m, 0)
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

// ---------------------------------------------------------------------------
// Shared helpers

// isEmptyMapping reports whether v is nil, a nil map, a nil or empty
// OrderedMap, an empty map[string]any, or a nil pointer: values marshaled
// as zero bytes without consulting the encoder.
func isEmptyMapping(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	case OrderedMap:
		return len(x) == 0
	case *OrderedMap:
		return x == nil || len(*x) == 0
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Pointer:
		return rv.IsNil()
	}
	return false
}

// checkDepth bounds the nesting of the dynamic container types before a
// library encoder recurses into them (a cycle would overflow the stack).
func checkDepth(v any, depth int) error {
	switch x := v.(type) {
	case map[string]any:
		if depth++; depth > MaxBodyDepth {
			return ErrBodyTooDeep
		}
		for _, e := range x {
			if err := checkDepth(e, depth); err != nil {
				return err
			}
		}
	case []any:
		if depth++; depth > MaxBodyDepth {
			return ErrBodyTooDeep
		}
		for _, e := range x {
			if err := checkDepth(e, depth); err != nil {
				return err
			}
		}
	case OrderedMap:
		if depth++; depth > MaxBodyDepth {
			return ErrBodyTooDeep
		}
		for i := range x {
			if err := checkDepth(x[i].Value, depth); err != nil {
				return err
			}
		}
	}
	return nil
}

// setEmpty stores the empty mapping in one of the default targets and
// reports whether v was one.
func setEmpty(v any) bool {
	switch p := v.(type) {
	case *map[string]any:
		*p = map[string]any{}
	case *OrderedMap:
		*p = OrderedMap{}
	case *any:
		*p = map[string]any{}
	default:
		return false
	}
	return true
}

// checkTarget rejects targets that no decoder can fill.
func checkTarget(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%w: target %T is not a non-nil pointer", ErrUnsupportedValue, v)
	}
	return nil
}

// intFromString converts the text of a JSON integer: int64 if it fits, else
// uint64, else *big.Int.
func intFromString(s string) (any, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err == nil {
		return n, nil
	}
	b, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return nil, malformedf("bad integer %q", s)
	}
	return b, nil
}

// ---------------------------------------------------------------------------
// Nada

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

// ---------------------------------------------------------------------------
// Raw

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

// ---------------------------------------------------------------------------
// JSON

// JSONBody is the serializer of body kind json (1).
//
// Marshal writes what the reference's json.dumps(body, separators=(',',':'))
// writes for the same ordered mapping: no spaces; every character outside
// printable ASCII (and DEL) escaped as \uXXXX in lowercase hex, with UTF-16
// surrogate pairs above U+FFFF; \" \\ \b \f \n \r \t as short escapes;
// '<', '>', '&' and '/' as they are; floats as Python's repr (1.0, 1e-05,
// 1e+16; shortest round-trip digits; the shortest float32 digits for a
// float32); integers in decimal. This holds for nil, bool, string, the Go
// integer and float types, json.Number, *big.Int, map[string]any,
// map[string]string, OrderedMap, []any and []string, at any nesting. Any
// other value (a struct, []byte, json.Marshaler, ...) is encoded by
// encoding/json and then escaped the same way, so its strings match Python
// but its numbers follow encoding/json (a float64 3.0 becomes 3). NaN and
// ±Inf are ErrUnsupportedValue (Python would write the non-JSON NaN or
// Infinity). Invalid UTF-8 in a string is written as \ufffd.
//
// Unmarshal accepts any valid UTF-8 JSON object. Invalid UTF-8, the
// non-JSON literals NaN and Infinity (accepted by Python), numbers beyond
// float64 and trailing data are ErrMalformedBody. Integers (no fraction or
// exponent) decode as int64, uint64 or *big.Int, other numbers as float64,
// so a body from the reference re-encodes to the same bytes through an
// OrderedMap.
type JSONBody struct{}

// Kind returns codec.BodyKindJSON.
func (JSONBody) Kind() codec.BodyKind { return codec.BodyKindJSON }

// Marshal appends the compact, ASCII-only JSON of the mapping v to dst.
func (JSONBody) Marshal(dst []byte, v any) ([]byte, error) {
	if isEmptyMapping(v) {
		return dst, nil
	}
	start := len(dst)
	out, err := appendJSON(dst, v, 0)
	if err != nil {
		return dst, bodyErr(codec.BodyKindJSON, "marshal", err)
	}
	enc := out[start:]
	if len(enc) == 0 || enc[0] != '{' {
		return dst, bodyErr(codec.BodyKindJSON, "marshal", fmt.Errorf("%w: got %T", ErrNotMapping, v))
	}
	if len(enc) == 2 { // {}
		return dst, nil
	}
	return out, nil
}

// Unmarshal decodes the JSON object data into v.
func (JSONBody) Unmarshal(data []byte, v any) error {
	if err := checkTarget(v); err != nil {
		return bodyErr(codec.BodyKindJSON, "unmarshal", err)
	}
	if len(data) == 0 {
		if setEmpty(v) {
			return nil
		}
		data = []byte("{}")
	}
	var err error
	switch p := v.(type) {
	case *map[string]any:
		var m map[string]any
		if m, err = unmarshalJSONMap(data); err == nil {
			*p = m
		}
	case *any:
		var m map[string]any
		if m, err = unmarshalJSONMap(data); err == nil {
			*p = m
		}
	case *OrderedMap:
		var m OrderedMap
		if m, err = unmarshalJSONOrdered(data); err == nil {
			*p = m
		}
	default:
		if err = scanJSON(data); err == nil {
			if err = json.Unmarshal(data, v); err != nil {
				err = malformed(err)
			}
		}
	}
	if err != nil {
		return bodyErr(codec.BodyKindJSON, "unmarshal", err)
	}
	return nil
}

// scanJSON checks, without decoding, that data is valid UTF-8, starts
// (after white space) with an object, and does not nest deeper than
// MaxBodyDepth. Syntax is left to the decoder. It runs before encoding/json
// for other targets than the default ones, and decides the error class when
// the one-pass decoder (jsondec.go) fails.
func scanJSON(data []byte) error {
	if !utf8.Valid(data) {
		return malformedf("invalid UTF-8")
	}
	i := 0
	for i < len(data) && isJSONSpace(data[i]) {
		i++
	}
	if i == len(data) {
		return malformedf("no JSON value")
	}
	if data[i] != '{' {
		return ErrNotMapping
	}
	depth, inString := 0, false
	for ; i < len(data); i++ {
		c := data[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > MaxBodyDepth {
				return ErrBodyTooDeep
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// appendJSON appends the Python-compatible JSON of v (see JSONBody).
func appendJSON(dst []byte, v any, depth int) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendPyString(dst, x), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int8:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int16:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case uint:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint8:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint16:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint32:
		return strconv.AppendUint(dst, uint64(x), 10), nil
	case uint64:
		return strconv.AppendUint(dst, x, 10), nil
	case float32:
		return appendPyFloat(dst, float64(x), 32)
	case float64:
		return appendPyFloat(dst, x, 64)
	case json.Number:
		if !isJSONNumber(string(x)) {
			return dst, fmt.Errorf("%w: invalid json.Number %q", ErrUnsupportedValue, string(x))
		}
		return append(dst, x...), nil
	case *big.Int:
		if x == nil {
			return append(dst, "null"...), nil
		}
		return x.Append(dst, 10), nil
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		if depth++; depth > MaxBodyDepth {
			return dst, ErrBodyTooDeep
		}
		var kb [16]string
		dst = append(dst, '{')
		for i, k := range sortedKeys(x, kb[:]) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendPyString(dst, k), ':')
			var err error
			if dst, err = appendJSON(dst, x[k], depth); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case map[string]string:
		if x == nil {
			return append(dst, "null"...), nil
		}
		var kb [16]string
		dst = append(dst, '{')
		for i, k := range sortedKeys(x, kb[:]) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendPyString(dst, k), ':')
			dst = appendPyString(dst, x[k])
		}
		return append(dst, '}'), nil
	case OrderedMap:
		if x == nil {
			return append(dst, "null"...), nil
		}
		if depth++; depth > MaxBodyDepth {
			return dst, ErrBodyTooDeep
		}
		dst = append(dst, '{')
		for i := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendPyString(dst, x[i].Key), ':')
			var err error
			if dst, err = appendJSON(dst, x[i].Value, depth); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	case []any:
		if x == nil {
			return append(dst, "null"...), nil
		}
		if depth++; depth > MaxBodyDepth {
			return dst, ErrBodyTooDeep
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJSON(dst, e, depth); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case []string:
		if x == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendPyString(dst, e)
		}
		return append(dst, ']'), nil
	}
	return appendJSONFallback(dst, v)
}

// sortedKeys appends the keys of m to buf (a caller's stack array for
// small maps, so that nothing is allocated) and sorts them.
func sortedKeys[V any](m map[string]V, buf []string) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// appendJSONFallback encodes v with encoding/json and re-escapes the result
// as Python's ensure_ascii would.
func appendJSONFallback(dst []byte, v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, fmt.Errorf("%w: %w", ErrUnsupportedValue, err)
	}
	return appendASCII(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))), nil
}

// appendASCII copies valid JSON text, escaping its non-ASCII characters
// and DEL (which can only occur inside strings) as \uXXXX.
func appendASCII(dst, js []byte) []byte {
	for i := 0; i < len(js); {
		c := js[i]
		if c < utf8.RuneSelf && c != 0x7f {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(js[i:])
		dst = appendU(dst, r)
		i += size
	}
	return dst
}

const lowerHex = "0123456789abcdef"

// appendU appends r as one \uXXXX escape or a surrogate pair of them.
func appendU(dst []byte, r rune) []byte {
	if r >= 0x10000 {
		r1, r2 := utf16.EncodeRune(r)
		return appendU(appendU(dst, r1), r2)
	}
	return append(dst, '\\', 'u',
		lowerHex[r>>12&0xf], lowerHex[r>>8&0xf], lowerHex[r>>4&0xf], lowerHex[r&0xf])
}

// appendPyString appends s as a JSON string the way Python's json.dumps
// does with ensure_ascii=True.
func appendPyString(dst []byte, s string) []byte {
	dst = slices.Grow(dst, len(s)+2)
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		if pyPlain[s[i]] {
			j := i + 1
			for j < len(s) && pyPlain[s[j]] {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"':
				dst = append(dst, '\\', '"')
			case '\\':
				dst = append(dst, '\\', '\\')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control characters and DEL
				dst = appendU(dst, rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		dst = appendU(dst, r) // invalid UTF-8 gives U+FFFD
		i += size
	}
	return append(dst, '"')
}

// pyPlain marks the bytes a Python JSON string holds as they are:
// printable ASCII but for '"' and '\\'.
var pyPlain = func() (t [256]bool) {
	for c := 0x20; c <= 0x7e; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendPyFloat appends f as Python's float repr: shortest round-trip
// digits; scientific notation when the decimal exponent is below -4 or at
// least 16, with a sign and two or more exponent digits; otherwise fixed
// notation that always has a fraction (".0").
func appendPyFloat(dst []byte, f float64, bitSize int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, fmt.Errorf("%w: %v is not valid JSON", ErrUnsupportedValue, f)
	}
	var scratch [32]byte
	e := strconv.AppendFloat(scratch[:0], f, 'e', -1, bitSize)
	exp := 0
	if i := bytes.IndexByte(e, 'e'); i >= 0 {
		exp, _ = strconv.Atoi(string(e[i+1:]))
	}
	if exp < -4 || exp >= 16 {
		return append(dst, e...), nil
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, 'f', -1, bitSize)
	if bytes.IndexByte(dst[start:], '.') < 0 {
		dst = append(dst, '.', '0')
	}
	return dst, nil
}

// isJSONNumber reports whether s is a JSON number literal.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(s)
}

// ---------------------------------------------------------------------------
// MessagePack

// MsgpackBody is the serializer of body kind msgpack (3).
//
// Marshal (github.com/vmihailenco/msgpack/v5, compact integers, sorted map
// keys) writes what msgpack-python 1.0 writes with its defaults for the
// same ordered mapping: the smallest integer format, float64 for floats,
// str (fixstr/str8/str16/str32) for strings, bin for []byte.
//
// Unmarshal accepts both the current format (as msgpack-python 1.0 writes
// it and reads it with raw=False) and the old one of raet before 2020 (no
// bin type; strings and bytes both as raw, which shares its type codes with
// str): every str/raw value decodes to a Go string, whatever its bytes
// (Python would reject raw bytes that are not UTF-8; we keep them), and
// every bin value to []byte. Map keys must be str/raw or bin (like
// msgpack-python's strict_map_key) and become strings. The timestamp
// extension (-1) decodes to a UTC time.Time; other extension types are
// ErrUnsupportedValue. Trailing bytes are ErrMalformedBody.
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
	if err := checkDepth(v, 0); err != nil {
		return dst, bodyErr(codec.BodyKindMsgpack, "marshal", err)
	}
	start := len(dst)
	st := mpEncPool.Get().(*mpEncState)
	st.w.b = dst
	st.enc.UseCompactInts(true)
	st.enc.SetSortMapKeys(true)
	err := st.enc.Encode(v)
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

func isMsgpackMap(c byte) bool { return c&0xf0 == 0x80 || c == 0xde || c == 0xdf }

// Unmarshal decodes the MessagePack map data into v.
func (MsgpackBody) Unmarshal(data []byte, v any) error {
	if err := checkTarget(v); err != nil {
		return bodyErr(codec.BodyKindMsgpack, "unmarshal", err)
	}
	if len(data) == 0 {
		if setEmpty(v) {
			return nil
		}
		data = []byte{0x80}
	}
	if !isMsgpackMap(data[0]) {
		return bodyErr(codec.BodyKindMsgpack, "unmarshal", ErrNotMapping)
	}
	d := mpDecoder{data: data}
	switch v.(type) {
	case *map[string]any, *any:
		d.build = true
	case *OrderedMap:
		d.build, d.ordered = true, true
	}
	val, err := d.value(0)
	if err == nil && d.off != len(data) {
		err = malformedf("%d bytes after the map", len(data)-d.off)
	}
	if err == nil {
		switch p := v.(type) {
		case *map[string]any:
			*p = val.(map[string]any)
		case *any:
			*p = val
		case *OrderedMap:
			*p = val.(OrderedMap)
		default:
			// The input is now known to be a well-formed, bounded map.
			if err = msgpack.Unmarshal(data, v); err != nil {
				err = malformed(err)
			}
		}
	}
	if err != nil {
		return bodyErr(codec.BodyKindMsgpack, "unmarshal", err)
	}
	return nil
}

// mpDecoder walks MessagePack data without recursion beyond MaxBodyDepth.
// With build unset it only validates; otherwise it builds our dynamic
// values (OrderedMap for maps if ordered).
type mpDecoder struct {
	data    []byte
	off     int
	build   bool
	ordered bool
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
	case !d.build:
		return nil, nil
	case d.ordered:
		return b.m, nil
	}
	return m, nil
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
		return "", err
	}
	return string(p), nil
}

// ---------------------------------------------------------------------------
// CBOR

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
	if err := checkDepth(v, 0); err != nil {
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
func (CBORBody) Unmarshal(data []byte, v any) error {
	if err := checkTarget(v); err != nil {
		return bodyErr(codec.BodyKindCBOR, "unmarshal", err)
	}
	if len(data) == 0 {
		if setEmpty(v) {
			return nil
		}
		data = []byte{0xa0}
	}
	if data[0]>>5 != 5 {
		return bodyErr(codec.BodyKindCBOR, "unmarshal", ErrNotMapping)
	}
	var err error
	switch p := v.(type) {
	case *map[string]any, *any:
		var m map[string]any
		if err = cborDec.Unmarshal(data, &m); err == nil {
			normalizeCBOR(m)
			if pm, ok := p.(*map[string]any); ok {
				*pm = m
			} else {
				*p.(*any) = m
			}
		}
	case *OrderedMap:
		var (
			val  any
			rest []byte
		)
		if val, rest, err = cborOrderedValue(data, 0); err == nil {
			if len(rest) != 0 {
				err = malformedf("%d bytes after the map", len(rest))
			} else {
				*p = val.(OrderedMap)
			}
		}
	default:
		err = cborDec.Unmarshal(data, v)
	}
	if err != nil {
		if !errors.Is(err, ErrMalformedBody) && !errors.Is(err, ErrBodyTooDeep) &&
			!errors.Is(err, ErrNotMapping) {
			var depthErr *cbor.MaxNestedLevelError
			if errors.As(err, &depthErr) {
				err = fmt.Errorf("%w: %w", ErrBodyTooDeep, err)
			} else {
				err = malformed(err)
			}
		}
		return bodyErr(codec.BodyKindCBOR, "unmarshal", err)
	}
	return nil
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
