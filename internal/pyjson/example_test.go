package pyjson_test

import (
	"fmt"

	"github.com/raet-go/raet/internal/pyjson"
)

func Example() {
	b := []byte("{")
	b = pyjson.AppendString(b, "café 😀")
	b = append(b, ':')
	b = pyjson.AppendFloat(b, 3, 64)
	b = append(b, '}')
	fmt.Println(string(b))
	n, integer := pyjson.ScanNumber([]byte("-12,"))
	fmt.Println(n, integer)
	// Output:
	// {"caf\u00e9 \ud83d\ude00":3.0}
	// 3 true
}
