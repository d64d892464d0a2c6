package bus

import (
	"net"
	"os"
	"testing"

	"github.com/raet-go/raet/lane"
)

// A Lane's scan of its directory reports a yard's socket once when it is
// found, again when it is made anew (a restart), and gone when it
// vanishes; a socket left by a killed yard does not flap at every scan,
// and files that are not yards of this lane are left alone.
func TestLaneScan(t *testing.T) {
	dir, err := os.MkdirTemp("", "bus")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := lane.New(&lane.Config{Dir: dir, Name: "me"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A yard killed without removing its socket: bound, then closed. It
	// is bound beside and renamed into place, so that a socket made anew
	// is another file even where the file system's clock is coarse.
	ghost := func() {
		tmp := lane.SocketPath(dir, "tmp", "ghost")
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: tmp, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if err := os.Rename(tmp, lane.SocketPath(dir, s.Lane(), "ghost")); err != nil {
			t.Fatal(err)
		}
	}
	ghost()
	for _, name := range []string{lane.SocketPath(dir, s.Lane(), "file"), lane.SocketPath(dir, "other", "x")} {
		if err := os.WriteFile(name, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: lane.SocketPath(dir, "other", "y"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	l := &Lane{s: s, heard: map[string]bool{}, seen: map[string]os.FileInfo{}}
	l.events = make(chan PeerEvent, 16)
	want := func(step string, evs ...PeerEvent) {
		t.Helper()
		l.scan()
		for _, w := range evs {
			select {
			case e := <-l.events:
				if e.Peer != w.Peer || e.State != w.State || e.Reason != w.Reason {
					t.Fatalf("%s: event %+v, want %+v", step, e, w)
				}
			default:
				t.Fatalf("%s: no event, want %+v", step, w)
			}
		}
		select {
		case e := <-l.events:
			t.Fatalf("%s: extra event %+v", step, e)
		default:
		}
	}
	want("found", PeerEvent{Peer: "ghost", State: PeerUp, Reason: "socket found"})
	want("again")
	ghost()
	want("made anew", PeerEvent{Peer: "ghost", State: PeerUp, Reason: "socket found"})
	if err := os.Remove(lane.SocketPath(dir, s.Lane(), "ghost")); err != nil {
		t.Fatal(err)
	}
	want("vanished", PeerEvent{Peer: "ghost", State: PeerGone, Reason: "socket gone"})
	want("still gone")
}
