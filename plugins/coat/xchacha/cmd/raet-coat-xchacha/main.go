// Command raet-coat-xchacha is the xchacha coat plugin (coat kind 5,
// XChaCha20-Poly1305 keyed by HKDF from the session key).
package main

import (
	"github.com/raet-go/raet/plugins/coat/xchacha"
	"github.com/raet-go/raet/plugins/sdk"
)

func main() {
	sdk.Serve(xchacha.New(nil), sdk.WithLogger(sdk.Logger("xchacha")))
}
