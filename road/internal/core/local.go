package core

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"

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

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("raet: crypto/rand: %v", err)) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// parseHostPort turns a kept address into an AddrPort; the reference keeps
// an empty or 0.0.0.0 host as 127.0.0.1 and :: as ::1 (§9.1).
func parseHostPort(h keep.HostPort) (netip.AddrPort, error) {
	host := h.Host
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("host %q: %w", h.Host, err)
	}
	return netip.AddrPortFrom(a.Unmap(), h.Port), nil
}
