//go:build pcap

package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcap"

	"github.com/raet-go/raet/dissect"
)

// liveSource captures with libpcap through gopacket/pcap.
type liveSource struct {
	h    *pcap.Handle
	link int
}

// openLive opens iface for capture with an optional BPF filter, of only
// the frames the host receives when inOnly. The read timeout lets Next
// return periodically so that the capture can end.
func openLive(iface string, snaplen int, filter string, inOnly bool) (source, error) {
	h, err := pcap.OpenLive(iface, int32(snaplen), false, 200*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("-i %s: %w", iface, err)
	}
	if inOnly {
		if err := h.SetDirection(pcap.DirectionIn); err != nil {
			h.Close()
			return nil, fmt.Errorf("-i %s: capture only received frames (each loopback frame once): %w; -dedup=false shows both copies", iface, err)
		}
	}
	if filter != "" {
		if err := h.SetBPFFilter(filter); err != nil {
			h.Close()
			return nil, fmt.Errorf("filter %q: %w", filter, err)
		}
	}
	return &liveSource{h: h, link: realLinkType(h.LinkType())}, nil
}

// realLinkType undoes gopacket's uint8 link type: libpcap gives no link
// type whose low byte is 20 but LINKTYPE_LINUX_SLL2 (276).
func realLinkType(l layers.LinkType) int {
	if l == 20 {
		return dissect.LinkTypeLinuxSLL2
	}
	return int(l)
}

func (s *liveSource) Next() (dissect.Record, error) {
	for {
		data, ci, err := s.h.ZeroCopyReadPacketData()
		switch {
		case err == nil:
			return dissect.Record{Time: ci.Timestamp, LinkType: s.link, Data: data, Length: ci.Length}, nil
		case errors.Is(err, pcap.NextErrorTimeoutExpired):
			continue
		}
		return dissect.Record{}, err
	}
}

func (s *liveSource) Close() error { s.h.Close(); return nil }

// newFilter compiles a BPF filter for frames read from a file; each link
// type gets its own program.
func newFilter(expr string, snaplen int) (func(dissect.Record) bool, error) {
	progs := map[int]*pcap.BPF{}
	compile := func(link int) (*pcap.BPF, error) {
		if p, ok := progs[link]; ok {
			return p, nil
		}
		if link > 255 {
			return nil, fmt.Errorf("filter: link type %d cannot be given to gopacket/pcap", link)
		}
		p, err := pcap.NewBPF(layers.LinkType(link), snaplen, expr)
		if err != nil {
			return nil, fmt.Errorf("filter %q: %w", expr, err)
		}
		progs[link] = p
		return p, nil
	}
	if _, err := compile(dissect.LinkTypeRaw); err != nil {
		return nil, err
	}
	return func(rec dissect.Record) bool {
		p, err := compile(rec.LinkType)
		if err != nil {
			return false
		}
		ci := gopacket.CaptureInfo{Timestamp: rec.Time, CaptureLength: len(rec.Data), Length: rec.Length}
		return p.Matches(ci, rec.Data)
	}, nil
}

// liveCapture reports whether this build captures live.
const liveCapture = true
