package host

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/plugins/sdk"
	"github.com/raet-go/raet/queue"
)

// DefaultTimeout bounds the adapters' calls made through interfaces
// without a context (packet.Serializer, packet.Coat, queue.Queue) when
// their constructor got no timeout.
const DefaultTimeout = 5 * time.Second

// BatchError reports the items of a batch that failed; the others
// succeeded. Errs has one entry per item, nil for those that worked.
type BatchError struct {
	Errs []error
}

// Error implements error.
func (e *BatchError) Error() string {
	n, first := 0, error(nil)
	for _, err := range e.Errs {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	return "raet: " + strconv.Itoa(n) + " of " + strconv.Itoa(len(e.Errs)) + " items failed; the first: " + first.Error()
}

// ItemErrors returns Errs: one entry per item, nil for those that worked
// (as lane.BatchUnmarshaler looks for).
func (e *BatchError) ItemErrors() []error { return e.Errs }

// Unwrap returns the errors of the failed items.
func (e *BatchError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

func batchErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return &BatchError{Errs: errs}
		}
	}
	return nil
}

func timeoutOr(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultTimeout
	}
	return d
}

// ---------------------------------------------------------------------------

// Serializer adapts an sdk.Serializer (a plugin, or an in-process
// implementation) to packet.Serializer, for road.Config.Serializer,
// lane.Config.Serializer (where it is a lane.BatchUnmarshaler: received
// bodies are decoded in batches) and a packet.Registry (Register). Values are turned into the plugin's
// interchange kind by the built-in serializer of that kind, so the rules
// of package packet hold: a mapping, and the empty mapping is zero bytes
// (which never reaches the plugin). It is safe for concurrent use.
type Serializer struct {
	s       sdk.Serializer
	info    sdk.SerializerInfo
	inter   packet.Serializer
	timeout time.Duration
	reg     *packet.Registry // where Register put it
}

var _ packet.BatchSerializer = (*Serializer)(nil)

func builtinBody(k codec.BodyKind) bool {
	switch k {
	case codec.BodyKindNada, codec.BodyKindJSON, codec.BodyKindRaw, codec.BodyKindMsgpack, codec.BodyKindCBOR, codec.BodyKindUnknown:
		return true
	}
	return false
}

// NewSerializer asks s for its Info and checks it: a body kind that is not
// built in, and an interchange of json, msgpack or cbor. timeout bounds
// Marshal and Unmarshal, which take no context (0: DefaultTimeout).
func NewSerializer(ctx context.Context, s sdk.Serializer, timeout time.Duration) (*Serializer, error) {
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	if builtinBody(info.Kind) {
		return nil, fmt.Errorf("raet: serializer plugin %q claims the built-in body kind %v", info.Name, info.Kind)
	}
	switch info.Interchange {
	case codec.BodyKindJSON, codec.BodyKindMsgpack, codec.BodyKindCBOR:
	default:
		return nil, fmt.Errorf("raet: serializer plugin %q: interchange %v is not json, msgpack or cbor", info.Name, info.Interchange)
	}
	inter, err := packet.Builtin(info.Interchange)
	if err != nil {
		return nil, err
	}
	return &Serializer{s: s, info: info, inter: inter, timeout: timeoutOr(timeout)}, nil
}

// Kind returns the plugin's body kind.
func (s *Serializer) Kind() codec.BodyKind { return s.info.Kind }

// Info returns the plugin's description.
func (s *Serializer) Info() sdk.SerializerInfo { return s.info }

// Register makes the serializer findable in reg, a stack's registry
// (road.Config.Serializers, lane.Config.Serializers), or with nil in the
// process-wide packet.DefaultRegistry, so that received bodies of its kind
// are decoded by it.
func (s *Serializer) Register(reg *packet.Registry) error {
	if err := reg.Register(s); err != nil {
		return err
	}
	s.reg = reg
	return nil
}

// Unregister undoes Register.
func (s *Serializer) Unregister() { s.reg.Unregister(s.info.Kind) }

func (s *Serializer) bodyErr(op string, err error) error {
	var be *packet.BodyError
	if errors.As(err, &be) && be.Kind == s.info.Interchange {
		err = be.Err
	}
	return &packet.BodyError{Kind: s.info.Kind, Op: op, Err: err}
}

// Marshal appends the encoding of the mapping v to dst.
func (s *Serializer) Marshal(dst []byte, v any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	out, err := s.MarshalBatch(ctx, []any{v})
	if err != nil {
		var be *BatchError
		if errors.As(err, &be) {
			err = be.Errs[0]
		}
		return dst, err
	}
	return append(dst, out[0]...), nil
}

// Unmarshal decodes data into the value v points to.
func (s *Serializer) Unmarshal(data []byte, v any) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	err := s.UnmarshalBatch(ctx, [][]byte{data}, []any{v})
	var be *BatchError
	if errors.As(err, &be) {
		err = be.Errs[0]
	}
	return err
}

