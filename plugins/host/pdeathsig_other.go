//go:build !linux

package host

import "syscall"

// sysProcAttr: there is no Pdeathsig outside Linux; sdk.Serve's watch of
// its parent ends an orphaned plugin instead.
func sysProcAttr() *syscall.SysProcAttr { return nil }
