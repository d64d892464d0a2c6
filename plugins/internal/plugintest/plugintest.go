// Package plugintest helps the plugin tests: it connects an implementation
// through go-plugin's in-process gRPC test connection, finds the
// repository root, and builds plugin binaries for subprocess tests.
package plugintest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-plugin"
)

// GRPC serves p in-process over go-plugin's gRPC test connection
// (plugin.TestPluginGRPCConn) and returns the host side of kind.
func GRPC[T any](t testing.TB, kind string, p plugin.Plugin) T {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{kind: p})
	// Closing the client shuts the server down (go-plugin's controller);
	// stopping it here as well would race with that.
	t.Cleanup(func() { client.Close() })
	raw, err := client.Dispense(kind)
	if err != nil {
		t.Fatal(err)
	}
	impl, ok := raw.(T)
	if !ok {
		t.Fatalf("dispensed %T", raw)
	}
	return impl
}

// RepoRoot returns the directory of the repository's go.mod, found upward
// from the working directory (a test's package directory), wherever the
// clone is.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 64 {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/raet-go/raet\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", errors.New("plugintest: the raet-go go.mod is not above the working directory")
}

// Mains maps the binaries of the example and test plugins to their
// packages.
var Mains = map[string]string{
	"raet-serializer-zstdjson": "./plugins/serializer/zstdjson/cmd/raet-serializer-zstdjson",
	"raet-coat-xchacha":        "./plugins/coat/xchacha/cmd/raet-coat-xchacha",
	"raet-queue-bolt":          "./plugins/queue/boltqueue/cmd/raet-queue-bolt",
	"raet-test-faulty":         "./plugins/internal/testplugins/raet-test-faulty",
}

// Build builds the named binaries of Mains into dir with one go build.
func Build(dir string, names ...string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	args := []string{"build", "-o", dir + string(os.PathSeparator)}
	for _, n := range names {
		pkg, ok := Mains[n]
		if !ok {
			return fmt.Errorf("plugintest: no plugin %q", n)
		}
		args = append(args, pkg)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}
