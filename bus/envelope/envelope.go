// Package envelope is the bus envelope: the body mapping of a message of
// the messaging patterns of package bus (pub/sub, request/reply, push/pull),
// carried by a road or lane stack like any other body. Its fields are
// defined in spec/raet.yaml (section envelope) and described in docs/wire.md;
// envelope_gen.go is generated from there.
//
// An envelope is a mapping whose key bv is Version. Decode takes the mapping
// a stack delivers, in any body kind (JSON, msgpack, CBOR): integers may come
// as any Go integer type, lists as []any or []string.
package envelope

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/raet-go/raet/packet"
)

// Version is the envelope version, the value of bv.
const Version = 1

// Decoding errors; an *Error wraps one of them.
var (
	// ErrNotEnvelope: the mapping has no bv key; it is not a bus message.
	ErrNotEnvelope = errors.New("raet envelope: not an envelope")
	// ErrVersion: bv is not Version.
	ErrVersion = errors.New("raet envelope: unsupported version")
	// ErrMissing: a required key is absent.
	ErrMissing = errors.New("raet envelope: key missing")
	// ErrType: a value has the wrong type or is out of range.
	ErrType = errors.New("raet envelope: wrong type")
	// ErrTooLong: a list or counts value has more than MaxList items.
	ErrTooLong = errors.New("raet envelope: list too long")
)

// Error is a key of an envelope that does not decode.
type Error struct {
	Key string
	Err error
}

func (e *Error) Error() string { return fmt.Sprintf("raet envelope: key %s: %v", e.Key, e.Err) }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether m is an envelope (has the version key).
func Is(m map[string]any) bool {
	_, ok := m[Keys[0]]
	return ok
}

func asUint(v any, bits int) (uint64, error) {
	var u uint64
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return 0, ErrType
		}
		u = uint64(x)
	case uint64:
		u = x
	case int:
		if x < 0 {
			return 0, ErrType
		}
		u = uint64(x)
	case uint32:
		u = uint64(x)
	case uint8:
		u = uint64(x)
	case uint16:
		u = uint64(x)
	case int32:
		if x < 0 {
			return 0, ErrType
		}
		u = uint64(x)
	default:
		return 0, ErrType
	}
	if bits < 64 && u >= 1<<bits {
		return 0, ErrType
	}
	return u, nil
}

func asInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case int:
		return int64(x), nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, ErrType
		}
		return int64(x), nil
	}
	return 0, ErrType
}

func asBool(v any) (bool, error) {
	b, ok := v.(bool)
	if !ok {
		return false, ErrType
	}
	return b, nil
}

func asString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", ErrType
	}
	return s, nil
}

func asStrings(v any) ([]string, error) {
	switch x := v.(type) {
	case []string:
		if len(x) > MaxList {
			return nil, ErrTooLong
		}
		return append([]string(nil), x...), nil
	case []any:
		if len(x) > MaxList {
			return nil, ErrTooLong
		}
		out := make([]string, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, ErrType
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, ErrType
}

func asCounts(v any) (map[string]uint64, error) {
	var n int
	var get func(func(string, any) error) error
	switch x := v.(type) {
	case map[string]any:
		n = len(x)
		get = func(f func(string, any) error) error {
			for k, v := range x {
				if err := f(k, v); err != nil {
					return err
				}
			}
			return nil
		}
	case packet.OrderedMap:
		n = len(x)
		get = func(f func(string, any) error) error {
			for _, kv := range x {
				if err := f(kv.Key, kv.Value); err != nil {
					return err
				}
			}
			return nil
		}
	default:
		return nil, ErrType
	}
	if n > MaxList {
		return nil, ErrTooLong
	}
	out := make(map[string]uint64, n)
	err := get(func(k string, v any) error {
		u, err := asUint(v, 64)
		out[k] = u
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// countsValue writes counts as a mapping with sorted keys.
func countsValue(c map[string]uint64) packet.OrderedMap {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	m := make(packet.OrderedMap, len(keys))
	for i, k := range keys {
		m[i] = packet.KV{Key: k, Value: c[k]}
	}
	return m
}
