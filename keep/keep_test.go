package keep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/raet-go/raet/keys"
)

// Keys of the capture in raet-protocol.md §7.4.
const (
	mainSig   = "378f61b6b73cb051458624f9f970e4853ecc58308e69d719738ca3ed7db36ec1"
	mainPri   = "8985d11cb2e2fecb083005f376c829b18d8f76ef7e22354a639e5682876562c5"
	otherVer  = "516b4dd774b4eeabdc8b0b2a9e7392c6cc5a6573cc7f86715ebd62e2fa15a402"
	otherPub  = "05d61b6746820505ee55768ddb5e38bc4c80e052dc1b26b7ea9db6b2c26d5a26"
	mainVer   = "551238481fe3504ca9c287ae062e72a2cf3c82cbb4fa16e3b1a24f3db75ec62e"
	mainPubHx = "67ae79935472c98f2c086138e83a90043bed87f04c373ba9ef52b08b4096791c"
)

// must returns v, failing the test given to the returned function if err is
// not nil: must(os.ReadFile(p))(t).
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func openKeep(t testing.TB, auto AutoMode) *Keep {
	t.Helper()
	return must(Open(t.TempDir(), &Config{Auto: auto}))(t)
}

// The records the golden files in testdata/golden hold. The golden files were
// written by hand from the reference's RoadKeep.dumpLocal/dumpRemote/
// dumpLocalRole/dumpRemoteRole (field order) and Keep.dump (json.dump with
// indent=2), not by this package.
func goldenLocal() LocalEstate {
	return LocalEstate{Name: "main", UID: 1, HA: HostPort{"127.0.0.1", 7530}, FQDN: "localhost",
		SID: 0, PUID: 102, AHA: HostPort{"", 7530}, Role: "main"}
}

func goldenRemote() RemoteEstate {
	return RemoteEstate{Name: "other", UID: 102, FUID: 202, HA: HostPort{"127.0.0.1", 7531},
		FQDN: "localhost", SID: 2, Main: false, Kind: 0, Joined: new(true), Role: "other"}
}

func goldenRemoteUnusual() RemoteEstate {
	return RemoteEstate{Name: "café", UID: 0xffffffff, FUID: 0, HA: HostPort{"::1", 65535},
		IHA: &HostPort{"10.0.0.2", 0}, Natted: new(true), FQDN: "hôst\"/\\\t\x7f😀",
		Dyned: new(false), SID: 0xffffffff, Main: true, Kind: 255, Joined: nil, Role: "rôle"}
}

func goldenLocalRole(t testing.TB) LocalRole {
	return LocalRole{Role: "main", Seed: must(keys.ParseSigningSeed(mainSig))(t),
		Private: must(keys.ParsePrivateKey(mainPri))(t)}
}

func goldenRemoteRole(t testing.TB) RemoteRole {
	return RemoteRole{Role: "other", Acceptance: Accepted, Verify: must(keys.ParseVerifyKey(otherVer))(t),
		Public: must(keys.ParsePublicKey(otherPub))(t)}
}

func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	return must(os.ReadFile(filepath.Join("testdata", "golden", name)))(t)
}

// TestGoldenWrite writes each record through the Keep and compares the file
// byte for byte with the hand-made golden file.
func TestGoldenWrite(t *testing.T) {
	k := openKeep(t, AutoNever)
	if err := k.SaveLocal(goldenLocal()); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveRemote(goldenRemote()); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveRemote(goldenRemoteUnusual()); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveLocalRole(goldenLocalRole(t)); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveRemoteRole(goldenRemoteRole(t)); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"local/estate.json":           "local_estate.json",
		"remote/estate.other.json":    "remote_estate.json",
		"remote/estate.café.json":     "remote_estate_unusual.json",
		"role/local/role.json":        "local_role.json",
		"role/remote/role.other.json": "remote_role.json",
	}
	for rel, golden := range files {
		got := must(os.ReadFile(filepath.Join(k.Dir(), rel)))(t)
		want := readGolden(t, golden)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from golden %s:\n got: %q\nwant: %q", rel, golden, got, want)
		}
	}
}

