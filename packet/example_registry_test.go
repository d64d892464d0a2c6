package packet_test

import (
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
