package keep

import (
	"errors"
	"strings"
)

// Sentinel errors. Branch on them with errors.Is.
var (
	// ErrCorrupt means a keep file could not be used: it is not valid UTF-8
	// JSON, not one object, or its field set, types or values are not the
	// expected ones. The file has been renamed aside (see FileError.Aside),
	// unless the keep was opened by OpenReadOnly.
	ErrCorrupt = errors.New("keep: corrupt file")

	// ErrInvalid means a record given to a Save method, or a value given to
	// another method, cannot be written as it is.
	ErrInvalid = errors.New("keep: invalid value")

	// ErrReadOnly means a write to a keep opened by OpenReadOnly.
	ErrReadOnly = errors.New("keep: opened read-only")

	// ErrInvalidName means an estate name or role cannot be used as a file
	// name (see CheckName). It wraps ErrInvalid.
	ErrInvalidName error = &wrapErr{msg: "keep: invalid name", inner: ErrInvalid}
)

// wrapErr is a sentinel that also matches a more general sentinel.
type wrapErr struct {
	msg   string
	inner error
}

func (e *wrapErr) Error() string { return e.msg }
func (e *wrapErr) Unwrap() error { return e.inner }

// FileError reports a failure on one keep file. Err says what went wrong: it
// wraps ErrCorrupt for a file that was refused, fs.ErrNotExist for a missing
// file, or the operating system's error.
type FileError struct {
	Op    string // "load", "save", "delete" or "list"
	Path  string // the file (or directory, for "list")
	Aside string // for a corrupt file, where it was moved; "" if it was not moved
	Err   error
}

// Error returns "keep: <op> <path>: <err>" followed, for a file moved aside,
// by "; moved aside to <aside>".
func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString("keep: ")
	b.WriteString(e.Op)
	b.WriteString(" ")
	b.WriteString(e.Path)
	b.WriteString(": ")
	if e.Err != nil {
		b.WriteString(strings.TrimPrefix(e.Err.Error(), "keep: "))
	} else {
		b.WriteString("unknown error")
	}
	if e.Aside != "" {
		b.WriteString("; moved aside to ")
		b.WriteString(e.Aside)
	}
	return b.String()
}

// Unwrap returns Err.
func (e *FileError) Unwrap() error { return e.Err }
