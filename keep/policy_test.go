package keep

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/raet-go/raet/keys"
)

// stored states of the §10.3 table.
type storedState int

const (
	none storedState = iota
	storedAccepted
	storedPending
	storedRejected
)

func (s storedState) String() string {
	return [...]string{"nothing", "accepted", "pending", "rejected"}[s]
}

// policyTable is raet-protocol.md §10.3, cell by cell, written out by hand.
// keysSame only matters when something is stored. wantWritten is what the
// stored record must be afterwards: "" = unchanged (or still absent),
// "offered" = the offered keys with the returned status.
var policyTable = []struct {
	auto     AutoMode
	stored   storedState
	keysSame bool
	want     Acceptance
	written  string
}{
	// auto always: accepted everywhere; keys replaced.
	{AutoAlways, none, false, Accepted, "offered"},
	{AutoAlways, storedAccepted, true, Accepted, ""},
	{AutoAlways, storedAccepted, false, Accepted, "offered"},
	{AutoAlways, storedPending, true, Accepted, "offered"},
	{AutoAlways, storedPending, false, Accepted, "offered"},
	{AutoAlways, storedRejected, true, Accepted, "offered"},
	{AutoAlways, storedRejected, false, Accepted, "offered"},
	// auto once.
	{AutoOnce, none, false, Accepted, "offered"},
	{AutoOnce, storedAccepted, true, Accepted, ""},
	{AutoOnce, storedAccepted, false, Rejected, ""},
	{AutoOnce, storedPending, true, Accepted, "offered"},
	{AutoOnce, storedPending, false, Rejected, ""},
	{AutoOnce, storedRejected, true, Rejected, ""},
	{AutoOnce, storedRejected, false, Rejected, ""},
	// auto never.
	{AutoNever, none, false, Pending, "offered"},
	{AutoNever, storedAccepted, true, Accepted, ""},
	{AutoNever, storedAccepted, false, Rejected, ""},
	{AutoNever, storedPending, true, Pending, ""},
	{AutoNever, storedPending, false, Rejected, ""},
	{AutoNever, storedRejected, true, Rejected, ""},
	{AutoNever, storedRejected, false, Rejected, ""},
}

func TestPolicyTable(t *testing.T) {
	oldSign := keys.GenerateSigning()
	oldBox := must(keys.GenerateBox())(t)
	newSign := keys.GenerateSigning()
	newBox := must(keys.GenerateBox())(t)

	for _, c := range policyTable {
		for _, which := range []string{"verify", "public", "both"} {
			if c.keysSame && which != "both" {
				continue
			}
			name := fmt.Sprintf("%v/%v/same=%v/differ=%s", c.auto, c.stored, c.keysSame, which)
			if c.keysSame {
				name = fmt.Sprintf("%v/%v/same", c.auto, c.stored)
			}
			t.Run(name, func(t *testing.T) {
				k := openKeep(t, c.auto)
				if k.Auto() != c.auto {
					t.Fatalf("Auto() = %v", k.Auto())
				}
				var before *RemoteRole
				if c.stored != none {
					before = &RemoteRole{Role: "other", Acceptance: map[storedState]Acceptance{
						storedAccepted: Accepted, storedPending: Pending, storedRejected: Rejected}[c.stored],
						Verify: oldSign.Verify, Public: oldBox.Public}
					if err := k.SaveRemoteRole(*before); err != nil {
						t.Fatal(err)
					}
				}
				offerV, offerP := oldSign.Verify, oldBox.Public
				if !c.keysSame || c.stored == none {
					if which != "public" {
						offerV = newSign.Verify
					}
					if which != "verify" {
						offerP = newBox.Public
					}
				}

				// The pure decision.
				st, write, err := Decide(c.auto, before, offerV, offerP)
				if err != nil || st != c.want || write != (c.written == "offered") {
					t.Errorf("Decide = %v, write %v, %v; want %v, write %v", st, write, err, c.want, c.written == "offered")
				}

				// Through the keep, and what it leaves on disk.
				got, err := k.StatusRole("other", offerV, offerP)
				if err != nil || got != c.want {
					t.Fatalf("StatusRole = %v, %v; want %v", got, err, c.want)
				}
				after, err := k.LoadRemoteRole("other")
				switch {
				case c.written == "offered":
					want := RemoteRole{Role: "other", Acceptance: c.want, Verify: offerV, Public: offerP}
					if err != nil || after != want {
						t.Errorf("stored = %+v, %v; want %+v", after, err, want)
					}
				case before == nil:
					if !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("a record was written: %+v, %v", after, err)
					}
				default:
					if err != nil || after != *before {
						t.Errorf("stored changed to %+v, %v; want unchanged %+v", after, err, *before)
					}
				}
			})
		}
	}
}

