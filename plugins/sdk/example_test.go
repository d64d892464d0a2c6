package sdk_test

import (
	"context"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/plugins/sdk"
)

// identity is a serializer plugin's implementation (here: bodies pass as
// they are).
type identity struct{}

func (identity) Info(context.Context) (sdk.SerializerInfo, error) {
	return sdk.SerializerInfo{Kind: 200, Name: "identity", Interchange: codec.BodyKindJSON, Version: "1"}, nil
}

func (identity) Encode(_ context.Context, bodies [][]byte) ([]sdk.Result, error) {
	out := make([]sdk.Result, len(bodies))
	for i, b := range bodies {
		out[i].Data = b
	}
	return out, nil
}

func (u identity) Decode(ctx context.Context, bodies [][]byte) ([]sdk.Result, error) {
	return u.Encode(ctx, bodies)
}

// A plugin's main is one call to Serve. This one does heavy work in
// parallel within a call, so it asks for 4 threads instead of the
// default 1.
func ExampleWithMaxProcs() {
	sdk.Serve(identity{}, sdk.WithMaxProcs(4))
}
