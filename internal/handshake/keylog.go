package handshake

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/raet-go/raet/keys"
)

// KeyLogLabel starts every key-log entry.
const KeyLogLabel = "RAET_SESSION"

// ErrKeyLogSyntax means a key-log line is not a comment, blank, or
// "RAET_SESSION <hex> <hex> <hex>". A bad key is reported with the keys
// package's ErrLength or ErrNotHex instead.
var ErrKeyLogSyntax = errors.New("not a key-log line")

// KeyLogEntry is one session of a key log: one side's short-term pair and
// the other side's short-term public key. With them a dissector can open the
// coats of both directions of that session. Printed with %v, the private
// key shows as keys.PrivateKey's redacted placeholder.
type KeyLogEntry struct {
	OurShortPub   keys.PublicKey
	OurShortPriv  keys.PrivateKey
	TheirShortPub keys.PublicKey
}

// KeyLogError reports a bad line of a key log.
type KeyLogError struct {
	Line int   // 1-based line number
	Err  error // ErrKeyLogSyntax, keys.ErrLength, keys.ErrNotHex, ErrMismatch or a read error
}

// Error returns "handshake: key log line <n>: <err>".
func (e *KeyLogError) Error() string {
	return fmt.Sprintf("handshake: key log line %d: %v", e.Line, e.Err)
}

// Unwrap returns the cause.
func (e *KeyLogError) Unwrap() error { return e.Err }

// FormatKeyLog returns the key-log line of a session, newline included:
// "RAET_SESSION <our short pub> <our short priv> <their short pub>\n", each
// key as 64 lowercase hex digits. The line holds a secret; write it only
// where the operator asked for a key log.
func FormatKeyLog(ourShortPub keys.PublicKey, ourShortPriv keys.PrivateKey, theirShortPub keys.PublicKey) string {
	var b strings.Builder
	b.Grow(len(KeyLogLabel) + 3*(1+keys.HexLen) + 1)
	b.WriteString(KeyLogLabel)
	b.WriteByte(' ')
	b.WriteString(ourShortPub.Hex())
	b.WriteByte(' ')
	b.WriteString(ourShortPriv.Hex())
	b.WriteByte(' ')
	b.WriteString(theirShortPub.Hex())
	b.WriteByte('\n')
	return b.String()
}

// maxKeyLogLine bounds one line of a key log; an entry needs 208 bytes.
const maxKeyLogLine = 4096

// ParseKeyLog reads a key log: lines written by FormatKeyLog, in any order,
// with blank lines and comment lines (first non-blank character '#')
// allowed. Fields may be separated by any run of spaces or tabs, hex may be
// in either case, and a line may end in "\r\n". The last line need not end in
// a newline.
//
// Each entry's public key must derive from its private key (ErrMismatch
// otherwise), which catches swapped fields. It stops at the first bad line with a *KeyLogError giving its number, and
// returns the entries read before it. Error messages never contain the
// line's text, which may hold a private key.
func ParseKeyLog(r io.Reader) ([]KeyLogEntry, error) {
	var out []KeyLogEntry
	br := bufio.NewReaderSize(r, maxKeyLogLine)
	for line := 1; ; line++ {
		// A read error wins over the partial line before it.
		text, err := br.ReadSlice('\n')
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return out, &KeyLogError{Line: line, Err: fmt.Errorf("%w: longer than %d bytes", ErrKeyLogSyntax, maxKeyLogLine)}
		case err != nil && err != io.EOF:
			return out, &KeyLogError{Line: line, Err: err}
		}
		e, ok, perr := parseKeyLogLine(string(text))
		if perr != nil {
			return out, &KeyLogError{Line: line, Err: perr}
		}
		if ok {
			out = append(out, e)
		}
		if err == io.EOF {
			return out, nil
		}
	}
}

// parseKeyLogLine parses one line. ok is false for a blank or comment line.
func parseKeyLogLine(s string) (e KeyLogEntry, ok bool, err error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\n' })
	if len(f) == 0 || strings.HasPrefix(f[0], "#") {
		return KeyLogEntry{}, false, nil
	}
	if f[0] != KeyLogLabel {
		return KeyLogEntry{}, false, fmt.Errorf("%w: does not start with %s", ErrKeyLogSyntax, KeyLogLabel)
	}
	if len(f) != 4 {
		return KeyLogEntry{}, false, fmt.Errorf("%w: %d fields, want 4", ErrKeyLogSyntax, len(f))
	}
	if e.OurShortPub, err = keys.ParsePublicKey(f[1]); err != nil {
		return KeyLogEntry{}, false, fmt.Errorf("our short-term public key: %w", err)
	}
	if e.OurShortPriv, err = keys.ParsePrivateKey(f[2]); err != nil {
		return KeyLogEntry{}, false, fmt.Errorf("our short-term private key: %w", err)
	}
	if e.TheirShortPub, err = keys.ParsePublicKey(f[3]); err != nil {
		return KeyLogEntry{}, false, fmt.Errorf("their short-term public key: %w", err)
	}
	if pub, err := e.OurShortPriv.PublicKey(); err != nil || !pub.Equal(e.OurShortPub) {
		return KeyLogEntry{}, false, fmt.Errorf("%w: our short-term public key does not derive from the private key", ErrMismatch)
	}
	return e, true, nil
}
