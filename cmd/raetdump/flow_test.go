package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/internal/testutil"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/netsim"
	"github.com/raet-go/raet/road"
)

// flowOf runs raetdump -flow over a capture and returns the file written.
func flowOf(t *testing.T, capture, out string, keyArgs ...string) string {
	t.Helper()
	code, stdout, stderr := raetdump(t, nil, append([]string{"-r", capture, "-q", "-flow", out}, keyArgs...)...)
	if code != exitOK {
		t.Fatalf("raetdump -flow: exit %d\n%s%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// svgShape parses an SVG and counts what the diagram is made of: arrows
// (one group per packet), lifelines, and the arrows of each class.
func svgShape(t *testing.T, svg string) (arrows, lifelines int, classes map[string]int, crosses int) {
	t.Helper()
	classes = map[string]int{}
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not well-formed XML: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		class := ""
		for _, a := range se.Attr {
			if a.Name.Local == "class" {
				class = a.Value
			}
		}
		switch {
		case se.Name.Local == "g":
			arrows++
		case se.Name.Local == "line" && class == "life":
			lifelines++
		case se.Name.Local == "line":
			classes[class]++
		case se.Name.Local == "path" && class == "cross":
			crosses++
		}
	}
	return arrows, lifelines, classes, crosses
}

// The diagram of the segmented capture (the reference profile, a message
// of 116 segments with 4 lost and asked for again, captured at the
// receiver), as a golden SVG: one arrow per packet between two lifelines,
// the 4 retransmissions dashed and marked as such whose first send the
// capture never saw, the resend request apart. The HTML page holds the
// same diagram.
func TestFlowGolden(t *testing.T) {
	dir := t.TempDir()
	keys := keyArgs("segmented", "main", "other")
	svg := flowOf(t, captures+"segmented.pcapng", filepath.Join(dir, "flow.svg"), keys...)
	golden(t, "flow-segmented.svg", svg)
	arrows, lifelines, classes, crosses := svgShape(t, svg)
	if arrows != 129 || lifelines != 2 || classes["resent"] != 4 || crosses != 0 || classes["request"] != 1 || classes["error"] != 0 ||
		strings.Count(svg, "↻ again, first not seen") != 4 {
		t.Fatalf("%d arrows, %d lifelines, lines by class %v, %d crosses", arrows, lifelines, classes, crosses)
	}
	if !strings.Contains(svg, ">main ") || !strings.Contains(svg, "seg 116/116") || !strings.Contains(svg, "↻ again") {
		t.Fatal("the lifelines' names or the segments' labels are missing")
	}
	page := flowOf(t, captures+"segmented.pcapng", filepath.Join(dir, "flow.html"), keys...)
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.Contains(page, strings.SplitN(svg, "<title>", 2)[1][:40]) {
		t.Fatalf("the page does not hold the diagram: %.300s", page)
	}
}

// lossyCapture runs two estates through a relay that loses a fifth of the
// datagrams each way; beta sends alpha a message of 40 segments and a few
// small ones, and its socket's traffic is the capture (with beta's key
// log), resends and all.
func lossyCapture(t *testing.T, dir string) (capture, keylog string) {
	testutil.CheckLeaks(t)
	capture, keylog = filepath.Join(dir, "lossy.pcapng"), filepath.Join(dir, "lossy.keys")
	f, err := os.Create(capture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pw, err := dissect.NewPcapngWriter(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := func(name string, main bool, tap func(road.TapPacket)) *road.Stack {
		s, err := road.New(&road.Config{Name: name, Main: main, Auto: keep.AutoAlways, Listen: "127.0.0.1:0",
			AlivePeriod: -1, Tap: tap, KeyLogFile: keylog})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	alpha := start("alpha", true, nil)
	defer alpha.Close()
	beta := start("beta", false, func(p road.TapPacket) { pw.Tap(dissect.RoadPacket(p)) })
	defer beta.Close()
	lossy := netsim.Impairment{Loss: 0.2, Seed: 35}
	relay, err := netsim.NewRelay(netip.MustParseAddrPort(alpha.Addr().String()), netip.MustParseAddrPort(beta.Addr().String()), lossy, lossy)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := beta.Join(ctx, relay.ForB().String())
	if err != nil {
		t.Fatal(err)
	}
	go func() { // alpha takes what comes
		for {
			select {
			case <-alpha.Receive():
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := beta.Send(ctx, r.Name, map[string]any{"blob": strings.Repeat("lossy ", 9000)}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := beta.Send(ctx, r.Name, map[string]any{"n": i}); err != nil {
			t.Fatal(err)
		}
	}
	beta.Close() // no datagram is tapped after it
	if err := pw.Err(); err != nil {
		t.Fatal(err)
	}
	return capture, keylog
}

// chromium renders a file with headless Chromium into a PNG screenshot and
// returns it decoded. The test's script installs Debian's chromium when it
// is missing and this runs as root (CI); elsewhere the test is skipped
// without it, in CI it fails.
func chromium(t *testing.T, file, shot string) image.Image {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		out, err := exec.Command("../../scripts/chromium.sh").Output()
		if err != nil {
			needFail(t, "no chromium (scripts/chromium.sh installs it as root)")
		}
		path = strings.TrimSpace(string(out))
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--user-data-dir="+t.TempDir(),
		"--hide-scrollbars", "--window-size=1000,1400", "--screenshot="+shot, "file://"+abs)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out.String())
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out.String())
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return img
}

// inked counts the screenshot's pixels that are not white, and those of
// the retransmissions' orange.
func inked(img image.Image) (ink, orange int) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if r < 240 || g < 240 || bl < 240 {
				ink++
			}
			if r > 150 && g > 60 && g < 150 && bl < 60 {
				orange++
			}
		}
	}
	return ink, orange
}

// -flow on make demo's capture and on a lossy one with resends: headless
// Chromium renders each SVG to a screenshot with the diagram drawn (ink on
// a fair share of it), the lossy one with its retransmissions in orange.
func TestFlowChromium(t *testing.T) {
	dir := t.TempDir()
	if d := os.Getenv("RAETDUMP_KEEP_FLOW"); d != "" {
		dir = d // to look at the screenshots after the test
	}
	_, demo := tools(t)
	demoPcap, demoKeys := filepath.Join(dir, "demo.pcapng"), filepath.Join(dir, "demo.keys")
	runTool(t, demo, "-pcap", demoPcap, "-keylog", demoKeys)
	lossy, lossyKeys := lossyCapture(t, dir)
	for _, c := range []struct {
		name, capture, keylog string
		resends               bool
	}{{"demo", demoPcap, demoKeys, false}, {"lossy", lossy, lossyKeys, true}} {
		svgPath := filepath.Join(dir, c.name+".svg")
		svg := flowOf(t, c.capture, svgPath, "-keylog", c.keylog)
		arrows, lifelines, classes, crosses := svgShape(t, svg)
		// Beta's own sends that the relay lost are seen, then sent again:
		// marked lost, with a cross.
		if arrows < 20 || lifelines != 2 || classes["error"] != 0 || (classes["resent"] > 0) != c.resends || (crosses > 0) != c.resends {
			t.Fatalf("%s: %d arrows, %d lifelines, lines by class %v, %d crosses", c.name, arrows, lifelines, classes, crosses)
		}
		img := chromium(t, svgPath, filepath.Join(dir, c.name+".png"))
		b := img.Bounds()
		ink, orange := inked(img)
		t.Logf("%s: %d arrows (by class %v), screenshot %dx%d, %d pixels inked, %d orange", c.name, arrows, classes, b.Dx(), b.Dy(), ink, orange)
		if b.Dx() < 500 || b.Dy() < 500 || ink < b.Dx()*b.Dy()/100 || (orange > 0) != c.resends {
			t.Fatalf("%s: screenshot %v with %d pixels inked, %d orange", c.name, b, ink, orange)
		}
	}
}