// MarshalBatch encodes the mappings vs in one call to the plugin. On a
// *BatchError the items without an error are valid.
func (s *Serializer) MarshalBatch(ctx context.Context, vs []any) ([][]byte, error) {
	inter := make([][]byte, len(vs))
	errs := make([]error, len(vs))
	var send [][]byte
	var at []int
	for i, v := range vs {
		b, err := s.inter.Marshal(nil, v)
		if err != nil {
			errs[i] = s.bodyErr("marshal", err)
			continue
		}
		inter[i] = b
		if len(b) > 0 {
			send, at = append(send, b), append(at, i)
		}
	}
	out := make([][]byte, len(vs))
	if len(send) > 0 {
		rs, err := s.s.Encode(ctx, send)
		if err != nil {
			return nil, s.bodyErr("marshal", err)
		}
		for j, r := range rs {
			if r.Err != nil {
				errs[at[j]] = s.bodyErr("marshal", r.Err)
			} else {
				out[at[j]] = r.Data
			}
		}
	}
	return out, batchErr(errs)
}

// UnmarshalBatch decodes bodies[i] into vs[i] with one call to the plugin.
func (s *Serializer) UnmarshalBatch(ctx context.Context, bodies [][]byte, vs []any) error {
	if len(bodies) != len(vs) {
		return fmt.Errorf("raet: %d bodies for %d values", len(bodies), len(vs))
	}
	errs := make([]error, len(vs))
	plain := make([][]byte, len(bodies))
	var send [][]byte
	var at []int
	for i, b := range bodies {
		if len(b) > 0 {
			send, at = append(send, b), append(at, i)
		}
	}
	if len(send) > 0 {
		rs, err := s.s.Decode(ctx, send)
		if err != nil {
			return s.bodyErr("unmarshal", err)
		}
		for j, r := range rs {
			if r.Err != nil {
				errs[at[j]] = s.bodyErr("unmarshal", r.Err)
			} else if len(r.Data) == 0 {
				errs[at[j]] = s.bodyErr("unmarshal", fmt.Errorf("%w: a non-empty body decoded to nothing", packet.ErrMalformedBody))
			} else {
				plain[at[j]] = r.Data
			}
		}
	}
	for i := range vs {
		if errs[i] != nil {
			continue
		}
		if err := s.inter.Unmarshal(plain[i], vs[i]); err != nil {
			errs[i] = s.bodyErr("unmarshal", err)
		}
	}
	return batchErr(errs)
}

// ---------------------------------------------------------------------------

// Coat adapts an sdk.Coat: Session makes the packet.Coat of one session.
type Coat struct {
	c       sdk.Coat
	info    sdk.CoatInfo
	timeout time.Duration
}

// NewCoat asks c for its Info and checks it (not the nada or nacl kind).
// timeout bounds Seal and Open of its sessions (0: DefaultTimeout).
func NewCoat(ctx context.Context, c sdk.Coat, timeout time.Duration) (*Coat, error) {
	info, err := c.Info(ctx)
	if err != nil {
		return nil, err
	}
	switch info.Kind {
	case codec.CoatKindNada, codec.CoatKindNaCl, codec.CoatKindUnknown:
		return nil, fmt.Errorf("raet: coat plugin %q claims the built-in coat kind %v", info.Name, info.Kind)
	}
	return &Coat{c: c, info: info, timeout: timeoutOr(timeout)}, nil
}

// Info returns the plugin's description.
func (c *Coat) Info() sdk.CoatInfo { return c.info }

// Session returns the coat of the session between our short-term private
// key and the remote's short-term public key (the keys an allow makes).
func (c *Coat) Session(ourShortPriv, theirShortPub *[32]byte) (*SessionCoat, error) {
	k, err := sdk.SharedKey(ourShortPriv, theirShortPub)
	if err != nil {
		return nil, &packet.CoatError{Kind: c.info.Kind, Op: "new", Err: err}
	}
	return &SessionCoat{c: c, key: k}, nil
}

// SessionCoat is a coat plugin's packet.Coat for one session. Its results
// never alias its inputs.
type SessionCoat struct {
	c   *Coat
	key sdk.SessionKey
}

var _ packet.Coat = (*SessionCoat)(nil)

// Kind returns the plugin's coat kind.
func (s *SessionCoat) Kind() codec.CoatKind { return s.c.info.Kind }

// Overhead returns the plugin's overhead.
func (s *SessionCoat) Overhead() int { return s.c.info.Overhead }

func (s *SessionCoat) coatErr(op string, n int, err error) error {
	return &packet.CoatError{Kind: s.c.info.Kind, Op: op, Len: n, Err: err}
}

func (s *SessionCoat) one(op string, dst, in []byte,
	fn func(context.Context, [][]byte) ([][]byte, error)) ([]byte, error) {
	if len(in) == 0 {
		return dst, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.c.timeout)
	defer cancel()
	out, err := fn(ctx, [][]byte{in})
	if err != nil {
		var be *BatchError
		if errors.As(err, &be) {
			err = be.Errs[0]
		}
		return dst, err
	}
	return append(dst, out[0]...), nil
}

