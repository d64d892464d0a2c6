// Command raet-serializer-zstdjson is the zstdjson serializer plugin (body
// kind 5, zstd-compressed JSON). An estate starts it; run by hand it only
// says so.
package main

import (
	"fmt"
	"os"

	"github.com/klauspost/compress/zstd"

	"github.com/raet-go/raet/plugins/sdk"
	"github.com/raet-go/raet/plugins/serializer/zstdjson"
)

func main() {
	s, err := zstdjson.New(zstd.SpeedFastest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "raet-serializer-zstdjson:", err)
		os.Exit(1)
	}
	defer s.Close()
	sdk.Serve(s, sdk.WithLogger(sdk.Logger("zstdjson")))
}
