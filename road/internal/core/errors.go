package core

import (
	"errors"
	"fmt"
)

// Errors of the transactions, which road re-exports; test with errors.Is.
var (
	ErrClosed         = errors.New("raet: stack closed")
	ErrUnknownRemote  = errors.New("raet: unknown remote")
	ErrNotAllowed     = errors.New("raet: remote not allowed")
	ErrTimeout        = errors.New("raet: transaction timed out")
	ErrRejected       = errors.New("raet: rejected by the remote")
	ErrRefused        = errors.New("raet: refused by the remote")
	ErrRenewImmutable = errors.New("raet: the remote asks for a renewed join, which an immutable road does not allow")
	ErrSessionChanged = errors.New("raet: session changed before the message was done")
	ErrForgotten      = errors.New("raet: the remote was forgotten (silent, or too many remotes)")
)

// TxnError is a transaction that failed: its kind and remote, and why.
type TxnError struct {
	Txn    string // "join", "allow", "alive", "message"
	Remote string // the remote's name (or address before a join)
	Err    error
}

func (e *TxnError) Error() string { return fmt.Sprintf("raet: %s with %s: %v", e.Txn, e.Remote, e.Err) }

// Unwrap returns the reason.
func (e *TxnError) Unwrap() error { return e.Err }

// errCoatKind refuses a packet whose coat is not its session's.
var errCoatKind = errors.New("raet: coat kind is not the session's")
