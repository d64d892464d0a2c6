package sdk

import "testing"

func TestMaxProcs(t *testing.T) {
	for _, tc := range []struct {
		asked int
		env   string
		want  int
	}{
		{0, "", 1},  // the default
		{0, "4", 0}, // the environment's, left to the runtime
		{3, "", 3},  // asked for
		{2, "4", 2}, // asked for wins over the environment
	} {
		if got := maxProcs(tc.asked, tc.env); got != tc.want {
			t.Errorf("maxProcs(%d, %q) = %d, want %d", tc.asked, tc.env, got, tc.want)
		}
	}
}
