package packet

import (
	"fmt"
	"sync"

	"github.com/raet-go/raet/codec"
)

var (
	registryMu  sync.RWMutex
	serializers = map[codec.BodyKind]Serializer{}
)

// RegisterSerializer makes s the serializer of its body kind for
// SerializerFor: how serializer plugins and extensions join in. The
// built-in kinds cannot be replaced, and a kind can be registered once.
func RegisterSerializer(s Serializer) error {
	k := s.Kind()
	switch k {
	case codec.BodyKindNada, codec.BodyKindJSON, codec.BodyKindRaw, codec.BodyKindMsgpack, codec.BodyKindCBOR:
		return fmt.Errorf("raet: body kind %v is built in", k)
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := serializers[k]; dup {
		return fmt.Errorf("raet: body kind %v is registered already", k)
	}
	serializers[k] = s
	return nil
}

// UnregisterSerializer removes the serializer registered for kind (when a
// plugin stops).
func UnregisterSerializer(kind codec.BodyKind) {
	registryMu.Lock()
	defer registryMu.Unlock()
	delete(serializers, kind)
}

func registered(k codec.BodyKind) Serializer {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return serializers[k]
}
