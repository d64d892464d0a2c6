package core

import (
	"bytes"
	"testing"
	"time"
)

// mutations of datagram b: truncated, a byte changed at several places,
// cut in the head, grown, and twice over.
func mutations(b []byte) [][]byte {
	var out [][]byte
	for _, n := range []int{0, 1, 4, 10, 20, len(b) / 2, len(b) - 65, len(b) - 1} {
		if n >= 0 && n < len(b) {
			out = append(out, bytes.Clone(b[:n]))
		}
	}
	for _, i := range []int{0, 3, 8, 12, 16, 24, 30, 40, 60, len(b) / 2, len(b) - 70, len(b) - 30, len(b) - 1} {
		if i >= 0 && i < len(b) {
			for _, x := range []byte{0x01, 0x20, 0xff} {
				m := bytes.Clone(b)
				m[i] ^= x
				out = append(out, m)
			}
		}
	}
	out = append(out, append(bytes.Clone(b), 0), append(bytes.Clone(b), b...))
	return out
}

// Mutated copies of every datagram of a real join, allow and message
// exchange, in every profile, fed to a main estate with its session up: the
// fuzz target's invariants over a fixed corpus that reaches each way a
// datagram is refused. Nothing is delivered, what cannot be authenticated
// changes nothing of the session, and each is dropped with a reason (or
// answered).
func TestMutatedDatagrams(t *testing.T) {
	for _, tp := range profiles {
		seeds := fuzzPair(t, tp).wire
		p := fuzzPair(t, tp)
		r := p.mainRemote()
		delivered := len(p.delivered[p.main])
		reasons := map[string]bool{}
		for _, w := range seeds {
			for _, b := range mutations(w.b) {
				before := snapshot(r)
				drops := p.main.stats.drops
				auth := authentic(r, b)
				p.inject(p.main, b, p.otherAddr)
				if after := snapshot(r); !auth && after != before {
					t.Fatalf("an unauthenticated datagram changed the session:\n before %+v\n after  %+v", before, after)
				}
				for i, n := range p.main.stats.drops {
					if n > drops[i] {
						reasons[dropReason(i).String()] = true
					}
				}
			}
		}
		p.advance(time.Second)
		if n := len(p.delivered[p.main]) - delivered; n != 0 {
			t.Fatalf("delivered %d messages", n)
		}
		wants := []string{"not_raet", "head_syntax", "head_length", "head_truncated", "verify_failed", "verify_unknown_key", "foot_length", "join_body"}
		if tp == aeadProfile {
			// No foot after the allow: what a mutation of a session's
			// packet meets is the AEAD.
			wants = []string{"not_raet", "head_syntax", "head_length", "head_truncated", "verify_failed", "aead_open_failed", "join_body"}
		}
		for _, want := range wants {
			if !reasons[want] {
				t.Errorf("%s: no datagram dropped as %s (reasons: %v)", tp.name, want, reasons)
			}
		}
		p.stillWorks(t, len(p.delivered[p.main]))
	}
}
