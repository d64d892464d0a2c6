package sdk

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/internal/convert"
	pb "github.com/raet-go/raet/plugins/proto"
)

// QueueInfo describes a queue plugin.
type QueueInfo struct {
	Name    string
	Version string
	// Durable: messages put survive a crash of the plugin and of the host
	// (the plugin has them on disk before Put returns).
	Durable bool
	// Instance identifies a durable queue's store: non-zero when its ids
	// are unique within the store and stay with their messages across
	// restarts (a new store gets a new random Instance). The road stack
	// then gives each message the stable id (Instance, id), by which a
	// raet-go receiver delivers a message sent again after a crash only
	// once. 0: no such promise.
	Instance uint64
}

// Message is a serialized message for a remote, as a queue holds it.
type Message struct {
	ID     uint64 // assigned by Put; ignored in Put's input
	Remote string // the remote estate's name
	Kind   codec.BodyKind
	Body   []byte
}

// Queue keeps the messages an estate sends until their remote says done,
// so that a crash loses none (the estate sends what is pending after a
// restart).
//
//   - Put stores a batch of messages atomically (all or none) and returns
//     their ids, one per message in order. Ids grow: a message put later
//     has a larger id. A full queue fails with ErrQueueFull.
//   - Done forgets ids; an id it does not hold (done already, or never
//     put) is not an error, so the host may repeat a Done after a restart.
//   - Pending returns messages put and not done with an id larger than
//     after, oldest first, at most limit of them (0: no limit). A host
//     talking to a version 1 plugin gets everything at once.
//
// Implementations must be safe for concurrent use.
type Queue interface {
	Info(ctx context.Context) (QueueInfo, error)
	Put(ctx context.Context, msgs []Message) ([]uint64, error)
	Done(ctx context.Context, ids []uint64) error
	Pending(ctx context.Context, after uint64, limit int) ([]Message, error)
}

// QueuePlugin is the go-plugin adapter of a Queue: Impl is set in the
// plugin and nil in the host. Version selects the Pending protocol: 1
// returns everything in one response, 2 pages.
type QueuePlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl    Queue
	Version int
}

var _ plugin.GRPCPlugin = (*QueuePlugin)(nil)

// GRPCServer registers the Queue service.
func (p *QueuePlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterQueueServer(s, &queueServer{impl: p.Impl, version: p.Version})
	return nil
}

// GRPCClient returns a Queue that calls the plugin.
func (p *QueuePlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &queueClient{c: pb.NewQueueClient(c), version: p.Version}, nil
}

type queueServer struct {
	pb.UnimplementedQueueServer
	impl    Queue
	version int
}

func (s *queueServer) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.QueueInfo, error) {
	in, err := s.impl.Info(ctx)
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return &pb.QueueInfo{Name: in.Name, Version: in.Version, Durable: in.Durable, Instance: in.Instance}, nil
}

func (s *queueServer) Put(ctx context.Context, r *pb.PutRequest) (*pb.PutResponse, error) {
	msgs := make([]Message, len(r.GetMessages()))
	for i, m := range r.GetMessages() {
		if m.GetKind() > 255 {
			return nil, convert.ToStatus(fmt.Errorf("%w: body kind %d", ErrInvalid, m.GetKind()))
		}
		msgs[i] = Message{Remote: m.GetRemote(), Kind: codec.BodyKind(m.GetKind()), Body: m.GetBody()}
	}
	ids, err := s.impl.Put(ctx, msgs)
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	if len(ids) != len(msgs) {
		return nil, convert.ToStatus(fmt.Errorf("%w: %d ids for %d messages", ErrInvalid, len(ids), len(msgs)))
	}
	return &pb.PutResponse{Ids: ids}, nil
}

func (s *queueServer) Done(ctx context.Context, r *pb.DoneRequest) (*pb.DoneResponse, error) {
	if err := s.impl.Done(ctx, r.GetIds()); err != nil {
		return nil, convert.ToStatus(err)
	}
	return &pb.DoneResponse{}, nil
}

func (s *queueServer) Pending(ctx context.Context, r *pb.PendingRequest) (*pb.PendingResponse, error) {
	after, limit, maxBytes := r.GetAfterId(), int(min(r.GetLimit(), 1<<20)), r.GetMaxBytes()
	if s.version < Version2 {
		after, limit, maxBytes = 0, 0, 0 // version 1: everything at once
	}
	msgs, err := s.impl.Pending(ctx, after, limit)
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	out := &pb.PendingResponse{Messages: make([]*pb.QueuedMessage, 0, len(msgs))}
	var size uint64
	for _, m := range msgs {
		size += uint64(len(m.Body) + len(m.Remote))
		if maxBytes > 0 && size > maxBytes && len(out.Messages) > 0 {
			break
		}
		out.Messages = append(out.Messages, &pb.QueuedMessage{Id: m.ID, Remote: m.Remote, Kind: uint32(m.Kind), Body: m.Body})
	}
	return out, nil
}

type queueClient struct {
	c       pb.QueueClient
	version int
}

func (c *queueClient) Info(ctx context.Context) (QueueInfo, error) {
	in, err := c.c.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return QueueInfo{}, convert.FromStatus(err)
	}
	return QueueInfo{Name: in.GetName(), Version: in.GetVersion(), Durable: in.GetDurable(), Instance: in.GetInstance()}, nil
}

func (c *queueClient) Put(ctx context.Context, msgs []Message) ([]uint64, error) {
	req := &pb.PutRequest{Messages: make([]*pb.QueuedMessage, len(msgs))}
	for i, m := range msgs {
		req.Messages[i] = &pb.QueuedMessage{Remote: m.Remote, Kind: uint32(m.Kind), Body: m.Body}
	}
	resp, err := c.c.Put(ctx, req)
	if err != nil {
		return nil, convert.FromStatus(err)
	}
	if len(resp.GetIds()) != len(msgs) {
		return nil, fmt.Errorf("%w: the plugin returned %d ids for %d messages", ErrInvalid, len(resp.GetIds()), len(msgs))
	}
	return resp.GetIds(), nil
}

func (c *queueClient) Done(ctx context.Context, ids []uint64) error {
	_, err := c.c.Done(ctx, &pb.DoneRequest{Ids: ids})
	return convert.FromStatus(err)
}

// pendingBudget is the byte budget the client asks one Pending response to
// keep under (a version 1 plugin ignores it).
const pendingBudget = MaxBatchBytes / 2

func (c *queueClient) Pending(ctx context.Context, after uint64, limit int) ([]Message, error) {
	resp, err := c.c.Pending(ctx, &pb.PendingRequest{AfterId: after, Limit: uint32(max(0, min(limit, 1<<20))), MaxBytes: pendingBudget})
	if err != nil {
		return nil, convert.FromStatus(err)
	}
	out := make([]Message, 0, len(resp.GetMessages()))
	for _, m := range resp.GetMessages() {
		if c.version < Version2 && m.GetId() <= after {
			continue // a version 1 plugin returns everything, ignoring after (and limit)
		}
		if m.GetKind() > 255 {
			return nil, fmt.Errorf("%w: body kind %d", ErrInvalid, m.GetKind())
		}
		out = append(out, Message{ID: m.GetId(), Remote: m.GetRemote(), Kind: codec.BodyKind(m.GetKind()), Body: m.GetBody()})
	}
	return out, nil
}
