package packet

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/raet-go/raet/codec"
)

// With an AEAD coat a bundle's whole coat (table, answers, payload) is
// sealed with the head as associated data and no foot: the bundles stay
// within the packet size, open with the other end's coat into a table and
// payload that ParseBundle and Open(nil) read back, and a bundle altered
// anywhere, or opened twice, does not open.
func TestBundleAEAD(t *testing.T) {
	for _, kind := range aeadKinds {
		t.Run(kind.String(), func(t *testing.T) {
			a, b := aeadPair(t, kind)
			hc, err := codec.Lookup(codec.HeadKindBinary)
			if err != nil {
				t.Fatal(err)
			}
			pk := &Packer{Codec: hc, Foot: NadaFoot{}, MaxPacketSize: 1400}
			bd := &Bundler{Packer: pk, AEAD: a}
			h := aeadHead()
			bd.Reset(&h)
			answers, err := AppendAnswers(nil, []AnswerRange{{Kind: codec.PacketKindDone, First: 3, Count: 4}})
			if err != nil {
				t.Fatal(err)
			}
			if err := bd.SetAnswers(answers); err != nil {
				t.Fatal(err)
			}
			var want []BundleEntry
			var ds [][]byte
			for i := range 60 {
				e := BundleEntry{TI: uint32(100 + i), BodyKind: codec.BodyKindJSON, Plain: bytes.Repeat([]byte{byte(i)}, 40+i)}
				want = append(want, e)
				err := bd.Add(e)
				if errors.Is(err, ErrBundleFull) {
					d, ferr := bd.Flush(nil)
					if ferr != nil {
						t.Fatal(ferr)
					}
					ds = append(ds, d)
					err = bd.Add(e)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			d, err := bd.Flush(nil)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
			if len(ds) < 2 {
				t.Fatalf("%d bundles", len(ds))
			}
			var got []BundleEntry
			for i, d := range ds {
				if len(d) > 1400 {
					t.Fatalf("bundle %d: %d bytes", i, len(d))
				}
				var p Packet
				if err := Parse(d, &p); err != nil {
					t.Fatal(err)
				}
				if p.Head.CoatKind != kind || p.Head.FootKind != codec.FootKindNada || len(p.Foot) != 0 {
					t.Fatalf("bundle %d: ck %v fk %v foot %d", i, p.Head.CoatKind, p.Head.FootKind, len(p.Foot))
				}
				for j := range d { // altered anywhere: refused
					bad := bytes.Clone(d)
					bad[j] ^= 0x01
					var q Packet
					if Parse(bad, &q) == nil && q.Head.CoatKind == kind {
						if _, err := q.OpenAEAD(nil, b); err == nil {
							t.Fatalf("bundle %d altered at %d opens", i, j)
						}
					}
				}
				plain, err := p.OpenAEAD(nil, b)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := p.OpenAEAD(nil, b); !errors.Is(err, ErrReplayed) {
					t.Fatalf("opened twice: %v", err)
				}
				var bu Bundle
				if err := ParseBundle(plain, &bu); err != nil {
					t.Fatal(err)
				}
				if rs, err := ParseAnswers(nil, bu.Answers); (i == 0) != (err == nil) || i == 0 && fmt.Sprint(rs) != "[{done 3 4}]" {
					t.Fatalf("bundle %d: answers %v (%v)", i, rs, err)
				}
				if _, err := bu.Open(nil, nil); err != nil {
					t.Fatal(err)
				}
				got = append(got, bu.Entries...)
			}
			if len(got) != len(want) {
				t.Fatalf("%d entries of %d", len(got), len(want))
			}
			for i := range want {
				if got[i].TI != want[i].TI || !bytes.Equal(got[i].Plain, want[i].Plain) {
					t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}
