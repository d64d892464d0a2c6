package road

import (
	"context"
	"errors"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road/internal/core"
)

// A packet.BatchSerializer (a serializer plugin) costs a call to another
// process per use, so the stack never calls it on the owner goroutine nor
// once per message when it can help it: Send hands bodies to the encoder
// goroutine and the owner hands received bodies to the decoder goroutine;
// each takes whatever has queued up, up to maxCallBatch, into one call.
const (
	// maxCallBatch: zstdjson as a plugin encodes 1 KiB bodies at ~48k/s
	// 64 to a call and ~82k/s 256 to a call (plugins/host benchmarks).
	maxCallBatch = 256
	// batchCallTimeout bounds one batched call: a hung plugin fails the
	// messages of that call, and the stack goes on.
	batchCallTimeout = 5 * time.Second
)

// decodeJob is a received body for the decoder goroutine.
type decodeJob struct {
	d   *core.Decode
	ser packet.BatchSerializer
}

// encodeJob is a body to send for the encoder goroutine.
type encodeJob struct {
	v   any
	res chan<- encoded
}

type encoded struct {
	b   []byte
	err error
}

// handDecodes passes the bodies the core left undecoded to the decoder
// goroutine, as many as its queue takes, and reports whether all went; the
// rest wait for the next flush.
func (s *Stack) handDecodes() bool {
	c := s.core
	n := 0
	for _, d := range c.Decodes() {
		ser, err := s.cfg.Serializers.Lookup(d.Kind)
		bs, ok := ser.(packet.BatchSerializer)
		if err != nil || !ok { // unregistered meanwhile
			c.Decoded(d, nil, errors.Join(err, errors.New("raet: the body's serializer is gone")), time.Now())
			n++
			continue
		}
		select {
		case s.decodeCh <- decodeJob{d: d, ser: bs}:
			n++
			continue
		default:
		}
		break
	}
	c.Handed(n)
	return len(c.Decodes()) == 0
}

// decodeLoop is the decoder goroutine: it decodes batches of received
// bodies and gives the outcomes to the owner.
func (s *Stack) decodeLoop() {
	defer s.wg.Done()
	for {
		var jobs []decodeJob
		select {
		case j := <-s.decodeCh:
			jobs = append(jobs, j)
		case <-s.closing:
			return
		}
		jobs = takeMore(s.decodeCh, jobs)
		bodies, errs := make([]map[string]any, len(jobs)), make([]error, len(jobs))
		for lo := 0; lo < len(jobs); {
			hi := lo + 1
			for hi < len(jobs) && jobs[hi].ser == jobs[lo].ser {
				hi++
			}
			raws := make([][]byte, hi-lo)
			vs := make([]any, hi-lo)
			for i := range raws {
				raws[i], vs[i] = jobs[lo+i].d.Raw, &bodies[lo+i]
			}
			s.batchCall(errs[lo:hi], func(ctx context.Context) error {
				return jobs[lo].ser.UnmarshalBatch(ctx, raws, vs)
			}, func(i int) error {
				bodies[lo+i] = nil
				return jobs[lo].ser.Unmarshal(raws[i], &bodies[lo+i])
			})
			lo = hi
		}
		if s.do(context.Background(), func(c *core.Core) {
			now := time.Now()
			for i, j := range jobs {
				c.Decoded(j.d, bodies[i], errs[i], now)
			}
		}) != nil {
			return
		}
	}
}

// encodeLoop is the encoder goroutine of a stack whose serializer is a
// BatchSerializer: it encodes the bodies of concurrent Sends in batches.
func (s *Stack) encodeLoop(ser packet.BatchSerializer) {
	defer s.wg.Done()
	for {
		var jobs []encodeJob
		select {
		case j := <-s.encodeCh:
			jobs = append(jobs, j)
		case <-s.closing:
			return
		}
		jobs = takeMore(s.encodeCh, jobs)
		vs := make([]any, len(jobs))
		for i, j := range jobs {
			vs[i] = j.v
		}
		var out [][]byte
		errs := make([]error, len(jobs))
		s.batchCall(errs, func(ctx context.Context) error {
			o, err := ser.MarshalBatch(ctx, vs)
			if err == nil && len(o) != len(vs) {
				err = errors.New("raet: serializer returned a batch of another size")
			}
			if err == nil {
				out = o
			}
			return err
		}, func(i int) error {
			if out == nil {
				out = make([][]byte, len(vs))
			}
			var err error
			out[i], err = ser.Marshal(nil, vs[i])
			return err
		})
		for i, j := range jobs {
			e := encoded{err: errs[i]}
			if e.err == nil {
				e.b = out[i]
			}
			j.res <- e // buffered
		}
	}
}

