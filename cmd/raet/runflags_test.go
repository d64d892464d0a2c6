package main

import (
	"strings"
	"testing"
)

// Every command that starts a stack takes the shared flags of runflags.go:
// the road's commands all of them, the lane's those that apply to a lane.
func TestSharedStackFlags(t *testing.T) {
	road := []string{"-pcap", "-keylog", "-aead", "-plugins", "-serializer", "-queue", "-coat", "-plugin-timeout"}
	laneOnly := []string{"-pcap", "-plugins", "-serializer", "-queue", "-plugin-timeout"}
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"serve"}, road}, {[]string{"send"}, road},
		{[]string{"pub"}, road}, {[]string{"sub"}, road}, {[]string{"req"}, road},
		{[]string{"rep"}, road}, {[]string{"push"}, road}, {[]string{"pull"}, road},
		{[]string{"bench"}, []string{"-pcap", "-keylog", "-aead"}},
		{[]string{"lane", "serve"}, laneOnly}, {[]string{"lane", "send"}, laneOnly},
	}
	for _, c := range cases {
		var out, errb lines
		if code := run(append(c.args, "--help"), &out, &errb); code != exitOK {
			t.Fatalf("%v --help: exit %d: %s", c.args, code, errb.buf.String())
		}
		help := out.buf.String()
		for _, f := range c.want {
			if !strings.Contains(help, "\n  "+f+" ") {
				t.Errorf("raet %s --help: no %s", strings.Join(c.args, " "), f)
			}
		}
	}
	// A bad --aead is a usage error wherever it is taken.
	for _, args := range [][]string{{"serve", "--aead", "maybe"}, {"pub", "--aead", "maybe"}, {"bench", "--aead", "maybe"}} {
		var out, errb lines
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, exitUsage, errb.buf.String())
		}
	}
}
