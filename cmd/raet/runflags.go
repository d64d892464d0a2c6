package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/road"
)

// runFlags are the flags every command that starts a stack shares, in one
// home: serve, send, bench, lane serve and send, and the bus commands
// register them here and apply them to each stack they start.
//
//	--pcap FILE      the stack's traffic as pcapng, for raetdump -r (road and lane)
//	--keylog FILE    the road's session keys, for raetdump -keylog (docs/keylog.md)
//	--aead MODE      the road's fast-profile coat: prefer or refuse
//	PLUGIN FLAGS     --plugins, --serializer, --queue, --coat (road), --plugin-timeout
//
// A command adds a flag of this kind here, once, not in its own flag set:
// a new shared flag (a metrics address, say) is a field of runFlags,
// registered in register for the scopes it applies to, set on each stack's
// configuration in road and lane (or started once in open), and stopped in
// close, which the commands call after their stacks are closed.
type runFlags struct {
	scope        runScope
	pcap, keylog string
	aead         string
	plugins      pluginFlags
	capture      *dissect.PcapngWriter
	captureF     *os.File
	prog         string
	stopPlugins  func()
}

// runScope says which stacks a command starts, and so which flags apply.
type runScope uint8

const (
	scopeRoad    runScope = 1 << iota // a road stack: --keylog, --aead, --coat
	scopeLane                         // a lane stack
	scopePlugins                      // the plugin flags
)

// register adds the flags of scope to fs.
func (f *runFlags) register(fs *flag.FlagSet, scope runScope) {
	f.scope = scope
	f.prog = fs.Name()
	fs.StringVar(&f.pcap, "pcap", "", "write the stack's traffic to this pcapng `file` (for raetdump -r)")
	if scope&scopeRoad != 0 {
		fs.StringVar(&f.keylog, "keylog", "", "append the road's session keys to this `file` (RAET_SESSION lines, for raetdump -keylog; docs/keylog.md); never written unless asked")
		fs.StringVar(&f.aead, "aead", "prefer", "the fast profile's coat: prefer (an AEAD coat, AES-256-GCM or ChaCha20-Poly1305, when the peer offers one) or refuse (the NaCl coat and the MAC foot)")
	}
	if scope&scopePlugins != 0 {
		if scope&scopeRoad != 0 {
			f.plugins.register(fs)
		} else {
			f.plugins.registerLane(fs)
		}
	}
}

// check validates the flags' values before anything is opened: a usage
// error.
func (f *runFlags) check() error {
	if f.scope&scopeRoad != 0 {
		if _, err := parseAEAD(f.aead); err != nil {
			return err
		}
	}
	return nil
}

// open creates the capture file, once for every stack of the command; call
// close after the stacks are closed.
func (f *runFlags) open() error {
	if f.pcap == "" || f.capture != nil {
		return nil
	}
	file, err := os.Create(f.pcap)
	if err != nil {
		return err
	}
	w, err := dissect.NewPcapngWriter(file, &dissect.WriterOptions{Application: f.prog})
	if err != nil {
		file.Close()
		return err
	}
	f.capture, f.captureF = w, file
	return nil
}

// close reports the capture's first write error and closes its file, and
// stops the plugins; call it once the stacks are closed.
func (f *runFlags) close() error {
	if f.stopPlugins != nil {
		f.stopPlugins()
		f.stopPlugins = nil
	}
	if f.capture == nil {
		return nil
	}
	err := errors.Join(f.capture.Err(), f.captureF.Close())
	f.capture = nil
	if err != nil {
		return fmt.Errorf("capture %s: %w", f.pcap, err)
	}
	return nil
}

// road applies the flags to a road stack's cfg: the capture (when tap is
// set: of two stacks in one process, one socket sees all their traffic),
// the key log, the AEAD mode and the plugins.
func (f *runFlags) road(ctx context.Context, cfg *road.Config, tap bool) error {
	if f.capture != nil && tap {
		w := f.capture
		cfg.Tap = func(p road.TapPacket) { w.Tap(dissect.RoadPacket(p)) }
	}
	if f.keylog != "" {
		cfg.KeyLogFile = f.keylog
	}
	if f.scope&scopeRoad != 0 {
		mode, err := parseAEAD(f.aead)
		if err != nil {
			return err
		}
		cfg.AEAD = mode
	}
	if f.scope&scopePlugins != 0 {
		stop, err := f.plugins.apply(ctx, cfg)
		f.addStop(stop)
		return err
	}
	return nil
}

// lane applies the flags to a lane stack's cfg: the capture and the
// plugins.
func (f *runFlags) lane(ctx context.Context, cfg *lane.Config) error {
	if f.capture != nil {
		w := f.capture
		// lane.TapPacket has dissect.LanePacket's fields: a conversion.
		cfg.Tap = func(p lane.TapPacket) { w.TapLane(dissect.LanePacket(p)) }
	}
	if f.scope&scopePlugins != 0 {
		stop, err := f.plugins.applyLane(ctx, cfg)
		f.addStop(stop)
		return err
	}
	return nil
}

func (f *runFlags) addStop(stop func()) {
	if stop == nil {
		return
	}
	if prev := f.stopPlugins; prev != nil {
		f.stopPlugins = func() { stop(); prev() }
		return
	}
	f.stopPlugins = stop
}
