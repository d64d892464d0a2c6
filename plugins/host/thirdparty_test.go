package host_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/plugins/host"
	"github.com/raet-go/raet/plugins/internal/plugintest"
	"github.com/raet-go/raet/plugins/sdk/sdktest"
)

// thirdPartyMain is a plugin as an outside author writes it: its own
// module, importing only the SDK.
const thirdPartyMain = `// Command raet-serializer-reverse is a toy serializer plugin: body kind
// 201, the JSON text reversed.
package main

import (
	"context"
	"fmt"
	"slices"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/sdk"
)

type reverse struct{}

func (reverse) Info(context.Context) (sdk.SerializerInfo, error) {
	return sdk.SerializerInfo{Kind: 201, Name: "reverse", Interchange: codec.BodyKindJSON, Version: "0.1.0"}, nil
}

func (reverse) Encode(_ context.Context, bodies [][]byte) ([]sdk.Result, error) {
	out := make([]sdk.Result, len(bodies))
	for i, b := range bodies {
		out[i].Data = slices.Clone(b)
		slices.Reverse(out[i].Data)
	}
	return out, nil
}

func (reverse) Decode(_ context.Context, bodies [][]byte) ([]sdk.Result, error) {
	out := make([]sdk.Result, len(bodies))
	for i, b := range bodies {
		if len(b) > 0 && b[len(b)-1] != '{' {
			out[i].Err = fmt.Errorf("%w: not a reversed JSON object", sdk.ErrMalformed)
			continue
		}
		out[i].Data = slices.Clone(b)
		slices.Reverse(out[i].Data)
	}
	return out, nil
}

func main() { sdk.Serve(reverse{}, sdk.WithLogger(sdk.Logger("reverse"))) }
`

// A plugin built from a module outside the repository, importing only
// plugins/sdk (and codec for its kind), the way a third party builds one,
// loads and passes the contract tests. The module points at this clone
// with a replace directive computed here, so the test works from any path.
func TestThirdPartyPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	root, err := plugintest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	goMod := "module example.com/raet-reverse\n\ngo 1.26.0\n\nrequire github.com/raet-go/raet v0.0.0\n\n" +
		"replace github.com/raet-go/raet => " + strconv.Quote(root) + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(goMod), "go.sum": sum, "main.go": []byte(thirdPartyMain)} {
		if err := os.WriteFile(filepath.Join(mod, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mod", "tidy")
	pluginDir := t.TempDir()
	run("build", "-o", filepath.Join(pluginDir, "raet-serializer-reverse"), ".")
	imports := run("list", "-f", `{{join .Imports "\n"}}`, ".")
	for _, imp := range strings.Fields(imports) {
		if strings.HasPrefix(imp, "github.com/raet-go/raet/") && imp != "github.com/raet-go/raet/plugins/sdk" && imp != "github.com/raet-go/raet/codec" {
			t.Fatalf("the plugin imports %s", imp)
		}
	}

	// Installed the documented way: dropped into the plugin directory.
	h, _ := newHost(t, host.Config{Dir: pluginDir})
	ctx := ctxT(t, time.Minute)
	s, err := h.SerializerPlugin(ctx, "reverse")
	if err != nil {
		t.Fatal(err)
	}
	sdktest.Serializer(t, s)
	ps, err := h.Serializer(ctx, "reverse")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ps.Marshal(nil, map[string]any{"a": "b"})
	if err != nil || string(b) != `}"b":"a"{` {
		t.Fatalf("%q %v", b, err)
	}
}
