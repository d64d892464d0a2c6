package keep

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raet-go/raet/keys"
)

func randomRole(t testing.TB, role string) RemoteRole {
	return RemoteRole{Role: role, Acceptance: Accepted, Verify: keys.GenerateSigning().Verify, Public: must(keys.GenerateBox())(t).Public}
}

func roleNames(t testing.TB, k *Keep) []string {
	t.Helper()
	names, err := k.RoleNames()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// A flood of spoofed joins under AutoAlways writes an accepted role record
// per join request: through the Writer (a road's path) at most MaxUnjoined
// of them stay on disk after each batch, none once they expire, while the
// record of a remote whose join completed (its estate saved) stays, also
// one whose record was removed as unjoined before its join completed.
func TestUnjoinedRolesExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound, ttl, flood = 16, time.Minute, 600
		k, err := Open(t.TempDir(), &Config{Auto: AutoAlways, MaxUnjoined: bound, UnjoinedTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		w := k.StartWriter(&WriterConfig{Queue: 64, MaxBatch: 8})
		defer w.Close()
		barrier := func() {
			t.Helper()
			q, err := w.Barrier()
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the writer has removed what was due after the batch
		}
		legit := randomRole(t, "legit")
		late := randomRole(t, "late")
		if _, err := w.SaveRemoteRole(late); err != nil {
			t.Fatal(err)
		}
		for i := range bound {
			if _, err := w.SaveRemoteRole(randomRole(t, fmt.Sprintf("early_%d", i))); err != nil {
				t.Fatal(err)
			}
		}
		barrier()
		if _, err := k.LoadRemoteRole("late"); err == nil {
			t.Fatal("the oldest unjoined record is still on disk beyond the bound")
		}
		// late's join completes after its record was pushed out: the
		// record comes back with its keys, before its estate.
		if _, err := w.SaveRemote(RemoteEstate{Name: "late", UID: 3, Role: "late"}); err != nil {
			t.Fatal(err)
		}
		barrier()
		if got, err := k.LoadRemoteRole("late"); err != nil || !got.Verify.Equal(late.Verify) || got.Acceptance != Accepted {
			t.Fatalf("late's record after its join: %+v, %v; want it back with its keys", got, err)
		}
		most := 0
		for i := range flood {
			if i == flood/2 {
				if _, err := w.SaveRemoteRole(legit); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.SaveRemoteRole(randomRole(t, fmt.Sprintf("flood_%d", i))); err != nil {
				t.Fatal(err)
			}
			if i == flood/2 {
				// The legitimate joiner completes its join: its estate is
				// saved.
				if _, err := w.SaveRemote(RemoteEstate{Name: "legit", UID: 2, Role: "legit"}); err != nil {
					t.Fatal(err)
				}
			}
			if i%16 == 15 {
				barrier()
				n := len(roleNames(t, k))
				most = max(most, n)
				if n > bound+2 { // and the joined legit and late
					t.Fatalf("after %d spoofed joins %d role records on disk; want at most %d unjoined", i+1, n, bound)
				}
			}
		}
		barrier()
		t.Logf("%d spoofed joins: at most %d role records on disk, %d unjoined tracked", flood, most, k.Unjoined())

		time.Sleep(ttl + time.Second)
		synctest.Wait()
		names := roleNames(t, k)
		if len(names) != 2 || names[0] != "late" || names[1] != "legit" {
			t.Fatalf("after the TTL the role records are %v; want only the joined late and legit", names)
		}
		if k.Unjoined() != 0 {
			t.Fatalf("%d unjoined records tracked after the TTL", k.Unjoined())
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Without a Writer (a keep written on the caller's goroutine) the bound
// holds at each save; records left by an earlier run are unjoined from
// their file's time, and an operator's decision is never removed.
func TestUnjoinedRolesDirect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		cfg := &Config{Auto: AutoAlways, MaxUnjoined: 4, UnjoinedTTL: time.Minute}
		k, err := Open(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			if _, err := k.StatusRole(fmt.Sprintf("flood_%d", i), keys.GenerateSigning().Verify, must(keys.GenerateBox())(t).Public); err != nil {
				t.Fatal(err)
			}
			if n := len(roleNames(t, k)); n > 4 {
				t.Fatalf("%d role records after %d joins; want at most 4", n, i+1)
			}
		}
		if err := k.Reject("flood_9"); err != nil { // the operator's: kept
			t.Fatal(err)
		}
		// A restart: the three left are unjoined again, from their files.
		k, err = Open(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if k.Unjoined() != 3 {
			t.Fatalf("%d unjoined at Open; want the 3 accepted", k.Unjoined())
		}
		time.Sleep(2 * time.Minute)
		if _, err := k.ExpireUnjoined(); err != nil {
			t.Fatal(err)
		}
		if names := roleNames(t, k); len(names) != 1 || names[0] != "flood_9" {
			t.Fatalf("after the TTL: %v; want only the rejected flood_9", names)
		}
		// Not under AutoAlways nothing is tracked.
		k, err = Open(t.TempDir(), &Config{Auto: AutoOnce, MaxUnjoined: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			if _, err := k.StatusRole(fmt.Sprintf("r%d", i), keys.GenerateSigning().Verify, must(keys.GenerateBox())(t).Public); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(roleNames(t, k)); n != 3 {
			t.Fatalf("auto once: %d records; want all 3", n)
		}
	})
}
