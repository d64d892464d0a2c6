package dissect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// A stack records its own traffic, without privileges, through its tap.
func ExamplePcapngWriter() {
	f, err := os.Create("road.pcapng")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	pw, err := dissect.NewPcapngWriter(f, nil)
	if err != nil {
		panic(err)
	}
	s, err := road.New(&road.Config{Name: "main", Main: true, Listen: "127.0.0.1:7530",
		Tap: func(p road.TapPacket) { pw.Tap(dissect.RoadPacket(p)) }, KeyLogFile: "road.keylog"})
	if err != nil {
		panic(err)
	}
	if err := s.Start(); err != nil {
		panic(err)
	}
	// ... the stack works ...
	s.Close()
	if err := pw.Err(); err != nil {
		fmt.Println("capture:", err)
	}
	// Then: raetdump -r road.pcapng -keylog road.keylog
}

// Dissect a capture: one JSON object per RAET packet, then the summary.
func ExampleDissector() {
	f, err := os.Open("testdata/lane.pcapng")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	cr, err := dissect.NewCaptureReader(f)
	if err != nil {
		panic(err)
	}
	d := dissect.NewDissector(nil) // or with a KeyRing of keeps and key logs
	var p dissect.Packet
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fmt.Println(err) // a truncated or corrupt file: what was read still counts
			break
		}
		if d.DecodeInto(rec, &p) && p.HasBody {
			body, _ := json.Marshal(p.Body)
			fmt.Printf("%s > %s: %s\n", p.LaneHead.Source, p.LaneHead.Destination, body)
		}
	}
	d.Flush()
	fmt.Println(d.Stats().Lane, "lane pages")
	// Output:
	// alpha > beta: {"subject":"lane hello","n":1}
	// beta > alpha: {"subject":"msgpack reply","ok":true}
	// alpha > beta: {"subject":"a book of three pages","text":"lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane lane "}
	// 5 lane pages
}

// Two stacks on loopback, the joiner writing its transaction log live; a
// capture of the same traffic gives the same lines (raetdump -txlog).
func ExampleTxLogTap() {
	m, err := road.New(&road.Config{Name: "main", Main: true, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1})
	if err != nil {
		panic(err)
	}
	if err := m.Start(); err != nil {
		panic(err)
	}
	defer m.Close()

	var log bytes.Buffer
	tl := dissect.NewTxLogTap(&log, nil)
	o, err := road.New(&road.Config{Name: "other", Listen: "127.0.0.1:0", AlivePeriod: -1,
		Tap: func(p road.TapPacket) { tl.Tap(dissect.RoadPacket(p)) }})
	if err != nil {
		panic(err)
	}
	if err := o.Start(); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := o.Join(ctx, m.Addr().String()); err != nil {
		panic(err)
	}
	o.Close()
	if err := tl.Close(); err != nil {
		panic(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(log.String()), "\n") {
		var l dissect.TxLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			panic(err)
		}
		if l.Ev == "done" && (l.Kind == "join" || l.Kind == "allow") {
			fmt.Println(l.Txn, l.Ev, l.Kind)
		}
	}
	// Output:
	// 1 done join
	// 2 done allow
}

// Open a capture's coats with a stack's key log (docs/keylog.md), and read
// every packet of each frame: a capture on lo holds UDP GSO
// super-datagrams, several packets in one frame, which Next gives after
// the first.
func ExampleDissector_Next() {
	keys := dissect.NewKeyRing()
	if err := keys.AddKeyLogFile("testdata/segmented.keylog"); err != nil {
		panic(err)
	}
	f, err := os.Open("testdata/segmented.pcapng")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	cr, err := dissect.NewCaptureReader(f)
	if err != nil {
		panic(err)
	}
	d := dissect.NewDissector(&dissect.Config{Keys: keys})
	var p dissect.Packet
	packets := 0
	for {
		rec, err := cr.Next()
		if err != nil {
			break // io.EOF at the end
		}
		for ok := d.DecodeInto(rec, &p); ok; ok = d.Next(&p) {
			packets++
		}
	}
	d.Flush()
	st := d.Stats()
	fmt.Println(packets, "packets,", st.Opened, "bodies read,", st.Sealed, "sealed")
	// Output: 129 packets, 14 bodies read, 0 sealed
}
