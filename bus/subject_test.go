package bus

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		filter, subject string
		want            bool
	}{
		{"a", "a", true},
		{"a", "b", false},
		{"a", "a.b", false},
		{"a.b", "a", false},
		{"a.b", "a.b", true},
		{"*", "a", true},
		{"*", "a.b", false},
		{"a.*", "a.b", true},
		{"a.*", "a", false},
		{"a.*", "a.b.c", false},
		{"*.b", "a.b", true},
		{"*.*", "a.b", true},
		{"*.b.*", "a.b.c", true},
		{"*.b.*", "a.c.c", false},
		{">", "a", true},
		{">", "a.b.c", true},
		{"a.>", "a", false},
		{"a.>", "a.b", true},
		{"a.>", "a.b.c", true},
		{"a.>", "b.c", false},
		{"a.*.>", "a.b", false},
		{"a.*.>", "a.b.c", true},
		{"orders.>", "orders.eu.new", true},
		{"ab", "a", false},
		{"a", "ab", false},
		{"a.b", "a.bc", false},
	} {
		if got := Match(tc.filter, tc.subject); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.filter, tc.subject, got, tc.want)
		}
		if got := naiveMatch(tc.filter, tc.subject); got != tc.want {
			t.Errorf("naiveMatch(%q, %q) = %v, want %v", tc.filter, tc.subject, got, tc.want)
		}
	}
}

func TestCheckSubject(t *testing.T) {
	for _, s := range []string{"a", "a.b", "orders.eu-1.new", "x_y.Z9"} {
		if err := checkSubject(s, 256); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for _, s := range []string{"", ".", "a.", ".a", "a..b", "a b", "a.*", ">", "a*", "a.b>", strings.Repeat("a", 257)} {
		if checkSubject(s, 256) == nil {
			t.Errorf("subject %q accepted", s)
		}
	}
	for _, s := range []string{"*", ">", "a.*", "a.>", "*.*.>", "a.b"} {
		if err := checkFilter(s, 256); err != nil {
			t.Errorf("filter %q: %v", s, err)
		}
	}
	for _, s := range []string{"", "a.>.b", ">.a", "a*", "a.**", "a..>", "a.b>"} {
		if checkFilter(s, 256) == nil {
			t.Errorf("filter %q accepted", s)
		}
	}
}

// naiveMatch splits both into tokens and compares them one by one.
func naiveMatch(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, ft := range f {
		if ft == ">" {
			return len(s) > i
		}
		if i >= len(s) || (ft != "*" && ft != s[i]) {
			return false
		}
	}
	return len(f) == len(s)
}

// FuzzMatch checks Match against naiveMatch on well-formed pairs.
func FuzzMatch(f *testing.F) {
	f.Add("a.*.>", "a.b.c")
	f.Add("orders.>", "orders.eu")
	f.Add("*", "x")
	f.Add("a.b", "a.b.c")
	f.Fuzz(func(t *testing.T, filter, subject string) {
		if checkFilter(filter, 256) != nil || checkSubject(subject, 256) != nil {
			return
		}
		if got, want := Match(filter, subject), naiveMatch(filter, subject); got != want {
			t.Fatalf("Match(%q, %q) = %v, naive %v", filter, subject, got, want)
		}
	})
}
