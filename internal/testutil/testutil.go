// Package testutil holds helpers shared by the tests of raet-go: a
// goroutine leak check and short temporary directories for Unix sockets.
package testutil

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// CheckLeaks makes t fail if goroutines started during the test are still
// running when it ends. Call it first in the test, before anything that
// registers a cleanup (so that it runs after the stacks are closed); do not
// use it in parallel tests. Goroutines running when it is called are
// ignored.
func CheckLeaks(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	opts = append([]goleak.Option{goleak.IgnoreCurrent()}, opts...)
	t.Cleanup(func() { goleak.VerifyNone(t, opts...) })
}

// ShortTempDir returns a new temporary directory with a short path
// (os.MkdirTemp("", prefix)), removed when the test ends. Unix socket
// paths are limited to about 104-108 bytes, and t.TempDir paths, which
// carry the test's name, can exceed that.
func ShortTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
