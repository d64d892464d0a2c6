package proto_test

import (
	"os"
	"os/exec"
	"testing"
)

// TestGenerated fails when the checked-in .pb.go files differ from what
// gen.sh makes of raetplugin.proto with the pinned generators. Without
// protoc it skips, except in CI (CI set), where it fails.
func TestGenerated(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("protoc not found; CI must install protobuf-compiler")
		}
		t.Skip("protoc not found (apt-get install protobuf-compiler)")
	}
	out, err := exec.Command("./gen.sh", "-check").CombinedOutput()
	if err != nil {
		t.Fatalf("generated files are stale: %v\n%s", err, out)
	}
}
