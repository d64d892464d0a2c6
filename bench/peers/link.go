package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raet-go/raet/internal/netns"
	"github.com/raet-go/raet/netsim"
)

// Over an emulated link (-link SCENARIO), peers runs inside side a of a
// cmd/raet-netem link, and every peer's server side (the receiver, the
// responder, the REP and PULL sockets, the road's main estate) opens its
// sockets in side b's namespace on b's address: each message crosses the
// link, and its ack or reply comes back across it. The NATS server starts
// its listener on a goroutine of its own, which cannot be put in b, so it
// runs in a beside the requester, and the responder's connection crosses
// the link: a request still crosses it once each way, as with a server
// beside the responder.
type linkSides struct {
	serverNS           string // "" on loopback
	serverIP, clientIP string
	scenario           *netsim.Scenario
	ccs                []string // TCP congestion controls each TCP row runs with
	bulk               string   // congestion control of a bulk flow beside every row; "" for none
}

var link = linkSides{serverIP: "127.0.0.1", clientIP: "127.0.0.1"}

// onServer runs f where the server side's sockets belong.
func onServer(f func() error) error {
	if link.serverNS == "" {
		return f()
	}
	return netns.Do(link.serverNS, f)
}

// hostPort joins a host and port 0 for a listener.
func anyPort(host string) string { return host + ":0" }

// overLink re-runs this command under raet-netem with scenario, unless it
// already runs there (raet-netem tells its commands the namespaces), and
// returns whether it ran it (its exit status then) or this process is on
// the link now and should measure.
func overLink(netem, scenario string) (ran bool, code int, err error) {
	sc, err := netsim.LoadScenario(scenario)
	if err != nil {
		return false, 0, err
	}
	if ns := os.Getenv("RAET_NETEM_NS_B"); ns != "" {
		link = linkSides{serverNS: ns, serverIP: os.Getenv("RAET_NETEM_B"), clientIP: os.Getenv("RAET_NETEM_A"),
			scenario: sc, ccs: []string{"cubic", "bbr"}}
		if link.serverIP == "" || link.clientIP == "" {
			return false, 0, errors.New("RAET_NETEM_A and RAET_NETEM_B are not set")
		}
		return false, 0, nil
	}
	self, err := os.Executable()
	if err != nil {
		return true, 0, err
	}
	args := append([]string{"-scenario", scenario, "--", self}, os.Args[1:]...)
	args = append(args, "--", "sleep", "infinity")
	cmd := exec.Command(netem, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return true, ee.ExitCode(), nil
	}
	return true, 0, err
}

// setCC gives every TCP connection of this process that crosses the link
// (both its ends: the process holds both) congestion control cc, waiting
// up to 5 s for at least two such sockets: libzmq connects in the
// background. The namespaces' default cannot be set instead: a namespace
// other than the first may only default to the host's allowed list
// (here "reno bbr"), while setsockopt lets root choose any available one.
// libzmq and the NATS client make their sockets themselves, so they are
// found among the process's file descriptors.
func setCC(cc string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := setLinkSocketsCC(cc)
		if err != nil {
			return err
		}
		if n >= 2 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("congestion control %s: %d TCP sockets on the link, want both ends", cc, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// setLinkSocketsCC sets cc on the process's TCP sockets whose peer is on
// the other side of the link, and reads it back; it returns how many.
func setLinkSocketsCC(cc string) (int, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if proto, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_PROTOCOL); err != nil || proto != unix.IPPROTO_TCP {
			continue
		}
		sa, err := unix.Getpeername(fd)
		if err != nil {
			continue
		}
		peer, ok := sa.(*unix.SockaddrInet4)
		if !ok {
			continue
		}
		ip := netip.AddrFrom4(peer.Addr).String()
		if ip != link.serverIP && ip != link.clientIP {
			continue
		}
		if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc); err != nil {
			return n, fmt.Errorf("congestion control %s: %w", cc, err)
		}
		if got, err := unix.GetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION); err != nil || strings.TrimRight(got, "\x00") != cc {
			return n, fmt.Errorf("congestion control %s: the socket has %q (%v)", cc, got, err)
		}
		n++
	}
	return n, nil
}

