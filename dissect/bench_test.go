package dissect_test

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/raet-go/raet/dissect"
)

// benchCapture makes a capture of n copies of the road and segmented
// captures, one after the other in time.
func benchCapture(b *testing.B, copies int) ([]byte, int) {
	var recs []dissect.Record
	for _, name := range []string{"road", "segmented"} {
		recs = append(recs, readRecords(b, testdata(name+".pcapng"))...)
	}
	var buf bytes.Buffer
	pw, err := dissect.NewPcapngWriter(&buf, nil)
	if err != nil {
		b.Fatal(err)
	}
	start := recs[0].Time
	for c := 0; c < copies; c++ {
		shift := time.Duration(c) * time.Hour
		for _, r := range recs {
			r.Time = r.Time.Add(shift).Add(start.Sub(recs[0].Time))
			if err := pw.WriteRecord(r); err != nil {
				b.Fatal(err)
			}
		}
	}
	return buf.Bytes(), copies * len(recs)
}

func benchDissect(b *testing.B, keys *dissect.KeyRing) {
	data, n := benchCapture(b, 20)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		cr, err := dissect.NewCaptureReader(bytes.NewReader(data))
		if err != nil {
			b.Fatal(err)
		}
		d := dissect.NewDissector(&dissect.Config{Keys: keys})
		var p dissect.Packet
		got := 0
		for {
			rec, err := cr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if d.DecodeInto(rec, &p) {
				got++
			}
		}
		d.Flush()
		if got != n {
			b.Fatalf("%d packets, want %d", got, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/time.Since(start).Seconds(), "pkts/s")
}

// BenchmarkDissect reads, decodes and tracks a capture without keys: the
// heads, transactions and reassembly, no signature checks or decryption.
func BenchmarkDissect(b *testing.B) { benchDissect(b, nil) }

// BenchmarkDissectKeys adds the keeps (every foot verified) and the key
// log (every coat opened, every body decoded).
func BenchmarkDissectKeys(b *testing.B) {
	kr := dissect.NewKeyRing()
	for _, sc := range scenarios[:2] {
		for _, k := range sc.keeps {
			if err := kr.AddKeep(testdata(sc.name + ".keeps/" + k)); err != nil {
				b.Fatal(err)
			}
		}
		f, err := os.Open(testdata(sc.name + ".keylog"))
		if err != nil {
			b.Fatal(err)
		}
		if err := kr.AddKeyLog(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
	benchDissect(b, kr)
}

// BenchmarkLayer is the RAET layer alone on one 1 kB segment.
func BenchmarkLayer(b *testing.B) {
	data := unhex(b, vectorMessage)
	var r dissect.RAET
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := r.DecodeFromBytes(data, nil); err != nil {
			b.Fatal(err)
		}
	}
}
