//go:build !pcap

package main

import (
	"os"
	"testing"
)

// TestLiveLoopback is in live_test.go, built with -tags pcap (it needs
// libpcap-dev). CI runs it; elsewhere this build only says how.
func TestLiveLoopback(t *testing.T) {
	const how = "live capture needs a build with -tags pcap (and libpcap-dev): go test -tags pcap ./cmd/raetdump, as root"
	if os.Getenv("CI") != "" {
		t.Fatal(how + "; CI must run it")
	}
	t.Skip(how)
}
