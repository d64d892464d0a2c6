package main

import (
	"errors"
	"os"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/lane"
)

// laneCapture creates the pcapng file path and returns a lane tap writing
// every page to it as a lane record (dissect.LinkTypeLane), and a function
// that reports the first write error and closes the file; call it once the
// stack is closed.
func laneCapture(path string) (func(lane.TapPacket), func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	pw, err := dissect.NewPcapngWriter(f, &dissect.WriterOptions{Application: "raet lane serve"})
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	// lane.TapPacket has dissect.LanePacket's fields: a conversion.
	tap := func(p lane.TapPacket) { pw.TapLane(dissect.LanePacket(p)) }
	return tap, func() error { return errors.Join(pw.Err(), f.Close()) }, nil
}
