// Package netns runs code inside a named network namespace (one made by
// ip netns add, under /run/netns): cmd/raet-netem opens its TUN devices
// and probes there, and bench/peers its servers.
package netns

import (
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// Do runs f on an OS thread that has entered the network namespace name.
// Sockets and devices f opens stay in that namespace after the thread
// leaves it; goroutines f starts do not run in it.
func Do(name string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread stays locked (and so ends with the goroutine) if it
		// cannot go back to its own namespace.
		origin, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netns: own namespace: %w", err)
			return
		}
		defer unix.Close(origin)
		target, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("netns: namespace %s: %w", name, err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: enter %s: %w", name, err)
			return
		}
		ferr := f()
		if err := unix.Setns(origin, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("netns: leave %s: %w", name, err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
