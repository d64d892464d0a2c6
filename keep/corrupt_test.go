package keep

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// edit returns golden with every occurrence of old replaced by new, failing
// if old does not occur (so a case cannot silently test the valid file).
func edit(t *testing.T, golden []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(golden, []byte(old)) {
		t.Fatalf("edit: %q not in golden", old)
	}
	return bytes.ReplaceAll(golden, []byte(old), []byte(new))
}

type corruptCase struct {
	name    string
	content []byte
	problem string // expected in the error message
}

func commonCorrupt(t *testing.T, golden []byte) []corruptCase {
	return []corruptCase{
		{"empty", nil, "empty file"},
		{"whitespace", []byte(" \n"), "empty file"},
		{"truncated", golden[:len(golden)/2], "bad JSON"},
		{"not object", []byte(`["role"]`), "not a JSON object"},
		{"null", []byte(`null`), "not a JSON object"},
		{"trailing data", append(append([]byte(nil), golden...), "{}"...), "data after the object"},
		{"trailing junk", append(append([]byte(nil), golden...), " x"...), "data after the object"},
		{"bom", append([]byte("\xef\xbb\xbf"), golden...), "bad JSON"},
		{"invalid utf8", edit(t, golden, `": `, "\": \xff"), "not valid UTF-8"},
		{"extra field", edit(t, golden, "{\n", "{\n  \"extra\": 1,\n"), `unexpected "extra"`},
		{"duplicate field", edit(t, golden, "{\n", "{\n  \"role\": \"x\",\n"), `"role" appears twice`},
		{"empty object", []byte("{}"), "missing"},
	}
}

