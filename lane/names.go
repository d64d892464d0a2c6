package lane

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SessionIDLen is the length of a session id (the head field si).
const SessionIDLen = 18

// socketExt is the extension of a yard's socket file.
const socketExt = ".uxd"

// checkName checks what every name must be to go both in a page head and in
// a file name: non-empty printable ASCII without spaces or '/'.
func checkName(s string) error {
	if s == "" || s == "." || s == ".." {
		return ErrBadName
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '/' {
			return ErrBadName
		}
	}
	return nil
}

// checkLaneName checks a lane name. It may contain dots: a socket file's
// stem is split at its last dot.
func checkLaneName(s string) error { return checkName(s) }

// checkYardName checks a yard name: no dots, so that the receiver can
// recover it from the socket path.
func checkYardName(s string) error {
	if err := checkName(s); err != nil {
		return err
	}
	if strings.IndexByte(s, '.') >= 0 {
		return ErrBadName
	}
	return nil
}

// SocketPath returns the socket path of yard name in lane under dir:
// <dir>/<lane>.<name>.uxd.
func SocketPath(dir, lane, name string) string {
	return filepath.Join(dir, lane+"."+name+socketExt)
}

// namesFromPath splits a socket path <dir>/<lane>.<yard>.uxd into its lane
// and yard names, splitting the stem at its last dot as the reference
// does. Unnamed and abstract addresses give ok false.
func namesFromPath(p string) (lane, yard string, ok bool) {
	if p == "" || p[0] == '@' || p[0] == 0 {
		return "", "", false
	}
	stem, found := strings.CutSuffix(filepath.Base(p), socketExt)
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(stem, '.')
	if i <= 0 || i == len(stem)-1 {
		return "", "", false
	}
	return stem[:i], stem[i+1:], true
}

// newSessionID returns an 18-character session id as the reference makes
// them: the microseconds since the epoch in lowercase hex, then random hex.
func newSessionID() string {
	var b [SessionIDLen]byte
	front := strconv.AppendInt(b[:0], time.Now().UnixMicro(), 16)
	n := min(len(front), SessionIDLen)
	var r [SessionIDLen / 2]byte
	rand.Read(r[:]) // never fails (crypto/rand)
	var h [SessionIDLen]byte
	hex.Encode(h[:], r[:])
	copy(b[n:], h[:])
	return string(b[:])
}
