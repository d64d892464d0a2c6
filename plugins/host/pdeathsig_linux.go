package host

import "syscall"

// sysProcAttr makes the kernel SIGKILL a plugin when the thread that
// started it exits; Go's threads live as long as the process (none of
// ours is locked with runtime.LockOSThread), so in effect when the host
// dies, SIGKILL included. Setpgid keeps a terminal's Ctrl-C from reaching
// the plugins before the host has stopped them.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
