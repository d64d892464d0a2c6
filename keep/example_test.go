package keep_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/keys"
)

func tempDir() string {
	dir, err := os.MkdirTemp("", "keep-example-")
	if err != nil {
		panic(err)
	}
	return dir
}

// A stack saves its local estate and secret keys, and loads them on restart.
func Example() {
	dir := tempDir()
	defer os.RemoveAll(dir)

	k, err := keep.Open(filepath.Join(dir, "main"), nil) // auto mode never
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := k.LoadLocal(); errors.Is(err, fs.ErrNotExist) {
		fmt.Println("first start: no local estate")
	}
	seed, _ := keys.ParseSigningSeed("378f61b6b73cb051458624f9f970e4853ecc58308e69d719738ca3ed7db36ec1")
	pri, _ := keys.ParsePrivateKey("8985d11cb2e2fecb083005f376c829b18d8f76ef7e22354a639e5682876562c5")
	err = errors.Join(
		k.SaveLocal(keep.LocalEstate{
			Name: "main", UID: 1, HA: keep.HostPort{Host: "127.0.0.1", Port: 7530},
			FQDN: "localhost", PUID: 1, AHA: keep.HostPort{Host: "", Port: 7530}, Role: "main",
		}),
		k.SaveLocalRole(keep.LocalRole{Role: "main", Seed: seed, Private: pri}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}

	local, _ := k.LoadLocal()
	role, _ := k.LoadLocalRole()
	fmt.Println(local.Name, local.HA, local.IHA == nil, role.Seed.VerifyKey().Hex()[:16])
	data, _ := os.ReadFile(k.LocalRolePath())
	fmt.Printf("%s\n", data)
	// Output:
	// first start: no local estate
	// main 127.0.0.1:7530 true 551238481fe3504c
	// {
	//   "role": "main",
	//   "sighex": "378f61b6b73cb051458624f9f970e4853ecc58308e69d719738ca3ed7db36ec1",
	//   "prihex": "8985d11cb2e2fecb083005f376c829b18d8f76ef7e22354a639e5682876562c5"
	// }
}

// Under auto mode never, a new role waits as pending until an operator
// accepts it; different keys offered later for the role are rejected and the
// accepted keys stay.
func ExampleKeep_StatusRole() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	k, _ := keep.Open(dir, &keep.Config{Auto: keep.AutoNever})

	peer := keys.GenerateSigning()
	peerBox, _ := keys.GenerateBox()
	status, _ := k.StatusRole("other", peer.Verify, peerBox.Public)
	fmt.Println("first join:", status)

	_ = k.Accept("other") // the operator's decision
	status, _ = k.StatusRole("other", peer.Verify, peerBox.Public)
	fmt.Println("after accept:", status)

	impostor := keys.GenerateSigning()
	status, _ = k.StatusRole("other", impostor.Verify, peerBox.Public)
	stored, _ := k.LoadRemoteRole("other")
	fmt.Println("other keys:", status, "- stored still", stored.Acceptance, stored.Verify.Equal(peer.Verify))
	// Output:
	// first join: pending
	// after accept: accepted
	// other keys: rejected - stored still accepted true
}

// Under auto mode always, the records of roles whose joins never completed
// are bounded (and expire): the oldest goes beyond MaxUnjoined, and a role
// whose estate is saved (its join completed) stays.
func ExampleKeep_ExpireUnjoined() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	k, _ := keep.Open(dir, &keep.Config{Auto: keep.AutoAlways, MaxUnjoined: 2, UnjoinedTTL: time.Hour})

	offer := func(role string) {
		p, _ := keys.GenerateBox()
		_, _ = k.StatusRole(role, keys.GenerateSigning().Verify, p.Public)
	}
	offer("joined")
	_ = k.SaveRemote(keep.RemoteEstate{Name: "joined", UID: 2, Role: "joined"}) // its join completed
	for _, role := range []string{"spoof1", "spoof2", "spoof3"} {
		offer(role) // joins from spoofed addresses: never completed
	}
	roles, _ := k.RoleNames()
	fmt.Println(roles, k.Unjoined())
	// Output:
	// [joined spoof2 spoof3] 2
}

func ExampleDecide() {
	v := keys.GenerateSigning().Verify
	p, _ := keys.GenerateBox()
	stored := &keep.RemoteRole{Role: "other", Acceptance: keep.Pending, Verify: v, Public: p.Public}
	for _, auto := range []keep.AutoMode{keep.AutoNever, keep.AutoOnce, keep.AutoAlways} {
		status, write, _ := keep.Decide(auto, stored, v, p.Public)
		fmt.Println(auto, status, write)
	}
	// Output:
	// never pending false
	// once accepted true
	// always accepted true
}

// A corrupt file is moved aside, not deleted, and reported with its path.
func ExampleFileError() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	k, _ := keep.Open(dir, nil)
	path, _ := k.RemoteEstatePath("other")
	_ = os.WriteFile(path, []byte(`{"name": "other"}`), 0o600)

	_, err := k.LoadRemote("other")
	var fe *keep.FileError
	if errors.As(err, &fe) && errors.Is(err, keep.ErrCorrupt) {
		fmt.Println(filepath.Base(fe.Path), "->", filepath.Base(fe.Aside))
	}
	names, _ := k.RemoteNames()
	fmt.Println(len(names), "remotes listed")
	// Output:
	// estate.other.json -> estate.other.json.corrupt.1
	// 0 remotes listed
}

