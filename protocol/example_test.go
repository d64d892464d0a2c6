package protocol_test

import (
	"fmt"

	"github.com/raet-go/raet/protocol"
)

// An enumeration's values come with the names the specification gives
// them, both ways; a number the specification does not declare is not
// Valid.
func Example() {
	p, ok := protocol.ParseBusPolicy("drop_oldest")
	fmt.Println(p, uint8(p), ok)
	fmt.Println(protocol.AutoModeOnce, protocol.AutoMode(7).Valid())
	fmt.Printf("udp port %d\n", protocol.DefaultPort)
	// Output:
	// drop_oldest 2 true
	// once false
	// udp port 7530
}
