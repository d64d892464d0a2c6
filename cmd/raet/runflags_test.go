package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/raet-go/raet/dissect"
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

// The bus commands over a lane write their pages with --pcap, and
// raetdump's dissector reads them: every page a named envelope.
func TestBusLanePcap(t *testing.T) {
	dir := laneTestDir(t)
	caps := t.TempDir()
	in := writeLines(t, `{"subject":"orders.new","body":{"n":1}}`, `{"subject":"orders.paid","body":{"n":2}}`)
	var pout, perr, sout, serr lines
	pub := start(fmt.Sprintf("pub --over lane --dir %s --name p --wait-subs 1 --input %s --pcap %s/pub.pcapng", dir, in, caps), &pout, &perr)
	pout.wait(t, 1)
	sub := start(fmt.Sprintf("sub --over lane --dir %s --name s --from p --count 2 --pcap %s/sub.pcapng orders.>", dir, caps), &sout, &serr)
	if code := exitCode(t, sub, &serr); code != exitOK {
		t.Fatalf("sub exit %d: %s", code, serr.buf.String())
	}
	if code := exitCode(t, pub, &perr); code != exitOK {
		t.Fatalf("pub exit %d: %s", code, perr.buf.String())
	}
	for _, name := range []string{"pub", "sub"} {
		f, err := os.Open(filepath.Join(caps, name+".pcapng"))
		if err != nil {
			t.Fatal(err)
		}
		cr, err := dissect.NewCaptureReader(f)
		if err != nil {
			t.Fatal(err)
		}
		d := dissect.NewDissector(nil)
		kinds := map[string]int{}
		for {
			rec, err := cr.Next()
			if err != nil {
				break
			}
			p := d.Decode(rec)
			if p == nil || !p.Lane || p.Err != nil || p.Bus == nil {
				t.Fatalf("%s: a page that is not a named envelope: %+v", name, p)
			}
			kinds[p.Bus.Envelope.Kind.String()]++
		}
		f.Close()
		if kinds["sub"] == 0 || kinds["pub"] < 2 || kinds["hello"] == 0 {
			t.Fatalf("%s: envelopes by kind %v", name, kinds)
		}
	}
}
