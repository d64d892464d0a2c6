package core

import (
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
)

// localEstate is the estate the core is: its names, ids and keys, as the
// keep holds them (saveLocal) and the handshakes send them.
type localEstate struct {
	name, role string
	uid        uint32
	puid       uint32 // the last uid given to a remote (nextUid)
	sid        uint32
	signing    keys.Signing
	box        keys.Box
	fqdn       string
	aha        keep.HostPort
	keptAHA    keep.HostPort // aha as the keep had it at start: our address last time
	main       bool
}
