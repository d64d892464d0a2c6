//go:build unix

package keep

import (
	"os"

	"golang.org/x/sys/unix"
)

// lockFile takes an exclusive advisory lock of f without waiting.
func lockFile(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			return err
		}
	}
}
