package lane

import "time"

// TapPacket is one page seen by Config.Tap: a datagram this yard sent or
// received, whole (head and section).
//
// Its fields are those of dissect.LanePacket, in the same order, so that a
// capture writer of package dissect takes it by a plain conversion (the
// lane package itself does not depend on dissect):
//
//	pw, err := dissect.NewPcapngWriter(f, nil)
//	...
//	cfg.Tap = func(p lane.TapPacket) { pw.TapLane(dissect.LanePacket(p)) }
//
// Like road.TapPacket it names the two ends from the yard's point of view,
// Local and Remote, with Out for the direction; Source and Destination
// give them in the direction of travel.
type TapPacket struct {
	// Out is true for a page this yard sent, false for one it received.
	Out bool
	// Local is this yard's socket path, <Dir>/<Lane>.<Name>.uxd.
	Local string
	// Remote is the other yard's socket path: where a page was sent, or
	// the address a received page came from ("" for an unnamed socket).
	// The yard names are in the page's head (sn, dn).
	Remote string
	// Time is when the page was sent or read.
	Time time.Time
	// Data is the page. It is only valid during the call: the stack reuses
	// the buffer.
	Data []byte
}

// Source returns the socket path of the yard that sent the page.
func (p TapPacket) Source() string {
	if p.Out {
		return p.Local
	}
	return p.Remote
}

// Destination returns the socket path of the yard the page was sent to.
func (p TapPacket) Destination() string {
	if p.Out {
		return p.Remote
	}
	return p.Local
}
