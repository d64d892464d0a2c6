//go:build !unix

package keep

import "os"

// lockFile does nothing where there are no advisory file locks.
func lockFile(*os.File) error { return nil }
