package sdk

import (
	"context"
	"fmt"

	"github.com/hashicorp/go-plugin"
	"golang.org/x/crypto/curve25519"
	"golang.org/x/crypto/nacl/box"
	"google.golang.org/grpc"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/internal/convert"
	pb "github.com/raet-go/raet/plugins/proto"
)

// SessionKey is the 32-byte shared key of a session between two estates:
// crypto_box_beforenm of our short-term private key and the remote's
// short-term public key (the key the built-in nacl coat uses). Either side
// computes the same key. A coat plugin derives its own keys from it (with
// HKDF, say) and never sees a private key.
type SessionKey [32]byte

// IsZero reports whether k is all zeros (no key).
func (k *SessionKey) IsZero() bool { return k == nil || *k == SessionKey{} }

// CoatInfo describes a coat plugin.
type CoatInfo struct {
	// Kind is the coat kind (ck) the plugin implements; it must be declared
	// in spec/raet.yaml and must not be nada or nacl.
	Kind codec.CoatKind
	// Name is a short name for logs, e.g. "xchacha".
	Name string
	// Overhead is how many bytes a coat adds to a non-empty body.
	Overhead int
	// Version is the plugin's own version, for logs.
	Version string
}

// Coat is a body encryption implemented as a plugin. Seal turns bodies
// into coats and Open coats back into bodies, all with the session key
// given in the call (a plugin keeps no session state, so a restarted
// plugin goes on where the last one stopped). Both return one Result per
// input, in order. An empty body seals to an empty coat and an empty coat
// opens to an empty body (as every coat kind does). Open must fail with an
// error that wraps ErrCoatOpen for a coat that does not authenticate, and
// ErrCoatShort for one shorter than Overhead. A coat is exactly
// len(body)+Overhead bytes. Implementations must be safe for concurrent
// use.
type Coat interface {
	Info(ctx context.Context) (CoatInfo, error)
	Seal(ctx context.Context, key *SessionKey, bodies [][]byte) ([]Result, error)
	Open(ctx context.Context, key *SessionKey, coats [][]byte) ([]Result, error)
}

// CoatPlugin is the go-plugin adapter of a Coat: Impl is set in the plugin
// and nil in the host.
type CoatPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl    Coat
	Version int
}

var _ plugin.GRPCPlugin = (*CoatPlugin)(nil)

// GRPCServer registers the Coat service.
func (p *CoatPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pb.RegisterCoatServer(s, &coatServer{impl: p.Impl})
	return nil
}

// GRPCClient returns a Coat that calls the plugin.
func (p *CoatPlugin) GRPCClient(_ context.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return &coatClient{c: pb.NewCoatClient(c)}, nil
}

type coatServer struct {
	pb.UnimplementedCoatServer
	impl Coat
}

func (s *coatServer) Info(ctx context.Context, _ *pb.InfoRequest) (*pb.CoatInfo, error) {
	in, err := s.impl.Info(ctx)
	if err != nil {
		return nil, convert.ToStatus(err)
	}
	if in.Overhead < 0 {
		return nil, convert.ToStatus(fmt.Errorf("%w: negative overhead %d", ErrInvalid, in.Overhead))
	}
	return &pb.CoatInfo{CoatKind: uint32(in.Kind), Name: in.Name, Overhead: uint32(in.Overhead), Version: in.Version}, nil
}

func sessionKey(b []byte) (*SessionKey, error) {
	if len(b) != len(SessionKey{}) {
		return nil, convert.ToStatus(fmt.Errorf("%w: a session key of %d bytes", ErrWeakKey, len(b)))
	}
	return (*SessionKey)(b), nil
}

func (s *coatServer) Seal(ctx context.Context, b *pb.CoatBatch) (*pb.Results, error) {
	key, err := sessionKey(b.GetKey())
	if err != nil {
		return nil, err
	}
	return serveBatch(ctx, b.GetItems(), func(ctx context.Context, items [][]byte) ([]Result, error) {
		return s.impl.Seal(ctx, key, items)
	})
}

func (s *coatServer) Open(ctx context.Context, b *pb.CoatBatch) (*pb.Results, error) {
	key, err := sessionKey(b.GetKey())
	if err != nil {
		return nil, err
	}
	return serveBatch(ctx, b.GetItems(), func(ctx context.Context, items [][]byte) ([]Result, error) {
		return s.impl.Open(ctx, key, items)
	})
}

type coatClient struct{ c pb.CoatClient }

func (c *coatClient) Info(ctx context.Context) (CoatInfo, error) {
	in, err := c.c.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return CoatInfo{}, convert.FromStatus(err)
	}
	if in.GetCoatKind() > 255 || in.GetOverhead() > 1<<20 {
		return CoatInfo{}, fmt.Errorf("%w: coat kind %d, overhead %d", ErrInvalid, in.GetCoatKind(), in.GetOverhead())
	}
	return CoatInfo{Kind: codec.CoatKind(in.GetCoatKind()), Name: in.GetName(),
		Overhead: int(in.GetOverhead()), Version: in.GetVersion()}, nil
}

func (c *coatClient) Seal(ctx context.Context, key *SessionKey, bodies [][]byte) ([]Result, error) {
	rs, err := c.c.Seal(ctx, &pb.CoatBatch{Key: key[:], Items: bodies})
	if err != nil {
		return nil, convert.FromStatus(err)
	}
	return convert.ResultsFromProto(rs, len(bodies))
}

func (c *coatClient) Open(ctx context.Context, key *SessionKey, coats [][]byte) ([]Result, error) {
	rs, err := c.c.Open(ctx, &pb.CoatBatch{Key: key[:], Items: coats})
	if err != nil {
		return nil, convert.FromStatus(err)
	}
	return convert.ResultsFromProto(rs, len(coats))
}

// SharedKey returns the session key of our short-term private key and the
// remote's short-term public key: crypto_box_beforenm (HSalsa20 of the
// X25519 shared secret), the key of the built-in nacl coat. It fails with
// ErrWeakKey if a key is nil or the public key is of low order.
func SharedKey(ourShortPriv, theirShortPub *[32]byte) (SessionKey, error) {
	var k SessionKey
	if ourShortPriv == nil || theirShortPub == nil {
		return k, ErrWeakKey
	}
	if _, err := curve25519.X25519(ourShortPriv[:], theirShortPub[:]); err != nil {
		return k, fmt.Errorf("%w: %w", ErrWeakKey, err)
	}
	box.Precompute((*[32]byte)(&k), theirShortPub, ourShortPriv)
	return k, nil
}