func ExampleKeep_LoadRemotes() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	k, _ := keep.Open(dir, nil)
	for i, name := range []string{"beta", "alpha"} {
		_ = k.SaveRemote(keep.RemoteEstate{
			Name: name, UID: uint32(2 + i), HA: keep.HostPort{Host: "127.0.0.1", Port: uint16(7531 + i)},
			SID: 1, Joined: new(true), Role: name,
		})
	}
	remotes, err := k.LoadRemotes()
	for _, r := range remotes {
		fmt.Println(r.Name, r.UID, r.HA, *r.Joined)
	}
	fmt.Println(err)
	fmt.Println(k.SaveRemote(keep.RemoteEstate{Name: "bad name", Role: "x"}) != nil)
	// Output:
	// alpha 3 127.0.0.1:7532 true
	// beta 2 127.0.0.1:7531 true
	// <nil>
	// true
}

// A stack that forgot a remote finds its estate again by the uid a packet
// names; a uid whose estate is gone, or given to another name, finds none.
// ReindexUIDs, at start, mends the entries the reference never writes.
func ExampleKeep_LoadRemoteUID() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	k, _ := keep.Open(dir, nil)
	_ = k.SaveRemote(keep.RemoteEstate{Name: "other", UID: 5, HA: keep.HostPort{Host: "127.0.0.1", Port: 7531}, Joined: new(true), Role: "other"})
	e, err := k.LoadRemoteUID(5)
	fmt.Println(e.Name, err)
	_ = k.DeleteRemote("other")
	_, err = k.LoadRemoteUID(5)
	fmt.Println(errors.Is(err, fs.ErrNotExist))

	// An estate file the reference wrote has no entry until a reindex.
	_ = os.WriteFile(filepath.Join(dir, "remote", "estate.ref.json"), []byte(`{
  "name": "ref",
  "uid": 6,
  "fuid": 2,
  "ha": [
    "127.0.0.1",
    7532
  ],
  "iha": null,
  "natted": null,
  "fqdn": "localhost",
  "dyned": null,
  "sid": 1,
  "main": false,
  "kind": 0,
  "joined": true,
  "role": "ref"
}`), 0o600)
	_, err = k.LoadRemoteUID(6)
	fmt.Println(errors.Is(err, fs.ErrNotExist))
	remotes, _ := k.LoadRemotes()
	fmt.Println(k.ReindexUIDs(remotes))
	e, err = k.LoadRemoteUID(6)
	fmt.Println(e.Name, err)
	// Output:
	// other <nil>
	// true
	// true
	// <nil>
	// ref <nil>
}

func ExampleCheckName() {
	for _, n := range []string{"other", "../etc", "my estate"} {
		fmt.Println(n, keep.CheckName(n))
	}
	// Output:
	// other <nil>
	// ../etc keep: invalid name: "../etc" contains a path separator
	// my estate keep: invalid name: "my estate" contains a space
}

// A tool reads a keep that a running stack owns, writing nothing.
func ExampleOpenReadOnly() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	k, _ := keep.Open(dir, nil)
	_ = k.SaveLocal(keep.LocalEstate{Name: "main", UID: 1, HA: keep.HostPort{Host: "127.0.0.1", Port: 7530},
		FQDN: "localhost", PUID: 1, AHA: keep.HostPort{Port: 7530}, Role: "main"})

	ro, err := keep.OpenReadOnly(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	local, err := ro.LoadLocal()
	fmt.Println(local.Name, err)
	fmt.Println(errors.Is(ro.DeleteLocal(), keep.ErrReadOnly))
	// Output:
	// main <nil>
	// true
}

// A stack takes its keep with Lock; a second stack on the same directory
// is refused until the first one unlocks it.
func ExampleKeep_Lock() {
	dir, _ := os.MkdirTemp("", "keep-lock")
	defer os.RemoveAll(dir)
	k, _ := keep.Open(dir, nil)
	first, err := k.Lock()
	fmt.Println("first:", err)
	_, err = k.Lock()
	fmt.Println("second in use:", errors.Is(err, keep.ErrLocked))
	first.Unlock()
	again, err := k.Lock()
	fmt.Println("after unlock:", err)
	again.Unlock()
	// Output:
	// first: <nil>
	// second in use: true
	// after unlock: <nil>
}

// An event loop queues its keep writes on a Writer and holds back its
// answer until the writes it depends on are durable.
func ExampleWriter() {
	dir := tempDir()
	defer os.RemoveAll(dir)
	k, err := keep.Open(dir, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	durable := make(chan uint64, 16) // the loop would select on this
	w := k.StartWriter(&keep.WriterConfig{OnDurable: func(seq uint64) {
		select {
		case durable <- seq:
		default: // the loop is busy; a later batch reports a later seq
		}
	}})
	defer w.Close()

	var last *keep.Queued
	for _, name := range []string{"alpha", "beta", "gamma"} {
		q, err := w.SaveRemote(keep.RemoteEstate{Name: name, UID: 2, HA: keep.HostPort{Host: "127.0.0.1", Port: 7531}, Role: name})
		if err != nil { // ErrQueueFull: refuse or retry later, never block
			fmt.Println(err)
			return
		}
		last = q
	}
	if err := last.Wait(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	for seq := range durable {
		if seq >= last.Seq() {
			break
		}
	}
	names, _ := k.RemoteNames()
	fmt.Println("durable:", names, "up to write", last.Seq(), "failed:", w.Err())
	// Output:
	// durable: [alpha beta gamma] up to write 3 failed: <nil>
}
