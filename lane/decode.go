package lane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
)

// Batches of bodies of a plugin's kind: at most this many messages or
// (about) bytes per call.
const (
	maxDecodeBatch      = 64
	maxDecodeBatchBytes = 4 << 20
)

// decodeWarnEvery is how often, at most, a body that fails to decode is
// logged at slog.LevelWarn; the ones in between are counted in the next
// log line (and logged at slog.LevelDebug).
const decodeWarnEvery = time.Second

// The decoder goroutine.
//
// The reader decodes the bodies of the built-in kinds itself and sends
// them straight to the Receive channel. A message of a plugin's kind comes
// out of inbound with Body nil; the reader hands it to the decoder
// goroutine (started when the first one comes), which decodes what has
// piled up meanwhile in one call per kind and delivers it. While the
// decoder holds messages (Stack.deferred > 0), the reader hands it every
// message, decoded or not, so that messages stay in the order they came.
//
//	reader ──(Body set, deferred == 0)──────────────────▶ Receive
//	   └────(Body nil, or deferred > 0)──▶ dec ──▶ decoder ──▶ Receive

// toDecoder hands m to the decoder goroutine, starting it the first time.
// It reports false when the stack is closing. Reader goroutine only.
func (s *Stack) toDecoder(m Message) bool {
	if s.dec == nil {
		s.dec = make(chan Message, s.cfg.ReceiveQueue)
		s.wg.Add(1) // the reader's own count keeps the group open
		go s.decodeLoop(s.dec)
	}
	s.deferred.Add(1)
	select {
	case s.dec <- m:
		return true
	case <-s.closing:
		return false
	}
}

// decodeLoop is the decoder goroutine.
func (s *Stack) decodeLoop(dec <-chan Message) {
	defer s.wg.Done()
	d := decoder{s: s}
	batch := make([]Message, 0, maxDecodeBatch)
	for {
		select {
		case m := <-dec:
			batch = append(batch[:0], m)
		case <-s.closing:
			return
		}
		size := len(batch[0].Raw)
	fill:
		for len(batch) < maxDecodeBatch && size < maxDecodeBatchBytes {
			select {
			case m := <-dec:
				batch = append(batch, m)
				size += len(m.Raw)
			default:
				break fill
			}
		}
		d.decode(batch)
		for i := range batch {
			if batch[i].Body != nil {
				select {
				case s.recv <- batch[i]:
				case <-s.closing:
					return
				}
			}
			batch[i] = Message{}
			s.deferred.Add(-1)
		}
	}
}

// decoder decodes batches of messages; it is owned by the decoder
// goroutine.
type decoder struct {
	s        *Stack
	todo     []int
	group    []int
	warnedAt time.Time
	unwarned int // failures not logged at warn level since warnedAt
}

// decode decodes the bodies of the messages of batch whose Body is nil,
// one call per pack kind. A message whose body fails keeps Body nil.
func (d *decoder) decode(batch []Message) {
	todo := d.todo[:0]
	for i := range batch {
		if batch[i].Body == nil {
			todo = append(todo, i)
		}
	}
	for len(todo) > 0 {
		pk := batch[todo[0]].Kind
		group, rest := d.group[:0], todo[:0]
		for _, i := range todo {
			if batch[i].Kind == pk {
				group = append(group, i)
			} else {
				rest = append(rest, i)
			}
		}
		d.decodeKind(pk, batch, group)
		d.group, todo = group, rest
	}
	d.todo = todo
}

// decodeKind decodes the messages batch[i], i in idx, all of kind pk.
func (d *decoder) decodeKind(pk codec.PackKind, batch []Message, idx []int) {
	s := d.s
	ser := s.decoderFor(pk)
	if ser == nil {
		err := fmt.Errorf("no serializer of pack kind %v (register a plugin in Config.Serializers)", pk)
		for _, i := range idx {
			d.drop(DropPackKind, &batch[i], err)
		}
		return
	}
	bodies := make([]map[string]any, len(idx))
	errs := make([]error, len(idx))
	if bu, ok := ser.(packet.BatchSerializer); ok {
		raws := make([][]byte, len(idx))
		vs := make([]any, len(idx))
		for j, i := range idx {
			raws[j], vs[j] = batch[i].Raw, &bodies[j]
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.DecodeTimeout)
		err := bu.UnmarshalBatch(ctx, raws, vs)
		cancel()
		s.ctr.decodeBatches.Add(1)
		if err != nil {
			var ie interface{ ItemErrors() []error }
			if errors.As(err, &ie) && len(ie.ItemErrors()) == len(idx) {
				copy(errs, ie.ItemErrors())
			} else {
				for j := range errs {
					errs[j] = err
				}
			}
		}
	} else {
		for j, i := range idx {
			errs[j] = ser.Unmarshal(batch[i].Raw, &bodies[j])
		}
	}
	if s.ctx.Err() != nil {
		return // closing: nothing more is delivered, nothing is the body's fault
	}
	for j, i := range idx {
		switch {
		case errs[j] == nil:
			if bodies[j] == nil {
				bodies[j] = map[string]any{}
			}
			batch[i].Body = bodies[j]
			s.ctr.messagesIn.Add(1)
		case errors.Is(errs[j], packet.ErrNotMapping):
			d.drop(DropNotMapping, &batch[i], errs[j])
		default:
			d.drop(DropBadBody, &batch[i], errs[j])
		}
	}
}

// drop counts and logs a message whose body is not delivered.
func (d *decoder) drop(r DropReason, m *Message, err error) {
	s := d.s
	m.Body = nil
	s.ctr.drops[r].Add(1)
	now := time.Now()
	if now.Sub(d.warnedAt) < decodeWarnEvery {
		d.unwarned++
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("lane message dropped", "reason", r.String(), "from", m.From, "kind", m.Kind.String(),
				"bytes", len(m.Raw), "err", err)
		}
		return
	}
	s.log.Warn("lane message dropped: its body does not decode", "yard", s.cfg.Name, "reason", r.String(),
		"from", m.From, "kind", m.Kind.String(), "bytes", len(m.Raw), "err", err, "dropped_since_last_log", d.unwarned)
	d.warnedAt, d.unwarned = now, 0
}

// decoderFor returns the serializer of received bodies of the plugin pack
// kind pk: Config.Serializer if it is of that kind, else the one
// Config.Serializers finds, or nil.
func (s *Stack) decoderFor(pk codec.PackKind) packet.Serializer {
	if s.cfg.Serializer != nil && s.cfg.PackKind == pk {
		return s.ser
	}
	bk, ok := BodyKindOf(pk)
	if !ok {
		return nil
	}
	ser, err := s.cfg.Serializers.Lookup(bk)
	if err != nil {
		return nil
	}
	return ser
}
