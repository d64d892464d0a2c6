package keep

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// snapshot lists every file and directory under dir with its contents.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		line := p
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += "=" + string(b)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// A keep opened read-only loads what Open loads, and writes nothing: no
// directory made, no temporary file removed, no corrupt file moved aside,
// every write refused with ErrReadOnly.
func TestOpenReadOnly(t *testing.T) {
	k := openKeep(t, AutoNever)
	if err := k.SaveLocal(goldenLocal()); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveRemote(goldenRemote()); err != nil {
		t.Fatal(err)
	}
	if err := k.SaveRemoteRole(goldenRemoteRole(t)); err != nil {
		t.Fatal(err)
	}
	dir := k.Dir()
	corrupt := filepath.Join(dir, "role", "remote", "role.bad.json")
	tmp := filepath.Join(dir, "remote", ".raet-keep-1.tmp")
	for _, p := range []string{corrupt, tmp} {
		if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "role", "local")); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	rr := goldenRemoteRole(t)

	ro, err := OpenReadOnly(dir)
	if err != nil || !ro.ReadOnly() || k.ReadOnly() {
		t.Fatalf("OpenReadOnly: %v", err)
	}
	if got, err := ro.LoadLocal(); err != nil || !reflect.DeepEqual(got, goldenLocal()) {
		t.Fatalf("LoadLocal = %+v, %v", got, err)
	}
	if got, err := ro.LoadRemotes(); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], goldenRemote()) {
		t.Fatalf("LoadRemotes = %+v, %v", got, err)
	}
	if _, err := ro.LoadLocalRole(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LoadLocalRole of a missing directory: %v", err)
	}
	roles, err := ro.LoadRemoteRoles()
	var fe *FileError
	if len(roles) != 1 || !errors.Is(err, ErrCorrupt) || !errors.As(err, &fe) || fe.Aside != "" || fe.Path != corrupt {
		t.Fatalf("LoadRemoteRoles = %v, %v", roles, err)
	}
	for name, err := range map[string]error{
		"SaveLocal":    ro.SaveLocal(goldenLocal()),
		"SaveRemote":   ro.SaveRemote(goldenRemote()),
		"DeleteLocal":  ro.DeleteLocal(),
		"DeleteRemote": ro.DeleteRemote("other"),
		"Reject":       ro.Reject(goldenRemoteRole(t).Role),
		"StatusRole":   func() error { _, err := ro.StatusRole("new", rr.Verify, rr.Public); return err }(),
	} {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: %v, want ErrReadOnly", name, err)
		}
	}
	if after := snapshot(t, dir); after != before {
		t.Fatalf("the keep changed:\n%s\n---\n%s", before, after)
	}
	// A missing directory is an error, and is not created.
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := OpenReadOnly(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("OpenReadOnly of a missing directory: %v", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("OpenReadOnly created the directory")
	}
	// An empty keep lists nothing, with no error.
	empty, err := OpenReadOnly(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if names, err := empty.RemoteNames(); err != nil || len(names) != 0 {
		t.Fatalf("RemoteNames of an empty keep: %v %v", names, err)
	}
}
