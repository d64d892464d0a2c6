package keep

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// record is what every on-disk type implements.
type record interface {
	MarshalJSON() ([]byte, error)
	UnmarshalJSON([]byte) error
}

// fuzzReader checks one file reader: it never panics, every refusal wraps
// ErrCorrupt, and whatever it accepts writes back to bytes that read to the
// same value and write again to the same bytes.
func fuzzReader[T any, P interface {
	*T
	record
}](f *testing.F, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
		f.Add(bytes.ReplaceAll(s, []byte("\n"), nil))
		f.Add(s[:len(s)/2])
	}
	f.Add([]byte("{}"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		var v T
		if err := P(&v).UnmarshalJSON(data); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("refusal does not wrap ErrCorrupt: %v", err)
			}
			var zero T
			if !reflect.DeepEqual(v, zero) {
				t.Fatalf("value changed on error: %+v", v)
			}
			return
		}
		out, err := P(&v).MarshalJSON()
		if err != nil {
			t.Fatalf("accepted %q but cannot write it back: %v", data, err)
		}
		var back T
		if err := P(&back).UnmarshalJSON(out); err != nil {
			t.Fatalf("own output %q refused: %v", out, err)
		}
		if !reflect.DeepEqual(back, v) {
			t.Fatalf("round trip changed value:\n%+v\n%+v", v, back)
		}
		again, err := P(&back).MarshalJSON()
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("second write differs: %q vs %q (%v)", again, out, err)
		}
	})
}

func seedsFrom(f *testing.F, recs ...interface{ MarshalJSON() ([]byte, error) }) [][]byte {
	var out [][]byte
	for _, r := range recs {
		b, err := r.MarshalJSON()
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func FuzzLocalEstate(f *testing.F) {
	e := goldenLocal()
	e.IHA, e.Natted, e.Dyned = &HostPort{"10.0.0.1", 1}, new(true), new(false)
	fuzzReader[LocalEstate](f, seedsFrom(f, goldenLocal(), e)...)
}

func FuzzRemoteEstate(f *testing.F) {
	fuzzReader[RemoteEstate](f, seedsFrom(f, goldenRemote(), goldenRemoteUnusual())...)
}

func FuzzLocalRole(f *testing.F) {
	fuzzReader[LocalRole](f, seedsFrom(f, goldenLocalRole(f))...)
}

func FuzzRemoteRole(f *testing.F) {
	r := goldenRemoteRole(f)
	r.Acceptance = Rejected
	fuzzReader[RemoteRole](f, seedsFrom(f, goldenRemoteRole(f), r)...)
}
