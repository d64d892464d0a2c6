package keep

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

// uidEntries lists the uid index's entries: uid → the name each holds.
func uidEntries(t *testing.T, k *Keep) map[string]string {
	t.Helper()
	out := map[string]string{}
	dir := filepath.Join(k.Dir(), uidDir)
	for _, e := range must(os.ReadDir(dir))(t) {
		out[e.Name()] = string(must(os.ReadFile(filepath.Join(dir, e.Name())))(t))
	}
	return out
}

// The uid index finds each saved estate by its uid, and only while the
// estate file still has it: a name given another uid, a deleted estate and
// an unknown uid are as none (fs.ErrNotExist), an entry that is no name is
// corrupt; the reference's directories hold only its own files.
func TestLoadRemoteUID(t *testing.T) {
	k := openKeep(t, AutoNever)
	a := RemoteEstate{Name: "a", UID: 7, HA: HostPort{"127.0.0.1", 7531}, Role: "a", Joined: new(true)}
	b := RemoteEstate{Name: "x.y", UID: 8, HA: HostPort{"127.0.0.1", 7532}, Role: "b"}
	for _, e := range []RemoteEstate{a, b} {
		if err := k.SaveRemote(e); err != nil {
			t.Fatal(err)
		}
	}
	for _, e := range []RemoteEstate{a, b} {
		got, err := k.LoadRemoteUID(e.UID)
		if err != nil || got.Name != e.Name || got.UID != e.UID {
			t.Fatalf("uid %d: %+v, %v; want %s", e.UID, got, err, e.Name)
		}
	}
	if _, err := k.LoadRemoteUID(9); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an unknown uid: %v, want fs.ErrNotExist", err)
	}
	a2 := a
	a2.UID = 10 // the name joined again and was given another uid
	if err := k.SaveRemote(a2); err != nil {
		t.Fatal(err)
	}
	if got, err := k.LoadRemoteUID(7); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the old uid of a name given another: %+v, %v; want fs.ErrNotExist", got, err)
	}
	if got, err := k.LoadRemoteUID(10); err != nil || got.Name != "a" {
		t.Fatalf("the new uid: %+v, %v", got, err)
	}
	if err := k.DeleteRemote("x.y"); err != nil {
		t.Fatal(err)
	}
	if _, err := k.LoadRemoteUID(8); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a deleted estate's uid: %v, want fs.ErrNotExist", err)
	}
	if err := os.WriteFile(k.uidPath(11), []byte("a/b"), filePerm); err != nil {
		t.Fatal(err)
	}
	if _, err := k.LoadRemoteUID(11); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("an entry that is no name: %v, want ErrCorrupt", err)
	}
	// The reference lists remote/ and role/remote/ only, by prefix and
	// extension: the index adds nothing there.
	if names := must(os.ReadDir(filepath.Join(k.Dir(), remoteDir)))(t); len(names) != 1 || names[0].Name() != "estate.a.json" {
		t.Fatalf("remote/ holds %v", names)
	}
}

// ReindexUIDs mends the index from the estates loaded: an entry missing
// (an estate the reference wrote, or one a crash lost) is made, one naming
// another estate is mended, and those of uids no estate has go.
func TestReindexUIDs(t *testing.T) {
	k := openKeep(t, AutoNever)
	var es []RemoteEstate
	for i := range 5 {
		e := RemoteEstate{Name: fmt.Sprint("r", i), UID: uint32(100 + i), HA: HostPort{"127.0.0.1", 7531}, Role: "r"}
		if err := k.SaveRemote(e); err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	// r0's entry lost, r1's naming r2, one for no estate, and r4 written
	// as the reference writes it: its estate file only.
	must(0, os.Remove(k.uidPath(100)))(t)
	must(0, os.WriteFile(k.uidPath(101), []byte("r2"), filePerm))(t)
	must(0, os.WriteFile(k.uidPath(999), []byte("gone"), filePerm))(t)
	must(0, os.Remove(k.uidPath(104)))(t)
	must(0, os.WriteFile(filepath.Join(k.Dir(), uidDir, "not-a-uid"), []byte("r3"), filePerm))(t)
	loaded := must(k.LoadRemotes())(t)
	if err := k.ReindexUIDs(loaded); err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if got, err := k.LoadRemoteUID(e.UID); err != nil || got.Name != e.Name {
			t.Fatalf("uid %d after the reindex: %+v, %v; want %s", e.UID, got, err, e.Name)
		}
	}
	got := uidEntries(t, k)
	want := map[string]string{"100": "r0", "101": "r1", "102": "r2", "103": "r3", "104": "r4", "not-a-uid": "r3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the index after the reindex: %v, want %v", got, want)
	}
	ro := must(OpenReadOnly(k.Dir()))(t)
	if err := ro.ReindexUIDs(loaded); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("a read-only keep reindexed: %v", err)
	}
}

// A Writer makes the uid index entries of the estates it writes, the last
// of a uid's winning, before it reports them durable.
func TestWriterIndexesUIDs(t *testing.T) {
	defer goleak.VerifyNone(t)
	k := openKeep(t, AutoNever)
	var durable []uint64
	uidOf := func(seq uint64) uint32 { return uint32(min(seq, 3)) } // the uid of write seq
	w := k.StartWriter(&WriterConfig{OnDurable: func(seq uint64) {
		for s := uint64(1); s <= seq; s++ {
			if _, err := k.LoadRemoteUID(uidOf(s)); err != nil {
				t.Errorf("write %d reported durable (%d) before its uid %d was indexed: %v", s, seq, uidOf(s), err)
			}
		}
		durable = append(durable, seq)
	}})
	var last *Queued
	for i, name := range []string{"a", "b", "c", "c2"} {
		q, err := w.SaveRemote(RemoteEstate{Name: name, UID: uidOf(uint64(i + 1)), HA: HostPort{"127.0.0.1", 7531}, Role: name})
		if err != nil {
			t.Fatal(err)
		}
		last = q
	}
	if err := errors.Join(last.Wait(context.Background()), w.Close()); err != nil {
		t.Fatal(err)
	}
	if got, err := k.LoadRemoteUID(3); err != nil || got.Name != "c2" {
		t.Fatalf("uid 3: %+v, %v; want c2 (the later)", got, err)
	}
	if got := uidEntries(t, k); !slices.Equal(slices.Sorted(maps.Keys(got)), []string{"1", "2", "3"}) || got["3"] != "c2" {
		t.Fatalf("the index: %v", got)
	}
	if len(durable) == 0 {
		t.Fatal("nothing reported durable")
	}
}
