package dissect_test

import (
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
	"github.com/raet-go/raet/packet"
)

// bundleCapture writes a capture made with the packet-level code: one
// bundle of five messages from a to b, the same bundle's last two entries
// again in a second bundle (a resend) that piggybacks a done for b's
// message 90, and one answers packet from b that finishes all five.
func bundleCapture(t testing.TB) string {
	t.Helper()
	a, b := netip.MustParseAddrPort("127.0.0.1:7530"), netip.MustParseAddrPort("127.0.0.1:7531")
	path := filepath.Join(t.TempDir(), "bundle.pcapng")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := dissect.NewPcapngWriter(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, hk := range []codec.HeadKind{codec.HeadKindBinary, codec.HeadKindRaet} {
		hc, err := codec.Lookup(hk)
		if err != nil {
			t.Fatal(err)
		}
		pk := &packet.Packer{Codec: hc, Foot: packet.NadaFoot{}, MaxPacketSize: 1400}
		var h codec.Head
		h.Reset()
		h.SourceID, h.DestinationID, h.SessionID, h.BodyKind = 2, 3, 1, codec.BodyKindJSON
		if hk == codec.HeadKindRaet {
			h.SessionID = 2 // a second session: new transactions
		}
		bd := &packet.Bundler{Packer: pk}
		bd.Reset(&h)
		for ti := uint32(10); ti < 15; ti++ {
			if err := bd.Add(packet.BundleEntry{TI: ti, BodyKind: codec.BodyKindJSON, Plain: jsonOfLen(int(ti))}); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Unix(1700000000, 0)
		d1, err := bd.Flush(nil)
		if err != nil {
			t.Fatal(err)
		}
		for ti := uint32(13); ti < 15; ti++ {
			if err := bd.Add(packet.BundleEntry{TI: ti, Flags: codec.FlagAgain, BodyKind: codec.BodyKindJSON, Plain: jsonOfLen(int(ti))}); err != nil {
				t.Fatal(err)
			}
		}
		list, err := packet.AppendAnswers(nil, []packet.AnswerRange{{Kind: codec.PacketKindDone, First: 90, Count: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := bd.SetAnswers(list); err != nil {
			t.Fatal(err)
		}
		d2, err := bd.Flush(nil)
		if err != nil {
			t.Fatal(err)
		}
		hb := h
		hb.SourceID, hb.DestinationID = 3, 2
		d3, err := pk.PackAnswers(nil, &hb, []packet.AnswerRange{{Kind: codec.PacketKindDone, First: 10, Count: 5}})
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range []struct {
			src, dst netip.AddrPort
			d        []byte
		}{{a, b, d1}, {a, b, d2}, {b, a, d3}} {
			if err := w.WriteRoad(t0.Add(time.Duration(i)*time.Millisecond), x.src, x.dst, x.d); err != nil {
				t.Fatal(err)
			}
		}
	}
	return path
}

// jsonOfLen is a JSON body of n bytes (n ≥ 10): {"x":"xx…"}.
func jsonOfLen(n int) []byte {
	return []byte(`{"x":"` + strings.Repeat("x", n-8) + `"}`)
}

func TestDissectBundle(t *testing.T) {
	f, err := os.Open(bundleCapture(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := dissect.NewCaptureReader(f)
	if err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(nil)
	for n := 0; ; n++ {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := d.Decode(rec)
		if p.Err != nil {
			t.Fatalf("frame %d: %v", p.N, p.Err)
		}
		switch n % 3 {
		case 0:
			if len(p.Bundle) != 5 || p.Bundle[0].TI != 10 || p.Bundle[4].Len != 14 || p.Bundle[2].Note.Txn == nil {
				t.Fatalf("frame %d: bundle %+v", p.N, p.Bundle)
			}
			for _, m := range p.Bundle {
				if m.Note.Txn.TID != m.TI || m.Note.Txn.Kind != codec.TransactionKindMessage || !m.Note.Initiator {
					t.Fatalf("entry %d: txn %+v", m.TI, m.Note.Txn)
				}
				// A plain coat: each body is decoded.
				if x, _ := m.Body.Get("x"); !m.HasBody || m.Err != nil || x != strings.Repeat("x", int(m.TI)-8) {
					t.Fatalf("entry %d: body %v (%v, %v)", m.TI, m.Body, m.HasBody, m.Err)
				}
			}
		case 1:
			if len(p.Bundle) != 2 || !p.Bundle[0].Note.Retransmit || len(p.Answers) != 1 || p.Answers[0].First != 90 {
				t.Fatalf("frame %d: resend %+v answers %+v", p.N, p.Bundle, p.Answers)
			}
		case 2:
			if len(p.Answers) != 1 || p.Answers[0].Count != 5 {
				t.Fatalf("frame %d: answers %+v", p.N, p.Answers)
			}
			// Each transaction it answers is ended by it, in order.
			if len(p.Answered) != 5 {
				t.Fatalf("frame %d: %d answered, want 5", p.N, len(p.Answered))
			}
			for i, n := range p.Answered {
				if n.Txn == nil || n.Txn.TID != uint32(10+i) || n.Outcome != dissect.Done {
					t.Fatalf("frame %d: answered %d: %+v", p.N, i, n)
				}
			}
		}
		var js map[string]any
		if err := json.Unmarshal(p.AppendJSON(nil), &js); err != nil {
			t.Fatalf("frame %d: JSON: %v", p.N, err)
		}
		if _, ok := js["event"]; !ok {
			t.Fatalf("frame %d: no event in %v", p.N, js)
		}
	}
	d.Flush()
	// Each session: five messages done, and the piggybacked done of 90 (its
	// message is not in the capture, but its done ends it all the same).
	if got := d.Stats().Txns[codec.TransactionKindMessage].Done; got != 12 {
		t.Fatalf("done transactions %d, want 12 (%+v)", got, d.Stats().Txns[codec.TransactionKindMessage])
	}
}