// TestGoldenRead places the golden files where the reference would have
// written them and loads them field for field.
func TestGoldenRead(t *testing.T) {
	k := openKeep(t, AutoNever)
	place := map[string]string{
		"local_estate.json":          "local/estate.json",
		"remote_estate.json":         "remote/estate.other.json",
		"remote_estate_unusual.json": "remote/estate.café.json",
		"local_role.json":            "role/local/role.json",
		"remote_role.json":           "role/remote/role.other.json",
	}
	for golden, rel := range place {
		if err := os.WriteFile(filepath.Join(k.Dir(), rel), readGolden(t, golden), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := must(k.LoadLocal())(t); !reflect.DeepEqual(got, goldenLocal()) {
		t.Errorf("LoadLocal = %+v, want %+v", got, goldenLocal())
	}
	if got := must(k.LoadRemote("other"))(t); !reflect.DeepEqual(got, goldenRemote()) {
		t.Errorf("LoadRemote = %+v, want %+v", got, goldenRemote())
	}
	if got := must(k.LoadRemote("café"))(t); !reflect.DeepEqual(got, goldenRemoteUnusual()) {
		t.Errorf("LoadRemote(café) = %+v, want %+v", got, goldenRemoteUnusual())
	}
	if got := must(k.LoadLocalRole())(t); !reflect.DeepEqual(got, goldenLocalRole(t)) {
		t.Errorf("LoadLocalRole differs")
	}
	if got := must(k.LoadRemoteRole("other"))(t); !reflect.DeepEqual(got, goldenRemoteRole(t)) {
		t.Errorf("LoadRemoteRole = %+v", got)
	}
	remotes, err := k.LoadRemotes()
	if err != nil || len(remotes) != 2 || remotes[0].Name != "café" || remotes[1].Name != "other" {
		t.Errorf("LoadRemotes = %+v, %v", remotes, err)
	}
}

// fieldOrder returns the keys of the top-level object in file order, checking
// with encoding/json alone (not this package's reader).
func fieldOrder(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %v %v", tok, err)
	}
	var out []string
	for dec.More() {
		tok := must(dec.Token())(t)
		out = append(out, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestFieldSets checks what we write against the field lists of
// raet-protocol.md §10.1, written out here independently of the package.
func TestFieldSets(t *testing.T) {
	k := openKeep(t, AutoNever)
	le, re := goldenLocal(), goldenRemote()
	le.IHA = &HostPort{"192.168.1.2", 7532}
	re.Natted = new(false)
	for _, err := range []error{k.SaveLocal(le), k.SaveRemote(re), k.SaveLocalRole(goldenLocalRole(t)), k.SaveRemoteRole(goldenRemoteRole(t))} {
		if err != nil {
			t.Fatal(err)
		}
	}
	spec := map[string][]string{
		"local/estate.json":           {"name", "uid", "ha", "iha", "natted", "fqdn", "dyned", "sid", "puid", "aha", "role"},
		"remote/estate.other.json":    {"name", "uid", "fuid", "ha", "iha", "natted", "fqdn", "dyned", "sid", "main", "kind", "joined", "role"},
		"role/local/role.json":        {"role", "sighex", "prihex"},
		"role/remote/role.other.json": {"role", "acceptance", "verhex", "pubhex"},
	}
	for rel, want := range spec {
		data := must(os.ReadFile(filepath.Join(k.Dir(), rel)))(t)
		if got := fieldOrder(t, data); !slices.Equal(got, want) {
			t.Errorf("%s fields = %v, want %v", rel, got, want)
		}
		if bytes.HasSuffix(data, []byte("\n")) || !bytes.HasPrefix(data, []byte("{\n  \"")) {
			t.Errorf("%s: layout is not json.dump indent=2: %q", rel, data)
		}
	}
	// ha and iha are two-element lists [host, port]; null stays null.
	var m map[string]any
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(k.Dir(), "local/estate.json")))(t), &m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m["iha"], []any{"192.168.1.2", 7532.0}) || !reflect.DeepEqual(m["aha"], []any{"", 7530.0}) || m["natted"] != nil {
		t.Errorf("local estate values: %v", m)
	}
	if err := json.Unmarshal(must(os.ReadFile(filepath.Join(k.Dir(), "remote/estate.other.json")))(t), &m); err != nil {
		t.Fatal(err)
	}
	if m["natted"] != false || m["iha"] != nil || m["joined"] != true || m["kind"] != 0.0 || m["main"] != false {
		t.Errorf("remote estate values: %v", m)
	}
}

func randHost(r *rand.Rand) string {
	pool := []string{"", "127.0.0.1", "::1", "example.com", "hôst", "a\"b\\c", "\x01\t\n", "😀", "/x"}
	return pool[r.IntN(len(pool))]
}

func randBool(r *rand.Rand) *bool {
	switch r.IntN(3) {
	case 0:
		return nil
	case 1:
		return new(true)
	}
	return new(false)
}

func randHA(r *rand.Rand) *HostPort {
	if r.IntN(2) == 0 {
		return nil
	}
	return &HostPort{randHost(r), uint16(r.Uint32())}
}

func randName(r *rand.Rand) string {
	pool := []string{"a", "main", "other", "x.y", "ünï", "estate_0123456789abcdef", strings.Repeat("n", MaxNameLen)}
	return pool[r.IntN(len(pool))]
}

// TestRoundTripRandom saves random records and loads them back unchanged.
func TestRoundTripRandom(t *testing.T) {
	k := openKeep(t, AutoNever)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		le := LocalEstate{Name: randName(r), UID: r.Uint32(), HA: HostPort{randHost(r), uint16(r.Uint32())},
			IHA: randHA(r), Natted: randBool(r), FQDN: randHost(r), Dyned: randBool(r), SID: r.Uint32(),
			PUID: r.Uint32(), AHA: HostPort{randHost(r), uint16(r.Uint32())}, Role: randName(r)}
		if err := k.SaveLocal(le); err != nil {
			t.Fatal(err)
		}
		if got := must(k.LoadLocal())(t); !reflect.DeepEqual(got, le) {
			t.Fatalf("local: got %+v want %+v", got, le)
		}
		re := RemoteEstate{Name: randName(r), UID: r.Uint32(), FUID: r.Uint32(), HA: HostPort{randHost(r), uint16(r.Uint32())},
			IHA: randHA(r), Natted: randBool(r), FQDN: randHost(r), Dyned: randBool(r), SID: r.Uint32(),
			Main: r.IntN(2) == 0, Kind: uint8(r.Uint32()), Joined: randBool(r), Role: randName(r)}
		if err := k.SaveRemote(re); err != nil {
			t.Fatal(err)
		}
		if got := must(k.LoadRemote(re.Name))(t); !reflect.DeepEqual(got, re) {
			t.Fatalf("remote: got %+v want %+v", got, re)
		}
		sg := keys.GenerateSigning()
		bx := must(keys.GenerateBox())(t)
		lr := LocalRole{Role: randName(r), Seed: sg.Seed, Private: bx.Private}
		if err := k.SaveLocalRole(lr); err != nil {
			t.Fatal(err)
		}
		if got := must(k.LoadLocalRole())(t); got != lr {
			t.Fatalf("local role differs")
		}
		rr := RemoteRole{Role: randName(r), Acceptance: Acceptance(r.IntN(3)), Verify: sg.Verify, Public: bx.Public}
		if err := k.SaveRemoteRole(rr); err != nil {
			t.Fatal(err)
		}
		if got := must(k.LoadRemoteRole(rr.Role))(t); got != rr {
			t.Fatalf("remote role: got %+v want %+v", got, rr)
		}
	}
}

