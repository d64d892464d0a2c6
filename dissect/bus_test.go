package dissect_test

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/bus"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/lane"
	"github.com/raet-go/raet/protocol"
)

// busCapture runs a subscription, a request and a job between two lane
// yards and returns the client yard's traffic as a pcapng capture.
func busCapture(t *testing.T) []byte {
	dir, err := os.MkdirTemp("", "dbus")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	var buf bytes.Buffer
	pw, err := dissect.NewPcapngWriter(&buf, nil)
	if err != nil {
		t.Fatal(err)
	}
	yard := func(name string, tap func(lane.TapPacket)) (*bus.Node, func()) {
		s, err := lane.New(&lane.Config{Dir: dir, Name: name, Tap: tap})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		tr := bus.NewLane(s)
		n, err := bus.New(tr, &bus.Config{Heartbeat: -1})
		if err != nil {
			t.Fatal(err)
		}
		return n, func() { n.Close(); tr.Close(); s.Close() }
	}
	server, stopS := yard("server", nil)
	defer stopS()
	client, stopC := yard("client", func(p lane.TapPacket) { pw.TapLane(dissect.LanePacket(p)) })
	defer stopC()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := server.Serve("svc.*", func(ctx context.Context, r *bus.Request) (any, error) { return r.Body, nil }, nil); err != nil {
		t.Fatal(err)
	}
	s, err := client.Subscribe("server", []string{"a.>"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-s.Ready()
	if _, err := server.Publish(ctx, bus.Pub{Subject: "a.b", Body: map[string]any{"x": 1}}); err != nil {
		t.Fatal(err)
	}
	<-s.Messages()
	if _, err := client.Request(ctx, "server", "svc.echo", map[string]any{"q": 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Pull([]string{"server"}, 1, func(ctx context.Context, j *bus.Job) (any, error) { return "ok", nil }); err != nil {
		t.Fatal(err)
	}
	for { // the ready reaches the pusher: then push
		if st := server.Stats().Pusher; st.Pushed == 0 {
			if _, err := server.Push(ctx, "work", map[string]any{"j": 1}); err != nil {
				t.Fatal(err)
			}
		}
		r := <-server.Results()
		if r.Body == "ok" {
			break
		}
	}
	stopC() // its goroutines, and the taps of its sends, end
	if err := pw.Err(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The dissector shows bus envelopes and follows a request (and a job) to
// its reply.
func TestDissectBus(t *testing.T) {
	capture := busCapture(t)
	d := dissect.NewDissector(nil)
	byKind := map[protocol.BusKind]*dissect.Packet{}
	var reqN, jobN int
	var lines []string
	// A page sent is tapped after the kernel took it, so its answer, read
	// meanwhile, may come first in the capture; their times are in order.
	recs := readAll(t, bytes.NewReader(capture))
	slices.SortStableFunc(recs, func(a, b dissect.Record) int { return a.Time.Compare(b.Time) })
	for _, rec := range recs {
		p := d.Decode(rec)
		if p == nil || p.Err != nil {
			t.Fatalf("packet %+v", p)
		}
		if p.Bus == nil {
			t.Fatalf("packet %d: no envelope in %v", p.N, p.Body)
		}
		cp := *p
		byKind[p.Bus.Envelope.Kind] = &cp
		switch p.Bus.Envelope.Kind {
		case protocol.BusKindReq:
			reqN = p.N
		case protocol.BusKindJob:
			jobN = p.N
		}
		lines = append(lines, string(p.AppendJSON(nil)))
	}
	pub := byKind[protocol.BusKindPub]
	if pub == nil || pub.Bus.Envelope.Subject != "a.b" || pub.Bus.Envelope.Seq != 1 || !strings.Contains(pub.Bus.Summary(), "BUS pub id ") || !strings.Contains(pub.Bus.Summary(), " subject a.b seq 1 index 1") {
		t.Fatalf("pub: %+v", pub)
	}
	rep, done := byKind[protocol.BusKindRep], byKind[protocol.BusKindDone]
	if rep == nil || rep.Bus.ReplyTo != reqN || reqN == 0 || !strings.Contains(rep.Bus.Summary(), "reply to #") {
		t.Fatalf("rep %+v, request #%d\n%s", rep, reqN, strings.Join(lines, "\n"))
	}
	if done == nil || done.Bus.ReplyTo != jobN || jobN == 0 {
		t.Fatalf("done %+v, job #%d", done, jobN)
	}
	js := string(rep.AppendJSON(nil))
	if !strings.Contains(js, `"bus":{"kind":"rep","id":`) || !strings.Contains(js, `"reply_to":`) {
		t.Fatalf("JSON %s", js)
	}
	// Named fields, the content as body, and no HTML escaping: the
	// filter reads "a.>", not "a.\u003e".
	js = string(byKind[protocol.BusKindSub].AppendJSON(nil))
	if !strings.Contains(js, `"bus":{"kind":"sub","id":`) || !strings.Contains(js, `"filters":["a.>"]`) || strings.Contains(js, `"fi"`) {
		t.Fatalf("sub JSON %s", js)
	}
	if js = string(pub.AppendJSON(nil)); !strings.Contains(js, `"subject":"a.b","seq":1,"index":1,"time":`) || !strings.Contains(js, `"body":{"x":1}}`) {
		t.Fatalf("pub JSON %s", js)
	}
	for _, k := range []protocol.BusKind{protocol.BusKindHello, protocol.BusKindSub, protocol.BusKindSubOK, protocol.BusKindReq, protocol.BusKindReady} {
		if byKind[k] == nil {
			t.Errorf("no %v envelope in the capture", k)
		}
	}
}

// The Lua dissector shows the same envelopes as the Go one.
func TestTsharkBus(t *testing.T) {
	tshark := needTshark(t)
	path := t.TempDir() + "/bus.pcapng"
	capture := busCapture(t)
	if err := os.WriteFile(path, capture, 0o600); err != nil {
		t.Fatal(err)
	}
	rows := tsharkFields(t, tshark, path, []string{"raet_bus.ek", "raet_bus.id", "raet_bus.sj", "raet_bus.sq", "raet_bus.error"})
	d := dissect.NewDissector(nil)
	n := 0
	// In the capture's order, as tshark numbers its frames (not by time: a
	// page sent carries the time its sending began, and its answer may be
	// written before it); no field compared here needs the request first.
	for _, rec := range readAll(t, bytes.NewReader(capture)) {
		p := d.Decode(rec)
		e := p.Bus.Envelope
		want := []string{strconv.Itoa(int(e.Kind)), "", e.Subject, "", ""}
		if e.ID != 0 {
			want[1] = strconv.FormatUint(e.ID, 10)
		}
		if e.Seq != 0 {
			want[3] = strconv.FormatUint(e.Seq, 10)
		}
		if got := rows[p.N]; !slices.Equal(got, want) {
			t.Errorf("frame %d (%v): tshark %q, want %q", p.N, e.Kind, got, want)
		}
		n++
	}
	if n < 8 {
		t.Fatalf("only %d frames", n)
	}
}
