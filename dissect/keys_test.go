package dissect_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raet-go/raet/dissect"
)

// keyLogOf returns the key-log lines the stacks named wrote.
func keyLogOf(t *testing.T, scenario string, names ...string) string {
	data, err := os.ReadFile(testdata(scenario + ".keylog"))
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	section := ""
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "# ") {
			section = strings.TrimPrefix(l, "# ")
			continue
		}
		for _, n := range names {
			if n == section {
				out.WriteString(l + "\n")
			}
		}
	}
	return out.String()
}

// bodies dissects a capture and returns the JSON lines.
func bodies(t *testing.T, capture string, kr *dissect.KeyRing) []string {
	lines, _ := dissectFile(t, testdata(capture+".pcapng"), kr)
	return lines
}

func countContaining(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if strings.Contains(l, s) {
			n++
		}
	}
	return n
}

// With only the initiators' key-log lines and no keeps, the handshake's
// boxes open where the protocol allows (all but the vouch, which needs a
// long-term private key), and every coat opens; nothing is verified.
func TestInitiatorKeyLogOnly(t *testing.T) {
	kr := dissect.NewKeyRing()
	if err := kr.AddKeyLog(strings.NewReader(keyLogOf(t, "road", "other", "third"))); err != nil {
		t.Fatal(err)
	}
	if kr.Sessions() != 2 {
		t.Fatalf("%d sessions", kr.Sessions())
	}
	lines := bodies(t, "road", kr)
	if n := countContaining(lines, `"step":"hello"`); n != 2 || countContaining(lines, `"to":"main","box":"opened"`) != 2 {
		t.Errorf("hellos opened: %d of 2", countContaining(lines, `"to":"main","box":"opened"`))
	}
	if n := countContaining(lines, `"step":"cookie","box":"opened"`); n != 2 {
		t.Errorf("cookies opened: %d of 2", n)
	}
	if n := countContaining(lines, `"vouch":"not opened: needs a keep's long-term private key"`); n != 2 {
		t.Errorf("initiates opened without the vouch: %d of 2", n)
	}
	if n := countContaining(lines, `"verified":true`); n != 0 {
		t.Errorf("%d verified without a keep", n)
	}
	if n := countContaining(lines, `"subject":`); n != 3 {
		t.Errorf("%d message bodies read, want 3", n)
	}
	// The correspondent's lines alone open the initiate (with its short
	// key) and the coats, but not the hello and the cookie.
	kr = dissect.NewKeyRing()
	if err := kr.AddKeyLog(strings.NewReader(keyLogOf(t, "road", "main"))); err != nil {
		t.Fatal(err)
	}
	lines = bodies(t, "road", kr)
	if countContaining(lines, `"step":"initiate"`) != 2 || countContaining(lines, `"step":"initiate","short_pub"`) != 2 ||
		countContaining(lines, `"box":"opened","long_pub"`) != 2 {
		t.Errorf("initiates not opened with the correspondent's lines")
	}
	if n := countContaining(lines, `"box":"not opened`); n != 4 {
		t.Errorf("%d boxes not opened, want the 2 hellos and 2 cookies", n)
	}
	if n := countContaining(lines, `"subject":`); n != 3 {
		t.Errorf("%d message bodies read, want 3", n)
	}
}

// One keep verifies the packets of both directions between its estate
// and its remotes: the remote's key for what it received, its own for what
// it sent.
func TestOneKeepVerifiesBothWays(t *testing.T) {
	kr := dissect.NewKeyRing()
	if err := kr.AddKeep(filepath.Join(testdata("road.keeps"), "main")); err != nil {
		t.Fatal(err)
	}
	lines := bodies(t, "road", kr)
	signed := countContaining(lines, `"fk":1,`)
	if v := countContaining(lines, `"verified":true`); v != signed || signed == 0 {
		t.Fatalf("%d of %d signed packets verified", v, signed)
	}
	for _, signer := range []string{`"signer":"main"`, `"signer":"other"`, `"signer":"third"`} {
		if countContaining(lines, signer) == 0 {
			t.Errorf("nothing verified with %s", signer)
		}
	}
	// Another scenario's keep knows other keys under the same uids: the
	// feet fail, they are not "unknown".
	kr = dissect.NewKeyRing()
	if err := kr.AddKeep(filepath.Join(testdata("segmented.keeps"), "main")); err != nil {
		t.Fatal(err)
	}
	lines = bodies(t, "road", kr)
	if n := countContaining(lines, `"verified":false`); n == 0 {
		t.Fatal("wrong keys verified")
	}
}

// A keep is only read: a corrupt file is reported and left where it is,
// and nothing is created.
func TestKeepIsReadOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(testdata("road.keeps"), "main"))); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "role", "remote", "role.other.json")
	if err := os.WriteFile(bad, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := listTree(t, dir)
	kr := dissect.NewKeyRing()
	err := kr.AddKeep(dir)
	if err == nil || !strings.Contains(err.Error(), "role.other.json") {
		t.Fatalf("corrupt file not reported: %v", err)
	}
	if after := listTree(t, dir); after != before {
		t.Fatalf("the keep changed:\n%s\n%s", before, after)
	}
	if !kr.HasVerifyKeys() {
		t.Fatal("the good files were not used")
	}
	if err := dissect.NewKeyRing().AddKeep(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("a missing keep is no error")
	}
	if _, err := os.Stat(filepath.Join(dir, "nope")); err == nil {
		t.Fatal("AddKeep created a directory")
	}
}

func listTree(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			b.WriteString(p + "\n")
		}
		return nil
	})
	return b.String()
}