// Seal appends the coat of plain to dst.
func (s *SessionCoat) Seal(dst, plain []byte) ([]byte, error) {
	return s.one("seal", dst, plain, s.SealBatch)
}

// Open appends the body inside coat to dst.
func (s *SessionCoat) Open(dst, coat []byte) ([]byte, error) {
	return s.one("open", dst, coat, s.OpenBatch)
}

// SealBatch seals bodies in one call.
func (s *SessionCoat) SealBatch(ctx context.Context, bodies [][]byte) ([][]byte, error) {
	return s.batch(ctx, "seal", bodies, s.c.c.Seal)
}

// OpenBatch opens coats in one call.
func (s *SessionCoat) OpenBatch(ctx context.Context, coats [][]byte) ([][]byte, error) {
	return s.batch(ctx, "open", coats, s.c.c.Open)
}

func (s *SessionCoat) batch(ctx context.Context, op string, items [][]byte,
	fn func(context.Context, *sdk.SessionKey, [][]byte) ([]sdk.Result, error)) ([][]byte, error) {
	out := make([][]byte, len(items))
	errs := make([]error, len(items))
	var send [][]byte
	var at []int
	for i, it := range items {
		if len(it) > 0 {
			send, at = append(send, it), append(at, i)
		}
	}
	if len(send) == 0 {
		return out, nil
	}
	rs, err := fn(ctx, &s.key, send)
	if err != nil {
		return nil, s.coatErr(op, 0, err)
	}
	for j, r := range rs {
		i := at[j]
		switch {
		case r.Err != nil:
			errs[i] = s.coatErr(op, len(items[i]), r.Err)
		case op == "seal" && len(r.Data) != len(items[i])+s.c.info.Overhead:
			errs[i] = s.coatErr(op, len(items[i]), fmt.Errorf("%w: a coat of %d bytes, want %d",
				sdk.ErrInvalid, len(r.Data), len(items[i])+s.c.info.Overhead))
		default:
			out[i] = r.Data
		}
	}
	return out, batchErr(errs)
}

// ---------------------------------------------------------------------------

// Queue adapts an sdk.Queue to queue.Queue (road.Config.Queue,
// lane.Config.Queue). It is safe for concurrent use.
type Queue struct {
	q       sdk.Queue
	info    sdk.QueueInfo
	timeout time.Duration
}

var (
	_ queue.Queue  = (*Queue)(nil)
	_ queue.Stable = (*Queue)(nil)
)

// NewQueue asks q for its Info. timeout bounds Put, Done and each page of
// Pending (0: DefaultTimeout).
func NewQueue(ctx context.Context, q sdk.Queue, timeout time.Duration) (*Queue, error) {
	info, err := q.Info(ctx)
	if err != nil {
		return nil, err
	}
	return &Queue{q: q, info: info, timeout: timeoutOr(timeout)}, nil
}

// Info returns the plugin's description.
func (q *Queue) Info() sdk.QueueInfo { return q.info }

// Instance implements queue.Stable: the plugin's QueueInfo.Instance.
func (q *Queue) Instance() uint64 { return q.info.Instance }

// Put stores a message and returns its id.
func (q *Queue) Put(remote string, kind codec.BodyKind, body []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	ids, err := q.PutBatch(ctx, []queue.Message{{Remote: remote, Kind: kind, Body: body}})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// PutBatch stores messages in one call (atomically, up to
// sdk.MaxBatchBytes of bodies).
func (q *Queue) PutBatch(ctx context.Context, msgs []queue.Message) ([]uint64, error) {
	in := make([]sdk.Message, len(msgs))
	for i, m := range msgs {
		in[i] = sdk.Message{Remote: m.Remote, Kind: m.Kind, Body: m.Body}
	}
	return q.q.Put(ctx, in)
}

// Done forgets a message.
func (q *Queue) Done(id uint64) error {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	return q.q.Done(ctx, []uint64{id})
}

// DoneBatch forgets messages in one call.
func (q *Queue) DoneBatch(ctx context.Context, ids []uint64) error { return q.q.Done(ctx, ids) }

// pendingPage is how many messages one Pending call asks for.
const pendingPage = 512

// maxPendingPages bounds the pages read (512M messages).
const maxPendingPages = 1 << 20

// Pending lists every message put and not done, oldest first, a page per
// call (a version 1 plugin returns everything in the first).
func (q *Queue) Pending() ([]queue.Message, error) {
	var out []queue.Message
	var after uint64
	for range maxPendingPages {
		ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
		page, err := q.q.Pending(ctx, after, pendingPage)
		cancel()
		if err != nil {
			return nil, err
		}
		if len(page) == 0 {
			return out, nil
		}
		for _, m := range page {
			if m.ID <= after {
				return nil, fmt.Errorf("raet: queue plugin %q: pending ids out of order (%d after %d)", q.info.Name, m.ID, after)
			}
			after = m.ID
			out = append(out, queue.Message{ID: m.ID, Remote: m.Remote, Kind: m.Kind, Body: m.Body})
		}
	}
	return nil, fmt.Errorf("raet: queue plugin %q: more than %d pages pending", q.info.Name, maxPendingPages)
}