// TestUppercaseHexLoads: hex in either case loads; we write it back lowercase.
func TestUppercaseHexLoads(t *testing.T) {
	k := openKeep(t, AutoNever)
	up := bytes.ToUpper(readGolden(t, "remote_role.json"))
	up = bytes.ReplaceAll(up, []byte(`"ROLE"`), []byte(`"role"`))
	up = bytes.ReplaceAll(up, []byte(`"OTHER"`), []byte(`"other"`))
	up = bytes.ReplaceAll(up, []byte(`"ACCEPTANCE"`), []byte(`"acceptance"`))
	up = bytes.ReplaceAll(up, []byte(`"VERHEX"`), []byte(`"verhex"`))
	up = bytes.ReplaceAll(up, []byte(`"PUBHEX"`), []byte(`"pubhex"`))
	path := must(k.RemoteRolePath("other"))(t)
	if err := os.WriteFile(path, up, 0o600); err != nil {
		t.Fatal(err)
	}
	got := must(k.LoadRemoteRole("other"))(t)
	if got != goldenRemoteRole(t) {
		t.Fatalf("got %+v", got)
	}
	if err := k.SaveRemoteRole(got); err != nil {
		t.Fatal(err)
	}
	if data := must(os.ReadFile(path))(t); !bytes.Equal(data, readGolden(t, "remote_role.json")) {
		t.Errorf("rewritten = %q", data)
	}
}

