//go:build !pcap

package main

import (
	"errors"

	"github.com/raet-go/raet/dissect"
)

var errNoPcap = errors.New("this raetdump was built without libpcap: rebuild with -tags pcap (needs libpcap-dev) for -i and filter expressions")

func openLive(iface string, snaplen int, filter string, inOnly bool) (source, error) {
	return nil, errNoPcap
}

func newFilter(expr string, snaplen int) (func(dissect.Record) bool, error) { return nil, errNoPcap }

// liveCapture reports whether this build captures live.
const liveCapture = false