// TestPolicyRejectedNotWritten makes the §10.3 rule concrete: under auto never,
// a peer offering different keys for an accepted role is rejected, and the
// operator's accepted keys survive, so the genuine peer is still accepted.
func TestPolicyRejectedNotWritten(t *testing.T) {
	k := openKeep(t, AutoNever)
	genuine := keys.GenerateSigning()
	genuineBox := must(keys.GenerateBox())(t)
	if st := must(k.StatusRole("other", genuine.Verify, genuineBox.Public))(t); st != Pending {
		t.Fatalf("first contact = %v, want pending", st)
	}
	if err := k.Accept("other"); err != nil {
		t.Fatal(err)
	}
	if st := must(k.StatusRole("other", genuine.Verify, genuineBox.Public))(t); st != Accepted {
		t.Fatalf("after accept = %v", st)
	}
	impostor := keys.GenerateSigning()
	if st := must(k.StatusRole("other", impostor.Verify, genuineBox.Public))(t); st != Rejected {
		t.Fatalf("impostor = %v, want rejected", st)
	}
	if st := must(k.StatusRole("other", genuine.Verify, genuineBox.Public))(t); st != Accepted {
		t.Fatalf("genuine after impostor = %v, want accepted", st)
	}
}

func TestOperatorActions(t *testing.T) {
	k := openKeep(t, AutoNever)
	sg := keys.GenerateSigning()
	bx := must(keys.GenerateBox())(t)
	for _, f := range []func(string) error{k.Accept, k.Reject, k.Pend} {
		if err := f("other"); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("action on unknown role = %v, want not exist", err)
		}
	}
	if _, err := k.StatusRole("other", sg.Verify, bx.Public); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		do   func(string) error
		want Acceptance
	}{{k.Accept, Accepted}, {k.Reject, Rejected}, {k.Pend, Pending}, {k.Reject, Rejected}, {k.Accept, Accepted}}
	for i, s := range steps {
		if err := s.do("other"); err != nil {
			t.Fatal(err)
		}
		r := must(k.LoadRemoteRole("other"))(t)
		if r.Acceptance != s.want || !r.Verify.Equal(sg.Verify) || !r.Public.Equal(bx.Public) {
			t.Errorf("step %d: %+v, want %v with the stored keys", i, r, s.want)
		}
	}
	if err := k.SetAcceptance("other", 3); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetAcceptance(3) = %v", err)
	}
	// A corrupt role file: the action fails, the file is moved aside.
	path := must(k.RemoteRolePath("other"))(t)
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := k.Reject("other"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Reject on corrupt = %v", err)
	}
}

// TestStatusRoleCorrupt: a corrupt stored role is an error, never "nothing
// stored" (which under auto once would accept any keys).
func TestStatusRoleCorrupt(t *testing.T) {
	k := openKeep(t, AutoOnce)
	path := must(k.RemoteRolePath("other"))(t)
	if err := os.WriteFile(path, []byte(`{"role": "other"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	sg := keys.GenerateSigning()
	bx := must(keys.GenerateBox())(t)
	st, err := k.StatusRole("other", sg.Verify, bx.Public)
	if !errors.Is(err, ErrCorrupt) || st != Rejected {
		t.Fatalf("StatusRole on corrupt = %v, %v", st, err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("corrupt role not moved aside / a record was written: %v", err)
	}
}

func TestDecideErrors(t *testing.T) {
	sg := keys.GenerateSigning()
	bx := must(keys.GenerateBox())(t)
	bad := &RemoteRole{Role: "r", Acceptance: 5, Verify: sg.Verify, Public: bx.Public}
	for name, f := range map[string]func() error{
		"auto 3":      func() error { _, _, err := Decide(3, nil, sg.Verify, bx.Public); return err },
		"zero verify": func() error { _, _, err := Decide(AutoAlways, nil, keys.VerifyKey{}, bx.Public); return err },
		"zero public": func() error { _, _, err := Decide(AutoAlways, nil, sg.Verify, keys.PublicKey{}); return err },
		"stored 5":    func() error { _, _, err := Decide(AutoNever, bad, sg.Verify, bx.Public); return err },
	} {
		if err := f(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