func TestCorruptFiles(t *testing.T) {
	type kind struct {
		name   string
		golden string
		rel    string
		load   func(k *Keep) error
		cases  []corruptCase
	}
	lr := readGolden(t, "local_role.json")
	rr := readGolden(t, "remote_role.json")
	le := readGolden(t, "local_estate.json")
	re := readGolden(t, "remote_estate.json")
	kinds := []kind{
		{"local estate", "local_estate.json", "local/estate.json",
			func(k *Keep) error { _, err := k.LoadLocal(); return err },
			[]corruptCase{
				{"missing field", edit(t, le, "  \"iha\": null,\n", ""), `missing "iha"`},
				{"uid string", edit(t, le, `"uid": 1`, `"uid": "1"`), `"uid": want an integer, got a string`},
				{"uid float", edit(t, le, `"uid": 1`, `"uid": 1.0`), `"uid": want an integer`},
				{"uid exp", edit(t, le, `"uid": 1`, `"uid": 1e2`), `"uid": want an integer`},
				{"uid negative", edit(t, le, `"uid": 1`, `"uid": -1`), `"uid": integer out of range`},
				{"uid too big", edit(t, le, `"uid": 1`, `"uid": 4294967296`), `"uid": integer out of range`},
				{"puid null", edit(t, le, `"puid": 102`, `"puid": null`), `"puid": want an integer, got null`},
				{"ha null", edit(t, le, "\"ha\": [\n    \"127.0.0.1\",\n    7530\n  ]", `"ha": null`), `"ha": want a [host, port] list, got null`},
				{"ha three", edit(t, le, "7530\n  ],\n  \"iha\"", "7530, 1\n  ],\n  \"iha\""), `"ha": want a [host, port] list, got 3 items`},
				{"ha port big", edit(t, le, "    7530\n  ],\n  \"iha\"", "    75300\n  ],\n  \"iha\""), `"ha[1]": integer out of range 0..65535`},
				{"ha host number", edit(t, le, `"127.0.0.1"`, `127`), `"ha[0]": want a string`},
				{"aha object", edit(t, le, "\"aha\": [\n    \"\",\n    7530\n  ]", `"aha": {}`), `"aha": want a [host, port] list, got an object`},
				{"natted string", edit(t, le, `"natted": null`, `"natted": "no"`), `"natted": want true, false or null`},
				{"dyned number", edit(t, le, `"dyned": null`, `"dyned": 0`), `"dyned": want true, false or null`},
				{"fqdn null", edit(t, le, `"fqdn": "localhost"`, `"fqdn": null`), `"fqdn": want a string, got null`},
				{"name with space", edit(t, le, `"name": "main"`, `"name": "ma in"`), `contains a space`},
				{"role with slash", edit(t, le, `"role": "main"`, `"role": "../main"`), `path separator`},
			}},
		{"remote estate", "remote_estate.json", "remote/estate.other.json",
			func(k *Keep) error { _, err := k.LoadRemote("other"); return err },
			[]corruptCase{
				{"missing fuid", edit(t, re, "  \"fuid\": 202,\n", ""), `missing "fuid"`},
				{"local fields", le, `missing "fuid", "main", "kind", "joined"; unexpected "puid", "aha"`},
				{"main null", edit(t, re, `"main": false`, `"main": null`), `"main": want true or false, got null`},
				{"main int", edit(t, re, `"main": false`, `"main": 0`), `"main": want true or false, got a number`},
				{"kind 256", edit(t, re, `"kind": 0`, `"kind": 256`), `"kind": integer out of range 0..255`},
				{"joined string", edit(t, re, `"joined": true`, `"joined": "yes"`), `"joined": want true, false or null`},
				{"iha one item", edit(t, re, `"iha": null`, `"iha": ["h"]`), `"iha": want a [host, port] list, got 1 items`},
				{"name mismatch", edit(t, re, `"name": "other"`, `"name": "another"`), `file is named for "other"`},
			}},
		{"local role", "local_role.json", "role/local/role.json",
			func(k *Keep) error { _, err := k.LoadLocalRole(); return err },
			[]corruptCase{
				{"short sighex", edit(t, lr, `6ec1"`, `6ec"`), `"sighex": parse sighex: keys: wrong length`},
				{"non-hex prihex", edit(t, lr, `"8985`, `"x985`), `"prihex": parse prihex: keys: not hexadecimal`},
				{"zero prihex", edit(t, lr, "8985d11cb2e2fecb083005f376c829b18d8f76ef7e22354a639e5682876562c5", strings.Repeat("0", 64)), `"prihex": the zero key`},
				{"sighex null", edit(t, lr, `"sighex": "378f61b6b73cb051458624f9f970e4853ecc58308e69d719738ca3ed7db36ec1"`, `"sighex": null`), `"sighex": want a string, got null`},
				{"remote role fields", rr, `wrong field set`},
			}},
		{"remote role", "remote_role.json", "role/remote/role.other.json",
			func(k *Keep) error { _, err := k.LoadRemoteRole("other"); return err },
			[]corruptCase{
				{"acceptance 3", edit(t, rr, `"acceptance": 1`, `"acceptance": 3`), `"acceptance": integer out of range 0..2`},
				{"acceptance null", edit(t, rr, `"acceptance": 1`, `"acceptance": null`), `"acceptance": want an integer, got null`},
				{"acceptance bool", edit(t, rr, `"acceptance": 1`, `"acceptance": true`), `"acceptance": want an integer, got a boolean`},
				{"acceptance string", edit(t, rr, `"acceptance": 1`, `"acceptance": "accepted"`), `"acceptance": want an integer, got a string`},
				{"verhex long", edit(t, rr, `a402"`, `a4020"`), `"verhex": parse verhex: keys: wrong length`},
				{"pubhex number", edit(t, rr, `"05d61b6746820505ee55768ddb5e38bc4c80e052dc1b26b7ea9db6b2c26d5a26"`, `5`), `"pubhex": want a string, got a number`},
				{"role mismatch", edit(t, rr, `"role": "other"`, `"role": "main"`), `file is named for "other"`},
			}},
	}
	for _, kd := range kinds {
		golden := readGolden(t, kd.golden)
		cases := append(commonCorrupt(t, golden), kd.cases...)
		for _, c := range cases {
			t.Run(kd.name+"/"+c.name, func(t *testing.T) {
				k := openKeep(t, AutoNever)
				path := filepath.Join(k.Dir(), kd.rel)
				if err := os.WriteFile(path, c.content, 0o600); err != nil {
					t.Fatal(err)
				}
				err := kd.load(k)
				var fe *FileError
				if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) {
					t.Fatalf("load = %v, want *FileError wrapping ErrCorrupt", err)
				}
				if fe.Op != "load" || fe.Path != path || fe.Aside != path+".corrupt.1" {
					t.Errorf("FileError = %+v", fe)
				}
				msg := err.Error()
				if !strings.Contains(msg, c.problem) || !strings.Contains(msg, path) || !strings.Contains(msg, fe.Aside) {
					t.Errorf("message %q lacks %q or the paths", msg, c.problem)
				}
				// No secret ever appears in a message.
				for _, secret := range []string{mainSig, mainPri, mainSig[:20], mainPri[:20]} {
					if strings.Contains(msg, secret) {
						t.Errorf("message leaks a secret: %q", msg)
					}
				}
				// The file was moved aside intact, not deleted.
				if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("corrupt file still in place: %v", err)
				}
				if got := must(os.ReadFile(fe.Aside))(t); !bytes.Equal(got, c.content) {
					t.Errorf("moved file content changed")
				}
				// The next load sees no file; a valid file written then loads.
				if err := kd.load(k); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("second load = %v, want not exist", err)
				}
				if err := os.WriteFile(path, golden, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := kd.load(k); err != nil {
					t.Errorf("golden after corrupt: %v", err)
				}
				// A second corrupt file goes to .corrupt.2, keeping the first.
				if err := os.WriteFile(path, c.content, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := kd.load(k); !errors.As(err, &fe) || fe.Aside != path+".corrupt.2" {
					t.Errorf("second corrupt: %v", err)
				}
				if _, err := os.Stat(path + ".corrupt.1"); err != nil {
					t.Errorf("first aside file gone: %v", err)
				}
			})
		}
	}
}

