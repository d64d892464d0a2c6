package road

import (
	"errors"

	"github.com/raet-go/raet/road/internal/core"
)

// Errors returned by the stack's calls; test with errors.Is.
var (
	ErrClosed         = core.ErrClosed
	ErrNotStarted     = errors.New("raet: stack not started")
	ErrUnknownRemote  = core.ErrUnknownRemote
	ErrNotAllowed     = core.ErrNotAllowed
	ErrQueueFull      = errors.New("raet: send queue full")
	ErrTimeout        = core.ErrTimeout
	ErrRejected       = core.ErrRejected
	ErrRefused        = core.ErrRefused
	ErrRenewImmutable = core.ErrRenewImmutable
	ErrNotMapping     = errors.New("raet: message body is not a mapping, nor []byte or string")
	ErrSessionChanged = core.ErrSessionChanged
	ErrForgotten      = core.ErrForgotten
	ErrSocket         = errors.New("raet: the socket failed; the stack stopped")
)

// TxnError is a transaction that failed: its kind and remote, and why.
type TxnError = core.TxnError
