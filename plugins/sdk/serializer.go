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

// SerializerInfo describes a serializer plugin.
type SerializerInfo struct {
	// Kind is the body kind (bk) the plugin implements; it must be declared
	// in spec/raet.yaml (or agreed between the estates that use it) and must
	// not be a built-in kind.
	Kind codec.BodyKind
	// Name is a short name for logs, e.g. "zstdjson".
	Name string
	// Interchange is the body kind of Encode's input and Decode's output:
	// codec.BodyKindJSON, BodyKindMsgpack or BodyKindCBOR. The host turns Go
	// values into it (and back) with the built-in serializer of that kind,
	// so the rules of package packet hold (a mapping; the empty mapping is
	// zero bytes).
	Interchange codec.BodyKind
	// Version is the plugin's own version, for logs.
	Version string
}

// Serializer is a body kind implemented as a plugin. Encode turns bodies of
// the Interchange kind into bodies of Kind; Decode turns them back. Both
// return one Result per input, in order; the error return is for failures
// of the whole call. Empty input (the empty mapping) must give empty output
// in both directions (the host does not send it, but the contract tests
// check it). Decode must reject input that is not a body of Kind with an
// error that wraps ErrMalformed, and must bound what it allocates (a small
// body must not decompress into gigabytes). Implementations must be safe
// for concurrent use.
type Serializer interface {
	Info(ctx context.Context) (SerializerInfo, error)
	Encode(ctx context.Context, bodies [][]byte) ([]Result, error)
	Decode(ctx context.Context, bodies [][]byte) ([]Result, error)
}

// SerializerPlugin is the go-plugin adapter of a Serializer: Impl is set
// in the plugin and nil in the host.
type SerializerPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl    Serializer
	Version int // the protocol version of the set it is in
}

var _ plugin.GRPCPlugin = (*SerializerPlugin)(nil)

// GRPCServer registers the Serializer service.
func (p *SerializerPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterSerializerServer(s, &serializerServer{impl: p.Impl})
	return nil
}

// GRPCClient returns a Serializer that calls the plugin.
func (p *SerializerPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &serializerClient{c: pb.NewSerializerClient(c)}, nil
}

type serializerServer struct {
	pb.UnimplementedSerializerServer
	impl Serializer
}

func (s *serializerServer) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.SerializerInfo, error) {
	in, err := s.impl.Info(ctx)
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	return &pb.SerializerInfo{BodyKind: uint32(in.Kind), Name: in.Name, Interchange: uint32(in.Interchange), Version: in.Version}, nil
}

func (s *serializerServer) Encode(ctx context.Context, b *pb.Batch) (*pb.Results, error) {
	return serveBatch(ctx, b.GetItems(), s.impl.Encode)
}

func (s *serializerServer) Decode(ctx context.Context, b *pb.Batch) (*pb.Results, error) {
	return serveBatch(ctx, b.GetItems(), s.impl.Decode)
}

// serveBatch runs fn on a batch and checks that it kept the count.
func serveBatch(ctx context.Context, items [][]byte, fn func(context.Context, [][]byte) ([]Result, error)) (*pb.Results, error) {
	if err := canceled(ctx); err != nil {
		return nil, convert.ToStatus(err)
	}
	rs, err := fn(ctx, items)
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	if len(rs) != len(items) {
		return nil, convert.ToStatus(fmt.Errorf("%w: the implementation returned %d results for %d items", ErrInvalid, len(rs), len(items)))
	}
	return convert.ResultsToProto(rs), nil
}

type serializerClient struct{ c pb.SerializerClient }

func (c *serializerClient) Info(ctx context.Context) (SerializerInfo, error) {
	in, err := c.c.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return SerializerInfo{}, convert.FromStatus(err)
	}
	if in.GetBodyKind() > 255 || in.GetInterchange() > 255 {
		return SerializerInfo{}, fmt.Errorf("%w: body kind %d, interchange %d", ErrInvalid, in.GetBodyKind(), in.GetInterchange())
	}
	return SerializerInfo{Kind: codec.BodyKind(in.GetBodyKind()), Name: in.GetName(),
		Interchange: codec.BodyKind(in.GetInterchange()), Version: in.GetVersion()}, nil
}

func (c *serializerClient) Encode(ctx context.Context, bodies [][]byte) ([]Result, error) {
	rs, err := c.c.Encode(ctx, &pb.Batch{Items: bodies})
	if err != nil {
		return nil, convert.FromStatus(err)
	}
	return convert.ResultsFromProto(rs, len(bodies))
}

func (c *serializerClient) Decode(ctx context.Context, bodies [][]byte) ([]Result, error) {
	rs, err := c.c.Decode(ctx, &pb.Batch{Items: bodies})
	if err != nil {
		return nil, convert.FromStatus(err)
	}
	return convert.ResultsFromProto(rs, len(bodies))
}
