package road_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// taggedJSON is a serializer of the zstdjson kind that is JSON behind a tag
// of its own; two of them stand for two different plugins of one kind.
type taggedJSON struct{ tag string }

func (s taggedJSON) Kind() codec.BodyKind { return codec.BodyKindZstdJSON }

func (s taggedJSON) Marshal(dst []byte, v any) ([]byte, error) {
	return packet.JSONBody{}.Marshal(append(dst, s.tag...), v)
}

func (s taggedJSON) Unmarshal(data []byte, v any) error {
	rest, ok := bytes.CutPrefix(data, []byte(s.tag))
	if !ok {
		return errors.New("not tagged " + s.tag)
	}
	if err := (packet.JSONBody{}).Unmarshal(rest, v); err != nil {
		return err
	}
	if m, ok := v.(*map[string]any); ok {
		(*m)["decoded by"] = s.tag
	}
	return nil
}

// TestSerializersPerStack: two pairs of stacks in one process carry the
// same body kind with different serializers, each main decoding with the
// one of its own registry, which the process-wide registry does not know.
func TestSerializersPerStack(t *testing.T) {
	for _, tag := range []string{"a:", "b:"} {
		ser := taggedJSON{tag}
		reg := packet.NewRegistry()
		if err := reg.Register(ser); err != nil {
			t.Fatal(err)
		}
		m, o := joined(t, road.Config{Serializers: reg}, road.Config{Serializer: ser})
		if err := o.Send(ctxT(t, 10*time.Second), "main", map[string]any{"n": 1}); err != nil {
			t.Fatalf("%s: send: %v", tag, err)
		}
		msg := recvOne(t, m, 10*time.Second)
		if msg.Kind != codec.BodyKindZstdJSON || msg.Body["decoded by"] != tag || msg.Body["n"] != int64(1) {
			t.Fatalf("%s: got kind %v body %v", tag, msg.Kind, msg.Body)
		}
	}
	if _, err := packet.SerializerFor(codec.BodyKindZstdJSON); !errors.Is(err, packet.ErrUnknownBodyKind) {
		t.Fatalf("the process-wide registry has the kind: %v", err)
	}
}
