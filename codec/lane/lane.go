// Package lane encodes and decodes the page head of RAET's lane, the
// same-host transport over Unix datagram sockets. The head is generated
// from spec/raet.yaml; see docs/wire.md.
package lane

import (
	"fmt"

	"github.com/raet-go/raet/codec"
)

// Error is a lane page head that could not be encoded or decoded. It wraps
// one of the codec package's reasons (codec.ErrSyntax, codec.ErrMissing, ...).
type Error struct {
	Field  string // the two-letter key, or empty
	Offset int    // the byte offset in the input
	Err    error
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("raet: lane page head: at byte %d: %v", e.Offset, e.Err)
	}
	return fmt.Sprintf("raet: lane page head: field %s at byte %d: %v", e.Field, e.Offset, e.Err)
}

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

// checkString checks a string field: non-empty ASCII without spaces or
// newlines, exactly width characters when width > 0.
func checkString(s string, width int) error {
	if s == "" || (width > 0 && len(s) != width) {
		return codec.ErrValue
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return codec.ErrValue
		}
	}
	return nil
}