// TestLoadRemotesPartial: one corrupt remote among good ones; the good ones
// load, the bad one is reported and moved aside.
func TestLoadRemotesPartial(t *testing.T) {
	k := openKeep(t, AutoNever)
	for _, n := range []string{"a", "c"} {
		re := goldenRemote()
		re.Name = n
		if err := k.SaveRemote(re); err != nil {
			t.Fatal(err)
		}
	}
	bad := must(k.RemoteEstatePath("b"))(t)
	if err := os.WriteFile(bad, []byte(`{"name": "b"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := k.LoadRemotes()
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "c" {
		t.Errorf("LoadRemotes = %+v", got)
	}
	var fe *FileError
	if !errors.Is(err, ErrCorrupt) || !errors.As(err, &fe) || fe.Path != bad {
		t.Fatalf("LoadRemotes err = %v", err)
	}
	if names := must(k.RemoteNames())(t); len(names) != 2 {
		t.Errorf("after move aside names = %q", names)
	}
	// Same for roles.
	rr := goldenRemoteRole(t)
	if err := k.SaveRemoteRole(rr); err != nil {
		t.Fatal(err)
	}
	badRole := must(k.RemoteRolePath("zz"))(t)
	if err := os.WriteFile(badRole, []byte(`not json`), 0o600); err != nil {
		t.Fatal(err)
	}
	roles, err := k.LoadRemoteRoles()
	if len(roles) != 1 || roles[0] != rr || !errors.Is(err, ErrCorrupt) {
		t.Errorf("LoadRemoteRoles = %+v, %v", roles, err)
	}
}

// TestNotCorrupt: an unreadable path (a directory) is an I/O error, not
// corruption, and is not moved.
func TestNotCorrupt(t *testing.T) {
	k := openKeep(t, AutoNever)
	path := k.LocalEstatePath()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := k.LoadLocal()
	var fe *FileError
	if err == nil || errors.Is(err, ErrCorrupt) || !errors.As(err, &fe) || fe.Aside != "" {
		t.Fatalf("LoadLocal on a directory = %v", err)
	}
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		t.Errorf("directory moved: %v", err)
	}
}