// batchCall makes one batched call. When it fails, the items' own errors
// come from the error's ItemErrors (see packet.BatchSerializer), or, but
// for a deadline, from trying each item alone. errs gets one outcome per
// item.
func (s *Stack) batchCall(errs []error, batch func(context.Context) error, one func(i int) error) {
	ctx, cancel := context.WithTimeout(s.life, batchCallTimeout)
	err := batch(ctx)
	cancel()
	var items interface{ ItemErrors() []error }
	switch {
	case err == nil:
		clear(errs)
	case errors.As(err, &items) && len(items.ItemErrors()) == len(errs):
		copy(errs, items.ItemErrors())
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		for i := range errs {
			errs[i] = err
		}
	default:
		for i := range errs {
			errs[i] = one(i)
		}
	}
}

// takeMore adds to jobs what is waiting in ch, up to maxCallBatch.
func takeMore[J any](ch <-chan J, jobs []J) []J {
	for len(jobs) < maxCallBatch {
		select {
		case j := <-ch:
			jobs = append(jobs, j)
		default:
			return jobs
		}
	}
	return jobs
}

// marshal serializes a body to send and returns it with its body kind;
// it is the one home of the rule of Send and Go: a []byte or a string is
// sent as it is (body kind raw, copied: the caller may reuse it once Go
// returns), any other body is a mapping for the stack's serializer, in
// place with a built-in one, through the encoder goroutine with a
// BatchSerializer. buf, when not nil, is the pooled buffer that holds the
// body (bodyBuffer), for the core to give back at the message's outcome.
func (s *Stack) marshal(ctx context.Context, body any) (plain []byte, buf *[]byte, kind codec.BodyKind, err error) {
	switch b := body.(type) {
	case []byte:
		plain, buf = copyBody(s, b)
		return plain, buf, codec.BodyKindRaw, nil
	case string:
		plain, buf = copyBody(s, b)
		return plain, buf, codec.BodyKindRaw, nil
	}
	plain, buf, err = s.marshalMapping(ctx, body)
	return plain, buf, s.ser.Kind(), err
}

// bodyBuffer is a pooled buffer for a body of n bytes to send, or nil when
// the body is not pooled: when the stack has a Queue (whose Put may keep
// the body it is given), or n is beyond the pool's largest buffer.
func (s *Stack) bodyBuffer(n int) *[]byte {
	if s.cfg.Queue != nil {
		return nil
	}
	return core.BodyBuffer(n)
}

// copyBody copies a raw body into a buffer of its own, pooled where it can
// be (bodyBuffer).
func copyBody[T []byte | string](s *Stack, b T) ([]byte, *[]byte) {
	buf := s.bodyBuffer(len(b))
	if buf == nil {
		return append([]byte(nil), b...), nil
	}
	*buf = append(*buf, b...)
	return *buf, buf
}

// marshalMapping serializes a mapping with the stack's serializer.
func (s *Stack) marshalMapping(ctx context.Context, body any) ([]byte, *[]byte, error) {
	if _, ok := s.ser.(packet.BatchSerializer); !ok {
		// Into a buffer of the last body's size (and a little): one
		// buffer, not one per doubling, from the pool where it can be.
		n := int(s.bodySize.Load())
		n += n/8 + 16
		buf := s.bodyBuffer(n)
		if buf == nil {
			b, err := s.ser.Marshal(make([]byte, 0, n), body)
			s.bodySize.Store(int64(len(b)))
			return b, nil, err
		}
		b, err := s.ser.Marshal(*buf, body)
		s.bodySize.Store(int64(len(b)))
		if err != nil || !sameArray(b, *buf) {
			// It grew out of the buffer (or a serializer of the caller's
			// returned memory of its own): not pooled.
			core.PutBodyBuffer(buf)
			return b, nil, err
		}
		*buf = b
		return b, buf, nil
	}
	select {
	case <-s.started:
	default:
		return nil, nil, ErrNotStarted
	}
	res := make(chan encoded, 1)
	select {
	case s.encodeCh <- encodeJob{v: body, res: res}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-s.closing:
		return nil, nil, ErrClosed
	}
	select {
	case e := <-res:
		return e.b, nil, e.err
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-s.closing:
		return nil, nil, ErrClosed
	}
}

// sameArray reports whether b was appended to in the backing array of buf
// (cap(buf) > 0): b ends where buf's array ends.
func sameArray(b, buf []byte) bool {
	return cap(b) == cap(buf) && &b[:cap(b)][cap(b)-1] == &buf[:cap(buf)][cap(buf)-1]
}
