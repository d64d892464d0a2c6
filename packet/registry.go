package packet

import (
	"fmt"
	"sync"

	"github.com/raet-go/raet/codec"
)

// Registry finds the serializer of a body kind: the built-in kinds, then
// the serializers registered with it (plugins, extensions). A stack looks
// up the kinds it receives in its own registry, so that two stacks in one
// process can carry different serializers for one kind; a nil *Registry
// stands for the process-wide one, DefaultRegistry. Its methods are safe
// for concurrent use.
type Registry struct {
	mu          sync.RWMutex
	serializers map[codec.BodyKind]Serializer
}

// NewRegistry returns a registry that knows only the built-in kinds.
func NewRegistry() *Registry {
	return &Registry{serializers: map[codec.BodyKind]Serializer{}}
}

var defaultRegistry = NewRegistry()

// DefaultRegistry returns the process-wide registry: the one of SerializerFor
// and RegisterSerializer, and of every stack whose configuration names none.
func DefaultRegistry() *Registry { return defaultRegistry }

func (r *Registry) orDefault() *Registry {
	if r == nil {
		return defaultRegistry
	}
	return r
}

// Register makes s the serializer of its body kind. The built-in kinds
// cannot be replaced, and a kind can be registered once.
func (r *Registry) Register(s Serializer) error {
	r = r.orDefault()
	k := s.Kind()
	if builtin(k) != nil {
		return fmt.Errorf("raet: body kind %v is built in", k)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.serializers[k]; dup {
		return fmt.Errorf("raet: body kind %v is registered already", k)
	}
	r.serializers[k] = s
	return nil
}

// Unregister removes the serializer registered for kind (when a plugin
// stops).
func (r *Registry) Unregister(kind codec.BodyKind) {
	r = r.orDefault()
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.serializers, kind)
}

// Lookup returns the serializer of a body kind: the built-in one, or the
// one registered; else a *BodyError with ErrUnknownBodyKind.
func (r *Registry) Lookup(kind codec.BodyKind) (Serializer, error) {
	if s := builtin(kind); s != nil {
		return s, nil
	}
	r = r.orDefault()
	r.mu.RLock()
	s := r.serializers[kind]
	r.mu.RUnlock()
	if s == nil {
		return nil, bodyErr(kind, "lookup", ErrUnknownBodyKind)
	}
	return s, nil
}

// Builtin returns the built-in serializer of a body kind (nada, json, raw,
// msgpack, cbor), else a *BodyError with ErrUnknownBodyKind: for the
// bodies that only the built-in kinds may carry, such as those of the
// control packets.
func Builtin(kind codec.BodyKind) (Serializer, error) {
	if s := builtin(kind); s != nil {
		return s, nil
	}
	return nil, bodyErr(kind, "lookup", ErrUnknownBodyKind)
}

// builtin returns the built-in serializer of a kind, or nil.
func builtin(kind codec.BodyKind) Serializer {
	switch kind {
	case codec.BodyKindNada:
		return NadaBody{}
	case codec.BodyKindJSON:
		return JSONBody{}
	case codec.BodyKindRaw:
		return RawBody{}
	case codec.BodyKindMsgpack:
		return MsgpackBody{}
	case codec.BodyKindCBOR:
		return CBORBody{}
	}
	return nil
}

// SerializerFor returns the serializer of a body kind in the process-wide
// registry: DefaultRegistry().Lookup(kind).
func SerializerFor(kind codec.BodyKind) (Serializer, error) {
	return defaultRegistry.Lookup(kind)
}

// RegisterSerializer registers s in the process-wide registry:
// DefaultRegistry().Register(s).
func RegisterSerializer(s Serializer) error { return defaultRegistry.Register(s) }

// UnregisterSerializer removes the serializer of kind from the process-wide
// registry.
func UnregisterSerializer(kind codec.BodyKind) { defaultRegistry.Unregister(kind) }
