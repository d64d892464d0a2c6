package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/dissect"
)

// make demo as a test: the demo runs, and its capture decodes with no error
// when the keeps and the key log are given (as the Makefile's raetdump lines
// do), with the small messages in bundles and their dones in answers
// packets.
func TestDemo(t *testing.T) {
	dir := t.TempDir()
	pcap, keylog, keeps := filepath.Join(dir, "demo.pcapng"), filepath.Join(dir, "keys.log"), filepath.Join(dir, "keeps")
	if err := run(pcap, keylog, keeps, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	keys := dissect.NewKeyRing()
	for _, name := range []string{"alpha", "beta"} {
		if err := keys.AddKeep(filepath.Join(keeps, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := keys.AddKeyLogFile(keylog); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(pcap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cr, err := dissect.NewCaptureReader(f)
	if err != nil {
		t.Fatal(err)
	}
	d := dissect.NewDissector(&dissect.Config{Keys: keys})
	var p dissect.Packet
	n, bundles, answers := 0, 0, 0
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if d.DecodeInto(rec, &p) {
			n++
			if p.Err != nil {
				t.Errorf("packet %d: %v", n, p.Err)
			}
			switch p.Head.PacketKind {
			case codec.PacketKindBundle:
				bundles++
			case codec.PacketKindAnswers:
				answers++
			}
			// A bundle the key log opens shows each of its messages.
			for _, m := range p.Bundle {
				if !m.HasBody || m.Err != nil {
					t.Errorf("packet %d: bundled message ti %d not opened: %v", n, m.TI, m.Err)
				}
			}
		}
	}
	d.Flush()
	st := d.Stats()
	if n == 0 || st.Errors != 0 || st.VerifyFailed != 0 {
		t.Fatalf("%d packets, %d errors %v, %d feet failed", n, st.Errors, st.ErrorReasons, st.VerifyFailed)
	}
	// The default profile's AEAD coat, every one opened with the key log.
	if st.AEAD == 0 || st.AEADOpened != st.AEAD || st.Sealed != 0 {
		t.Errorf("%d AEAD coats, %d opened, %d bodies sealed", st.AEAD, st.AEADOpened, st.Sealed)
	}
	// Every message is seen done: its done alone, in an answers packet or
	// in a bundle, all readable with the key log.
	if m := st.Txns[codec.TransactionKindMessage]; m.Count == 0 || m.Done != m.Count {
		t.Errorf("message transactions %d, done %d", m.Count, m.Done)
	}
	// The small messages go in bundles, their dones in answers.
	if bundles == 0 || answers == 0 {
		t.Errorf("%d bundles and %d answers packets in the capture", bundles, answers)
	}
}
