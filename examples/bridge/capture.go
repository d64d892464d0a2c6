package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/road"
)

// capture writes a bridge's road datagrams and lane pages to one pcapng
// file. A nil *capture writes nothing.
type capture struct {
	path string
	f    *os.File
	pw   *dissect.PcapngWriter
}

// openCapture creates the capture file; an empty path gives nil.
func openCapture(path string) (*capture, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	pw, err := dissect.NewPcapngWriter(f, &dissect.WriterOptions{Application: "raet-go examples/bridge"})
	if err != nil {
		f.Close()
		return nil, err
	}
	return &capture{path: path, f: f, pw: pw}, nil
}

// road returns the tap of the road stack.
func (c *capture) road() func(road.TapPacket) {
	if c == nil {
		return nil
	}
	return func(p road.TapPacket) { c.pw.Tap(dissect.RoadPacket(p)) }
}

// lane returns the tap of the lane stack: lane.TapPacket has the fields of
// dissect.LanePacket.
func (c *capture) lane() func(lane.TapPacket) {
	if c == nil {
		return nil
	}
	return func(p lane.TapPacket) { c.pw.TapLane(dissect.LanePacket(p)) }
}

// close closes the file, once the stacks are closed, and sets *errp to the
// first write error if *errp is nil.
func (c *capture) close(errp *error) {
	if c == nil {
		return
	}
	if err := errors.Join(c.pw.Err(), c.f.Close()); err != nil && *errp == nil {
		*errp = fmt.Errorf("capture %s: %w", c.path, err)
	}
}
