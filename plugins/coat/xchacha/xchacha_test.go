package xchacha_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/raet-go/raet/plugins/coat/xchacha"
	"github.com/raet-go/raet/plugins/internal/plugintest"
	"github.com/raet-go/raet/plugins/sdk"
	"github.com/raet-go/raet/plugins/sdk/sdktest"
)

func TestContract(t *testing.T) { sdktest.Coat(t, xchacha.New(nil)) }

func TestContractGRPC(t *testing.T) {
	c := plugintest.GRPC[sdk.Coat](t, sdk.KindCoat, &sdk.CoatPlugin{Impl: xchacha.New(nil), Version: sdk.LatestVersion})
	sdktest.Coat(t, c)
}

// The layout is ciphertext || tag || nonce under the HKDF key: an
// independent open with x/crypto reads it.
func TestLayout(t *testing.T) {
	var sk sdk.SessionKey
	sk[0] = 9
	nonce := bytes.Repeat([]byte{0x42}, chacha20poly1305.NonceSizeX)
	c := xchacha.New(bytes.NewReader(nonce))
	rs, err := c.Seal(context.Background(), &sk, [][]byte{[]byte("body")})
	if err != nil || rs[0].Err != nil {
		t.Fatal(err)
	}
	coat := rs[0].Data
	if !bytes.Equal(coat[len(coat)-len(nonce):], nonce) {
		t.Fatal("the nonce is not last")
	}
	key, err := xchacha.DeriveKey(&sk)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := chacha20poly1305.NewX(key)
	plain, err := a.Open(nil, nonce, coat[:len(coat)-len(nonce)], nil)
	if err != nil || string(plain) != "body" {
		t.Fatalf("%q %v", plain, err)
	}
}

// FuzzOpen: any coat opens or fails with ErrCoatOpen or ErrCoatShort,
// without panicking; a sealed body opens to itself.
func FuzzOpen(f *testing.F) {
	c := xchacha.New(nil)
	sk := sdk.SessionKey{7}
	for _, seed := range [][]byte{[]byte("x"), bytes.Repeat([]byte("body"), 100)} {
		rs, _ := c.Seal(context.Background(), &sk, [][]byte{seed})
		f.Add(rs[0].Data)
	}
	f.Add(make([]byte, xchacha.Overhead-1))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := c.Open(context.Background(), &sk, [][]byte{b})
		if err != nil || len(rs) != 1 {
			t.Fatalf("%v", err)
		}
		if rs[0].Err != nil && !errors.Is(rs[0].Err, sdk.ErrCoatOpen) && !errors.Is(rs[0].Err, sdk.ErrCoatShort) {
			t.Fatalf("an unclassified error: %v", rs[0].Err)
		}
		sealed, _ := c.Seal(context.Background(), &sk, [][]byte{b})
		back, _ := c.Open(context.Background(), &sk, [][]byte{sealed[0].Data})
		if back[0].Err != nil || !bytes.Equal(back[0].Data, b) {
			t.Fatal("no round trip")
		}
	})
}
