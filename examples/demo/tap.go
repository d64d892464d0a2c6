package main

import (
	"fmt"
	"os"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/road"
)

// openTap writes the estates' traffic to a pcapng file at path; an empty
// path taps nothing.
func openTap(path string) (func(road.TapPacket), func() error, error) {
	if path == "" {
		return nil, func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	pw, err := dissect.NewPcapngWriter(f, nil)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return func(p road.TapPacket) { pw.Tap(dissect.RoadPacket(p)) }, func() error {
		werr := pw.Err()
		if err := f.Close(); err != nil && werr == nil {
			werr = err
		}
		if werr != nil {
			return fmt.Errorf("capture %s: %w", path, werr)
		}
		return nil
	}, nil
}
