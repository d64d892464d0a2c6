package packet

import (
	"encoding/binary"
	"errors"
)

// A message id envelope (raet-go only; negotiated as "mid" in the join caps)
// goes inside a message's coat, before the serialized body, between two
// estates that both advertised it:
//
//	0x01 uvarint(stream) uvarint(seq) uvarint(floor) body…   an id
//	0x00 body…                                                no id
//
// Neither first byte can begin a JSON, msgpack or CBOR mapping, so a reader
// that did not see the join (a capture cut short) can still tell an
// envelope from a bare mapping body. Package road documents what the ids
// mean (a sender's stable id across its restarts).

// MsgID is a message's stable id: the sender's id space (Stream), its
// number there (Seq; 0 is none) and the smallest number the sender has not
// yet seen done (Floor).
type MsgID struct{ Stream, Seq, Floor uint64 }

// ErrMessageID is returned by SplitMessageID for a plain coat that does not
// begin with a well-formed message id envelope.
var ErrMessageID = errors.New("bad message id envelope")

// AppendMessageID appends the envelope of id and then body to dst.
func AppendMessageID(dst []byte, id MsgID, body []byte) []byte {
	if id.Seq == 0 {
		dst = append(dst, 0)
	} else {
		dst = append(dst, 1)
		dst = binary.AppendUvarint(dst, id.Stream)
		dst = binary.AppendUvarint(dst, id.Seq)
		dst = binary.AppendUvarint(dst, id.Floor)
	}
	return append(dst, body...)
}

// SplitMessageID splits a plain coat into its message id and body; body
// aliases plain.
func SplitMessageID(plain []byte) (MsgID, []byte, error) {
	if len(plain) == 0 {
		return MsgID{}, nil, ErrMessageID
	}
	switch plain[0] {
	case 0:
		return MsgID{}, plain[1:], nil
	case 1:
	default:
		return MsgID{}, nil, ErrMessageID
	}
	rest := plain[1:]
	var v [3]uint64
	for i := range v {
		x, n := binary.Uvarint(rest)
		if n <= 0 {
			return MsgID{}, nil, ErrMessageID
		}
		v[i], rest = x, rest[n:]
	}
	id := MsgID{Stream: v[0], Seq: v[1], Floor: v[2]}
	if id.Seq == 0 || id.Floor > id.Seq {
		return MsgID{}, nil, ErrMessageID
	}
	return id, rest, nil
}