func TestInvalidNames(t *testing.T) {
	k := openKeep(t, AutoNever)
	bad := []string{"", ".", "..", "a b", "a/b", "a\\b", "/abs", "nul\x00", "tab\t", "nl\n", "del\x7f", "\xff", strings.Repeat("n", MaxNameLen+1), " ", "ok "}
	sg := keys.GenerateSigning()
	bx := must(keys.GenerateBox())(t)
	for _, name := range bad {
		checks := map[string]error{
			"SaveRemote":       k.SaveRemote(RemoteEstate{Name: name, Role: "ok"}),
			"SaveRemote role":  k.SaveRemote(RemoteEstate{Name: "ok", Role: name}),
			"SaveRemoteRole":   k.SaveRemoteRole(RemoteRole{Role: name, Verify: sg.Verify, Public: bx.Public}),
			"SaveLocal":        k.SaveLocal(LocalEstate{Name: name, Role: "ok"}),
			"SaveLocal role":   k.SaveLocal(LocalEstate{Name: "ok", Role: name}),
			"SaveLocalRole":    k.SaveLocalRole(LocalRole{Role: name, Seed: sg.Seed, Private: bx.Private}),
			"DeleteRemote":     k.DeleteRemote(name),
			"DeleteRemoteRole": k.DeleteRemoteRole(name),
			"Accept":           k.Accept(name),
		}
		_, checks["LoadRemote"] = k.LoadRemote(name)
		_, checks["LoadRemoteRole"] = k.LoadRemoteRole(name)
		_, checks["StatusRole"] = k.StatusRole(name, sg.Verify, bx.Public)
		for what, err := range checks {
			if !errors.Is(err, ErrInvalidName) || !errors.Is(err, ErrInvalid) {
				t.Errorf("%s(%q) = %v, want ErrInvalidName", what, name, err)
			}
		}
	}
	// Nothing at all was written anywhere.
	err := filepath.WalkDir(k.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Errorf("file written: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, good := range []string{"a", "x.y", "café", "estate_1b2c", "-", strings.Repeat("n", MaxNameLen)} {
		if err := CheckName(good); err != nil {
			t.Errorf("CheckName(%q) = %v", good, err)
		}
	}
}

func TestInvalidRecords(t *testing.T) {
	k := openKeep(t, AutoNever)
	sg := keys.GenerateSigning()
	bx := must(keys.GenerateBox())(t)
	errs := map[string]error{
		"zero seed":      k.SaveLocalRole(LocalRole{Role: "r", Private: bx.Private}),
		"zero private":   k.SaveLocalRole(LocalRole{Role: "r", Seed: sg.Seed}),
		"zero verify":    k.SaveRemoteRole(RemoteRole{Role: "r", Public: bx.Public}),
		"zero public":    k.SaveRemoteRole(RemoteRole{Role: "r", Verify: sg.Verify}),
		"bad acceptance": k.SaveRemoteRole(RemoteRole{Role: "r", Acceptance: 3, Verify: sg.Verify, Public: bx.Public}),
		"bad utf8 fqdn":  k.SaveLocal(LocalEstate{Name: "n", Role: "r", FQDN: "\xff"}),
		"bad utf8 host":  k.SaveRemote(RemoteEstate{Name: "n", Role: "r", IHA: &HostPort{Host: "\xc3"}}),
	}
	for what, err := range errs {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", what, err)
		}
	}
	if _, err := Open(t.TempDir(), &Config{Auto: 3}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open with auto 3: %v", err)
	}
	if _, err := Open("", nil); !errors.Is(err, ErrInvalid) {
		t.Errorf("Open(\"\"): %v", err)
	}
}

