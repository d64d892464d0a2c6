package packet_test

import (
	"errors"
	"fmt"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// upper is a serializer of a kind of our own: raw bytes, upper-cased.
type upper struct{ packet.RawBody }

func (upper) Kind() codec.BodyKind { return 200 }

func ExampleRegistry() {
	reg := packet.NewRegistry() // a stack's own, e.g. road.Config.Serializers
	if err := reg.Register(upper{}); err != nil {
		fmt.Println(err)
	}
	s, err := reg.Lookup(200)
	fmt.Println(s.Kind(), err)
	_, err = packet.SerializerFor(200) // the process-wide registry does not have it
	fmt.Println(err)
	// Output:
	// BodyKind(200) <nil>
	// raet: lookup BodyKind(200) body: unknown body kind
}

// A body re-sent in another kind keeps its key order, and what that kind
// cannot carry is refused, not re-encoded.
func ExampleErrCannotCarry() {
	var body packet.OrderedMap
	_ = packet.JSONBody{}.Unmarshal([]byte(`{"z":1,"big":1180591620717411303424}`), &body)
	_, err := packet.MsgpackBody{}.Marshal(nil, body)
	fmt.Println(errors.Is(err, packet.ErrCannotCarry))
	fmt.Println(err)
	// Output:
	// true
	// raet: marshal msgpack body: the body kind cannot carry an integer beyond 64 bits in msgpack
}
