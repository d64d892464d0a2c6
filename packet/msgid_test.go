package packet

import (
	"bytes"
	"testing"
)

func TestMessageIDRoundTrip(t *testing.T) {
	for _, id := range []MsgID{{}, {Stream: 1, Seq: 1, Floor: 1}, {Stream: ^uint64(0), Seq: 1 << 40, Floor: 7}} {
		b := AppendMessageID(nil, id, []byte(`{"a":1}`))
		got, body, err := SplitMessageID(b)
		if err != nil || got != id || string(body) != `{"a":1}` {
			t.Fatalf("%+v: got %+v %q %v", id, got, body, err)
		}
	}
	for _, bad := range [][]byte{nil, {2}, {'{'}, {1, 0x80}, {1, 1, 0, 0}, {1, 1, 2, 3}} {
		if _, _, err := SplitMessageID(bad); err != ErrMessageID {
			t.Fatalf("%x: %v, want ErrMessageID", bad, err)
		}
	}
}

// FuzzSplitMessageID: any plain coat either fails or splits into an id and
// a body that build the same bytes again.
func FuzzSplitMessageID(f *testing.F) {
	f.Add(AppendMessageID(nil, MsgID{}, []byte("x")))
	f.Add(AppendMessageID(nil, MsgID{Stream: 9, Seq: 300, Floor: 299}, []byte(`{"k":"v"}`)))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, body, err := SplitMessageID(b)
		if err != nil {
			return
		}
		if id.Seq == 0 {
			if !bytes.Equal(AppendMessageID(nil, id, body), b) {
				t.Fatalf("%x: does not build again", b)
			}
			return
		}
		// Varints may have longer forms than the ones written: the id and
		// body must survive the round trip.
		again, rest, err := SplitMessageID(AppendMessageID(nil, id, body))
		if err != nil || again != id || !bytes.Equal(rest, body) {
			t.Fatalf("%x: %+v %x -> %+v %x %v", b, id, body, again, rest, err)
		}
	})
}
