// Package convert translates between the SDK's plain Go values and the
// generated protobuf messages, errors included: a sentinel error returned
// by a plugin crosses the process boundary as a code and arrives on the
// host as an error that errors.Is still matches.
package convert

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/raet-go/raet/packet"
	pb "github.com/raet-go/raet/plugins/proto"
)

// Sentinels of the plugin layer that package packet does not have. Package
// sdk exports them.
var (
	ErrQueueFull = errors.New("raet: plugin: queue full")
	ErrTooLarge  = errors.New("raet: plugin: item or batch too large")
	ErrInvalid   = errors.New("raet: plugin: invalid request")
)

// sentinels maps each code to the error it stands for, in the order
// ErrCode tries them.
var sentinels = []struct {
	code pb.ErrorCode
	err  error
}{
	{pb.ErrorCode_ERROR_CODE_MALFORMED, packet.ErrMalformedBody},
	{pb.ErrorCode_ERROR_CODE_NOT_MAPPING, packet.ErrNotMapping},
	{pb.ErrorCode_ERROR_CODE_UNSUPPORTED, packet.ErrUnsupportedValue},
	{pb.ErrorCode_ERROR_CODE_COAT_OPEN, packet.ErrCoatOpen},
	{pb.ErrorCode_ERROR_CODE_COAT_SHORT, packet.ErrCoatShort},
	{pb.ErrorCode_ERROR_CODE_WEAK_KEY, packet.ErrWeakKey},
	{pb.ErrorCode_ERROR_CODE_QUEUE_FULL, ErrQueueFull},
	{pb.ErrorCode_ERROR_CODE_TOO_LARGE, ErrTooLarge},
	{pb.ErrorCode_ERROR_CODE_INVALID, ErrInvalid},
}

// ErrCode returns the code of the first sentinel err matches.
func ErrCode(err error) pb.ErrorCode {
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	return pb.ErrorCode_ERROR_CODE_UNKNOWN
}

// RemoteError is an error returned by a plugin, as the host sees it: the
// plugin's text, matching (errors.Is) the sentinel of its code.
type RemoteError struct {
	Code pb.ErrorCode
	Msg  string
}

// Error returns the plugin's text.
func (e *RemoteError) Error() string { return e.Msg }

// Unwrap returns the sentinel of the code, or nil.
func (e *RemoteError) Unwrap() error {
	for _, s := range sentinels {
		if s.code == e.Code {
			return s.err
		}
	}
	return nil
}

// ToProto converts an error for the wire; nil stays nil.
func ToProto(err error) *pb.Error {
	if err == nil {
		return nil
	}
	return &pb.Error{Code: ErrCode(err), Message: err.Error()}
}

// FromProto converts a wire error back; nil stays nil.
func FromProto(e *pb.Error) error {
	if e == nil {
		return nil
	}
	msg := e.GetMessage()
	if msg == "" {
		msg = "raet: plugin error " + e.GetCode().String()
	}
	return &RemoteError{Code: e.GetCode(), Msg: msg}
}

// ToStatus converts an error of a whole call into a gRPC status error that
// carries its code as a detail. Context errors keep their gRPC codes.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	gc := codes.Unknown
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		gc = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		gc = codes.Canceled
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrTooLarge):
		gc = codes.InvalidArgument
	case errors.Is(err, ErrQueueFull):
		gc = codes.ResourceExhausted
	}
	st := status.New(gc, err.Error())
	if d, derr := st.WithDetails(ToProto(err)); derr == nil {
		st = d
	}
	return st.Err()
}

// FromStatus converts the error of a gRPC call: a status carrying a plugin
// error becomes a *RemoteError; anything else (transport failures,
// deadlines) is returned unchanged for the host to classify.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if e, ok := d.(*pb.Error); ok {
			return FromProto(e)
		}
	}
	return err
}

// Result is one item's outcome, the SDK's sdk.Result.
type Result struct {
	Data []byte
	Err  error
}

// ResultsToProto converts the results of a batch.
func ResultsToProto(rs []Result) *pb.Results {
	out := &pb.Results{Items: make([]*pb.Item, len(rs))}
	for i, r := range rs {
		out.Items[i] = &pb.Item{Data: r.Data, Error: ToProto(r.Err)}
	}
	return out
}

// ResultsFromProto converts the results of a batch of n items; a count
// that differs is an ErrInvalid error.
func ResultsFromProto(in *pb.Results, n int) ([]Result, error) {
	if len(in.GetItems()) != n {
		return nil, fmt.Errorf("%w: the plugin returned %d results for %d items", ErrInvalid, len(in.GetItems()), n)
	}
	out := make([]Result, n)
	for i, it := range in.GetItems() {
		out[i] = Result{Data: it.GetData(), Err: FromProto(it.GetError())}
	}
	return out, nil
}
