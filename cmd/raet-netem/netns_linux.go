package main

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/raet-go/raet/internal/netns"
)

// namePrefix starts the name of every namespace raet-netem makes, so that
// -cleanup finds what a killed run left and touches nothing else.
const namePrefix = "raetnetem-"

// tunName is the TUN device's name inside each namespace.
const tunName = "netem0"

// end is one side of the emulated link: a namespace with a TUN device
// whose address reaches the other side's through the bridge.
type end struct {
	ns   string     // namespace name (ip netns)
	addr netip.Addr // this side's address
	tun  int        // the TUN device's file descriptor, in this process
}

// ipCmd runs the ip command, returning its error with its output.
func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// makeEnd creates namespace ns with loopback up and a TUN device holding
// addr, with a host route to peer through it.
func makeEnd(ns string, addr, peer netip.Addr, mtu int) (*end, error) {
	if err := ipCmd("netns", "add", ns); err != nil {
		return nil, err
	}
	e := &end{ns: ns, addr: addr, tun: -1}
	var err error
	if e.tun, err = openTUN(ns); err != nil {
		return e, err
	}
	for _, args := range [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "set", tunName, "mtu", fmt.Sprint(mtu), "up"},
		{"-n", ns, "addr", "add", addr.String() + "/32", "peer", peer.String() + "/32", "dev", tunName},
	} {
		if err := ipCmd(args...); err != nil {
			return e, err
		}
	}
	return e, nil
}

// close closes the TUN device and deletes the namespace.
func (e *end) close() error {
	if e.tun >= 0 {
		_ = unix.Close(e.tun)
		e.tun = -1
	}
	return ipCmd("netns", "delete", e.ns)
}

// inNetns runs f on an OS thread inside namespace ns.
func inNetns(ns string, f func() error) error { return netns.Do(ns, f) }

// openTUN opens a TUN device named tunName (IP packets, no header) in ns.
func openTUN(ns string) (int, error) {
	fd := -1
	err := inNetns(ns, func() error {
		var err error
		fd, err = unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		var req [unix.IFNAMSIZ + 64]byte
		copy(req[:], tunName)
		*(*uint16)(unsafe.Pointer(&req[unix.IFNAMSIZ])) = unix.IFF_TUN | unix.IFF_NO_PI
		if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TUNSETIFF, uintptr(unsafe.Pointer(&req[0]))); errno != 0 {
			_ = unix.Close(fd)
			fd = -1
			return fmt.Errorf("TUNSETIFF %s: %w", tunName, errno)
		}
		return nil
	})
	return fd, err
}

// leftovers lists the namespaces that raet-netem runs made.
func leftovers() ([]string, error) {
	entries, err := os.ReadDir("/run/netns")
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), namePrefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
