package packet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/raet-go/raet/codec"
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
	// ErrCannotCarry: a value that the body kind cannot carry although
	// another kind can, such as bytes or a time in json, or an integer
	// beyond 64 bits in msgpack: it is refused, never silently re-encoded
	// as something else (a base64 string, a byte string), as the
	// reference's encoders refuse it. errors.Is(err, ErrUnsupportedValue)
	// holds too.
	ErrCannotCarry = errors.New("raet: the body kind cannot carry the value")
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
// depth, well-formedness); should the library panic all the same, the
// panic is an ErrMalformedBody error. Decoded values never alias data. Dynamic values
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

var (
	_ Serializer = NadaBody{}
	_ Serializer = JSONBody{}
	_ Serializer = RawBody{}
	_ Serializer = MsgpackBody{}
	_ Serializer = CBORBody{}
)

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

// walkValues bounds the nesting of the dynamic container types
// (map[string]any, []any, OrderedMap) before a library encoder recurses
// into them (a cycle would overflow the stack), and hands every other value
// to leaf, when not nil, which may refuse it or replace it (changed). The
// containers on the way to a replaced value are copied; v is never
// modified.
func walkValues(v any, depth int, leaf func(any) (any, bool, error)) (_ any, changed bool, _ error) {
	switch x := v.(type) {
	case map[string]any:
		if depth++; depth > MaxBodyDepth {
			return v, false, ErrBodyTooDeep
		}
		var out map[string]any
		for k, e := range x {
			ne, ch, err := walkValues(e, depth, leaf)
			if err != nil {
				return v, false, err
			}
			if ch {
				if out == nil {
					out = maps.Clone(x)
				}
				out[k] = ne
			}
		}
		if out != nil {
			return out, true, nil
		}
	case []any:
		if depth++; depth > MaxBodyDepth {
			return v, false, ErrBodyTooDeep
		}
		var out []any
		for i, e := range x {
			ne, ch, err := walkValues(e, depth, leaf)
			if err != nil {
				return v, false, err
			}
			if ch {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i] = ne
			}
		}
		if out != nil {
			return out, true, nil
		}
	case OrderedMap:
		if depth++; depth > MaxBodyDepth {
			return v, false, ErrBodyTooDeep
		}
		var out OrderedMap
		for i := range x {
			ne, ch, err := walkValues(x[i].Value, depth, leaf)
			if err != nil {
				return v, false, err
			}
			if ch {
				if out == nil {
					out = slices.Clone(x)
				}
				out[i].Value = ne
			}
		}
		if out != nil {
			return out, true, nil
		}
	case nil, string, bool, int, int64, uint64, float64, []byte: // the common leaves
	default:
		if leaf != nil {
			return leaf(v)
		}
	}
	return v, false, nil
}

// carryError is ErrCannotCarry for one value.
type carryError struct{ what string }

func (e carryError) Error() string { return "raet: the body kind cannot carry " + e.what }

// Is makes the error both ErrCannotCarry and ErrUnsupportedValue.
func (e carryError) Is(target error) bool {
	return target == ErrCannotCarry || target == ErrUnsupportedValue
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

// mappingKind is what a mapping body kind (json, msgpack, cbor) gives
// unmarshalMapping, the one Unmarshal of the three.
type mappingKind interface {
	Kind() codec.BodyKind
	// emptyMap is the kind's encoding of {}: what zero bytes stand for
	// when the target is not one of the default ones.
	emptyMap() []byte
	// checkMapping tells ErrNotMapping from the first byte, where the
	// kind can (data is not empty).
	checkMapping(data []byte) error
	// decodeMap and decodeOrdered build the default targets' values.
	decodeMap(data []byte) (map[string]any, error)
	decodeOrdered(data []byte) (OrderedMap, error)
	// decodeInto checks data (mapping, depth, well-formedness) and then
	// has the kind's library decode it into v, any other pointer.
	decodeInto(data []byte, v any) error
}

// unmarshalMapping is Unmarshal of the mapping kinds (see Serializer).
// Errors that are none of the body layer's own are ErrMalformedBody.
func unmarshalMapping(k mappingKind, data []byte, v any) error {
	if err := checkTarget(v); err != nil {
		return bodyErr(k.Kind(), "unmarshal", err)
	}
	if len(data) == 0 {
		if setEmpty(v) {
			return nil
		}
		data = k.emptyMap()
	}
	err := k.checkMapping(data)
	if err == nil {
		switch p := v.(type) {
		case *map[string]any:
			var m map[string]any
			if m, err = k.decodeMap(data); err == nil {
				*p = m
			}
		case *any:
			var m map[string]any
			if m, err = k.decodeMap(data); err == nil {
				*p = m
			}
		case *OrderedMap:
			var m OrderedMap
			if m, err = k.decodeOrdered(data); err == nil {
				*p = m
			}
		default:
			err = decodeGuarded(k, data, v)
		}
	}
	if err != nil {
		if !errors.Is(err, ErrMalformedBody) && !errors.Is(err, ErrBodyTooDeep) &&
			!errors.Is(err, ErrNotMapping) && !errors.Is(err, ErrUnsupportedValue) {
			err = malformed(err)
		}
		return bodyErr(k.Kind(), "unmarshal", err)
	}
	return nil
}

// errDecoderPanic marks a panic of a library decoder turned into an error.
// The inputs known to cause one are handled before the library sees them;
// this is the last line, so that no wire input can crash a process (the
// fuzz targets fail on it).
var errDecoderPanic = errors.New("the decoder library panicked")

func decodeGuarded(k mappingKind, data []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %w: %v", ErrMalformedBody, errDecoderPanic, r)
		}
	}()
	return k.decodeInto(data, v)
}