// withCC names a TCP peer's rows after each congestion control over a
// link (one row each), and leaves it alone on loopback.
func withCC(p peer) []peer {
	if len(link.ccs) == 0 {
		return []peer{p}
	}
	var out []peer
	for _, cc := range link.ccs {
		q := p
		q.name = p.name + " " + cc
		if p.dial != nil {
			q.dial = thenCC(cc, p.dial)
		}
		if p.oneWay != nil {
			q.oneWay = thenCC(cc, p.oneWay)
		}
		out = append(out, q)
	}
	return out
}

// bdpWindow is the one-way window over a link: at least w, and at least
// the messages of size bytes in one bandwidth-delay product (when the link
// has a rate), so that the window does not bound the rate.
func bdpWindow(w, size int) int {
	sc := link.scenario
	if sc == nil || sc.AToB.Rate == 0 {
		return w
	}
	bdp := sc.AToB.Rate / 8 * sc.RTT().Seconds()
	return max(w, int(math.Ceil(bdp/float64(max(size, 1)))))
}

// linkTitle says where the table was measured.
func linkTitle() string {
	sc := link.scenario
	if sc == nil {
		return "loopback"
	}
	var parts []string
	parts = append(parts, fmt.Sprintf("link %s: RTT %v", sc.Name, sc.RTT()))
	if sc.AToB.Loss > 0 || sc.BToA.Loss > 0 {
		parts = append(parts, fmt.Sprintf("loss %g%%/%g%%", 100*sc.AToB.Loss, 100*sc.BToA.Loss))
	}
	if sc.AToB.Jitter > 0 {
		parts = append(parts, fmt.Sprintf("jitter %v", sc.AToB.Jitter))
	}
	if sc.AToB.Rate > 0 {
		parts = append(parts, fmt.Sprintf("%g Mbit/s, queue %d", sc.AToB.Rate/1e6, sc.AToB.Queue))
	}
	return strings.Join(parts, ", ") + " (raet-netem)"
}

// linkTimeout is how long a run waits for the last acks: longer over a
// slow link.
func linkTimeout() time.Duration {
	if link.scenario == nil {
		return 30 * time.Second
	}
	return 30*time.Second + 100*link.scenario.RTT()
}

// thenCC is dial followed by setCC(cc).
func thenCC[T interface{ close() }](cc string, dial func() (T, error)) func() (T, error) {
	return func() (T, error) {
		t, err := dial()
		if err == nil {
			if err = setCC(cc); err != nil {
				t.close()
			}
		}
		return t, err
	}
}

// startBulk starts, over a link with -bulk, a TCP bulk transfer from a to
// b with congestion control link.bulk, to share the link with the row
// measured meanwhile; stop ends it and returns its goodput in Mbit/s
// (what b received over the flow's life). Without -bulk it does nothing.
func startBulk() (stop func() (float64, error), err error) {
	if link.bulk == "" || link.scenario == nil {
		return func() (float64, error) { return 0, nil }, nil
	}
	var ln net.Listener
	if err := onServer(func() (err error) {
		ln, err = net.Listen("tcp4", anyPort(link.serverIP))
		return err
	}); err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	var received atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			received.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	c, err := net.DialTimeout("tcp4", ln.Addr().String(), 10*time.Second)
	if err == nil {
		err = setSocketCC(c.(*net.TCPConn), link.bulk)
	}
	if err != nil {
		ln.Close()
		if c != nil {
			c.Close()
		}
		<-done
		return nil, err
	}
	start := time.Now()
	quit := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		buf := make([]byte, 64<<10)
		for {
			select {
			case <-quit:
				return
			default:
			}
			_ = c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := c.Write(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
		}
	}()
	return func() (float64, error) {
		close(quit)
		<-wrote
		mbps := float64(received.Load()) * 8 / 1e6 / time.Since(start).Seconds()
		c.Close()
		ln.Close()
		<-done
		return mbps, nil
	}, nil
}

// setSocketCC sets a connection's congestion control.
func setSocketCC(c *net.TCPConn, cc string) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("congestion control %s: %w", cc, serr)
	}
	return nil
}

// lossy reports whether the link loses datagrams on purpose.
func (l *linkSides) lossy() bool {
	if l.scenario == nil {
		return false
	}
	a, b := l.scenario.AToB, l.scenario.BToA
	return a.Loss > 0 || b.Loss > 0 || a.Bursts.GoodToBad > 0 || b.Bursts.GoodToBad > 0
}
