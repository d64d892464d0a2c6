package road

import "testing"

// The name sent for an address is getfqdn's choice among its names: the
// first with a dot, else the first, without the trailing dot a resolver
// gives.
func TestPickFQDN(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"localhost"}, "localhost"},
		{[]string{"localhost", "runsc", "vm"}, "localhost"},
		{[]string{"host.", "host.example.org."}, "host.example.org"},
		{[]string{"a.example."}, "a.example"},
	} {
		if got := pickFQDN(tc.names); got != tc.want {
			t.Errorf("pickFQDN(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}