func TestMissingAndDelete(t *testing.T) {
	k := openKeep(t, AutoNever)
	_, err1 := k.LoadLocal()
	_, err2 := k.LoadLocalRole()
	_, err3 := k.LoadRemote("x")
	_, err4 := k.LoadRemoteRole("x")
	for i, err := range []error{err1, err2, err3, err4} {
		var fe *FileError
		if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &fe) || fe.Op != "load" || errors.Is(err, ErrCorrupt) {
			t.Errorf("missing %d: %v", i, err)
		}
	}
	if err := k.SaveRemote(goldenRemote()); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveLocal(goldenLocal()); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{k.DeleteRemote("other"), k.DeleteLocal(), k.DeleteLocalRole(), k.DeleteRemoteRole("other"), k.DeleteRemote("other")} {
		if err != nil {
			t.Errorf("delete: %v", err)
		}
	}
	if _, err := k.LoadRemote("other"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after delete: %v", err)
	}
	if _, err := k.LoadLocal(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("after delete: %v", err)
	}
}

func TestListing(t *testing.T) {
	k := openKeep(t, AutoNever)
	for _, n := range []string{"zeta", "alpha", "a.b", "a"} {
		re := goldenRemote()
		re.Name, re.Role = n, n
		if err := k.SaveRemote(re); err != nil {
			t.Fatal(err)
		}
		rr := goldenRemoteRole(t)
		rr.Role = n
		if err := k.SaveRemoteRole(rr); err != nil {
			t.Fatal(err)
		}
	}
	// Files that are not keep records of ours: skipped.
	junk := []string{
		"remote/estate.x.msgpack", "remote/estate.x.json.corrupt.1", "remote/.raet-keep-123.tmp",
		"remote/estate..json", "remote/estate.json", "remote/lot.x.json", "remote/estate.a b.json",
		"role/remote/role.y.json.corrupt.2", "role/remote/other.z.json", "role/remote/role..json",
	}
	for _, j := range junk {
		if err := os.WriteFile(filepath.Join(k.Dir(), j), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(k.Dir(), "remote", "estate.dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "a.b", "alpha", "zeta"}
	if got := must(k.RemoteNames())(t); !slices.Equal(got, want) {
		t.Errorf("RemoteNames = %q, want %q", got, want)
	}
	if got := must(k.RoleNames())(t); !slices.Equal(got, want) {
		t.Errorf("RoleNames = %q, want %q", got, want)
	}
	remotes := must(k.LoadRemotes())(t)
	roles := must(k.LoadRemoteRoles())(t)
	if len(remotes) != 4 || len(roles) != 4 {
		t.Fatalf("loaded %d remotes, %d roles", len(remotes), len(roles))
	}
	for i, n := range want {
		if remotes[i].Name != n || roles[i].Role != n {
			t.Errorf("item %d: %q %q, want %q", i, remotes[i].Name, roles[i].Role, n)
		}
	}
}

func TestPermissions(t *testing.T) {
	base := t.TempDir()
	k := must(Open(filepath.Join(base, "new", "keep"), nil))(t)
	for _, d := range k.dirs() {
		st := must(os.Stat(d))(t)
		if perm := st.Mode().Perm(); perm != 0o700 {
			t.Errorf("dir %s mode %o, want 0700", d, perm)
		}
	}
	// A file the reference wrote world-readable becomes 0600 when we rewrite it.
	rolePath := k.LocalRolePath()
	if err := os.WriteFile(rolePath, readGolden(t, "local_role.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rolePath, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveLocalRole(goldenLocalRole(t)); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveLocal(goldenLocal()); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveRemote(goldenRemote()); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveRemoteRole(goldenRemoteRole(t)); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(k.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if perm := st.Mode().Perm(); perm != 0o600 {
			t.Errorf("file %s mode %o, want 0600", p, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInterruptedWrite stops a write between the temporary file and the
// rename, as a crash there would: the old file is whole and still loads, the
// new content is never seen, and no temporary file is left or listed.
func TestInterruptedWrite(t *testing.T) {
	k := openKeep(t, AutoNever)
	old := goldenRemote()
	if err := k.SaveRemote(old); err != nil {
		t.Fatal(err)
	}
	target := must(k.RemoteEstatePath("other"))(t)
	oldBytes := must(os.ReadFile(target))(t)

	crash := errors.New("simulated crash")
	var sawTemp string
	k.afterTempWrite = func(tmp, dst string) error {
		sawTemp = tmp
		if dst != target {
			t.Errorf("hook target %s, want %s", dst, target)
		}
		if filepath.Dir(tmp) != filepath.Dir(target) || !isTemp(filepath.Base(tmp)) {
			t.Errorf("temp file %s not a temp beside the target", tmp)
		}
		// At this point the temp file holds the complete new content and the
		// target still holds the complete old content.
		if got := must(os.ReadFile(dst))(t); !bytes.Equal(got, oldBytes) {
			t.Errorf("target changed before rename")
		}
		var e RemoteEstate
		if err := e.UnmarshalJSON(must(os.ReadFile(tmp))(t)); err != nil || e.SID != 99 {
			t.Errorf("temp content: %+v %v", e, err)
		}
		return crash
	}
	next := old
	next.SID = 99
	err := k.SaveRemote(next)
	var fe *FileError
	if !errors.Is(err, crash) || !errors.As(err, &fe) || fe.Op != "save" || fe.Path != target {
		t.Fatalf("SaveRemote = %v", err)
	}
	if sawTemp == "" {
		t.Fatal("hook did not run")
	}
	if _, err := os.Stat(sawTemp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temp file left after failed write: %v", err)
	}
	k.afterTempWrite = nil
	if got := must(k.LoadRemote("other"))(t); !reflect.DeepEqual(got, old) {
		t.Errorf("after failed write got %+v, want old %+v", got, old)
	}

	// A crash that killed the process leaves temp files, possibly half
	// written. They are never loaded or listed, and the next Open removes them.
	leftovers := []string{
		filepath.Join(k.Dir(), "remote", tempPrefix+"111"+tempSuffix),
		filepath.Join(k.Dir(), "role", "remote", tempPrefix+"222"+tempSuffix),
		filepath.Join(k.Dir(), "local", tempPrefix+"333"+tempSuffix),
		filepath.Join(k.Dir(), "role", "local", tempPrefix+"444"+tempSuffix),
	}
	half := oldBytes[:len(oldBytes)/2]
	for _, p := range leftovers {
		if err := os.WriteFile(p, half, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if names := must(k.RemoteNames())(t); !slices.Equal(names, []string{"other"}) {
		t.Errorf("RemoteNames with leftovers = %q", names)
	}
	if roles := must(k.RoleNames())(t); len(roles) != 0 {
		t.Errorf("RoleNames with leftovers = %q", roles)
	}
	if got := must(k.LoadRemote("other"))(t); !reflect.DeepEqual(got, old) {
		t.Errorf("load with leftovers = %+v", got)
	}
	unrelated := filepath.Join(k.Dir(), "remote", "notes.txt")
	if err := os.WriteFile(unrelated, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	k2 := must(Open(k.Dir(), nil))(t)
	for _, p := range leftovers {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("leftover %s not removed by Open: %v", p, err)
		}
	}
	if _, err := os.Stat(unrelated); err != nil {
		t.Errorf("Open removed an unrelated file: %v", err)
	}
	if got := must(k2.LoadRemote("other"))(t); !reflect.DeepEqual(got, old) {
		t.Errorf("reopened load = %+v", got)
	}
}

// TestRenameFailureKeepsNothing: when the rename itself fails (the target is
// a non-empty directory), the save reports it and leaves no temporary file.
func TestRenameFailureKeepsNothing(t *testing.T) {
	k := openKeep(t, AutoNever)
	target := k.LocalEstatePath()
	if err := os.MkdirAll(filepath.Join(target, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	var fe *FileError
	if err := k.SaveLocal(goldenLocal()); !errors.As(err, &fe) || fe.Op != "save" || fe.Path != target {
		t.Fatalf("SaveLocal over a directory = %v", err)
	}
	for _, e := range must(os.ReadDir(filepath.Dir(target)))(t) {
		if isTemp(e.Name()) {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
	if st, err := os.Stat(target); err != nil || !st.IsDir() {
		t.Errorf("target directory disturbed: %v", err)
	}
}

func TestConcurrent(t *testing.T) {
	k := openKeep(t, AutoOnce)
	sg := keys.GenerateSigning()
	bx := must(keys.GenerateBox())(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				re := goldenRemote()
				re.Name = fmt.Sprintf("r%d", g)
				re.SID = uint32(i)
				if err := k.SaveRemote(re); err != nil {
					t.Error(err)
					return
				}
				if _, err := k.LoadRemotes(); err != nil {
					t.Error(err)
					return
				}
				st, err := k.StatusRole("shared", sg.Verify, bx.Public)
				if err != nil || st != Accepted {
					t.Errorf("StatusRole = %v, %v", st, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if names := must(k.RemoteNames())(t); len(names) != 8 {
		t.Errorf("names = %q", names)
	}
	ents := must(os.ReadDir(filepath.Join(k.Dir(), "remote")))(t)
	for _, e := range ents {
		if isTemp(e.Name()) {
			t.Errorf("temp left: %s", e.Name())
		}
	}
}

// The reader must not read an oversized file whole.
func TestOversized(t *testing.T) {
	k := openKeep(t, AutoNever)
	f := must(os.Create(k.LocalEstatePath()))(t)
	if _, err := io.CopyN(f, zeroReader{}, 10<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err := k.LoadLocal()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("oversized: %v", err)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

func TestStringers(t *testing.T) {
	cases := map[fmt.Stringer]string{
		Pending: "pending", Accepted: "accepted", Rejected: "rejected", Acceptance(9): "Acceptance(9)",
		AutoNever: "never", AutoOnce: "once", AutoAlways: "always", AutoMode(7): "AutoMode(7)",
		HostPort{"::1", 7530}: "[::1]:7530", HostPort{"", 7530}: ":7530",
	}
	for v, want := range cases {
		if got := v.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", v, got, want)
		}
	}
	for in, want := range map[string]AutoMode{"never": AutoNever, "Once": AutoOnce, "ALWAYS": AutoAlways, "0": AutoNever, "2": AutoAlways} {
		if got, err := ParseAutoMode(in); err != nil || got != want {
			t.Errorf("ParseAutoMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseAutoMode("sometimes"); err == nil {
		t.Error("ParseAutoMode accepted junk")
	}
}
