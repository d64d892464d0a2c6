package main

// crypto/ed25519 beside github.com/oasisprotocol/curve25519-voi: signing,
// single verification with the standard library's rules (what
// packet.NaClFoot uses; packet's TestEd25519MatchesStdlib and
// TestEd25519EdgeVectors show it answers as the standard library does),
// with an expanded (precomputed) public key, and batch verification (which
// does not). The benchmarks measure them on 1 KiB packets, and the ceiling
// benchmarks sign and verify on every core with no I/O (the reference
// profile's crypto ceiling).

import (
	"crypto/ed25519"
	"fmt"
	"math/rand/v2"
	"testing"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// benchPackets are n signed 1 KiB packets from one key (a remote's).
func benchPackets(n int) (ed25519.PrivateKey, [][]byte, [][]byte) {
	rng := rand.NewChaCha8([32]byte{2})
	seed := make([]byte, 32)
	rng.Read(seed)
	priv := ed25519.NewKeyFromSeed(seed)
	msgs, sigs := make([][]byte, n), make([][]byte, n)
	for i := range msgs {
		msgs[i] = make([]byte, 1024)
		rng.Read(msgs[i])
		sigs[i] = ed25519.Sign(priv, msgs[i])
	}
	return priv, msgs, sigs
}

const verifyBatch = 64

var (
	// stdOpts are crypto/ed25519's rules in voi (packet.NaClFoot's).
	stdOpts = &voi.Options{Verify: voi.VerifyOptionsStdLib}
)

// BenchmarkEd25519 measures one signature's signing or verification (1 KiB
// packets, one key), on one core.
func BenchmarkEd25519(b *testing.B) {
	priv, msgs, sigs := benchPackets(verifyBatch)
	pub := priv.Public().(ed25519.PublicKey)
	xk, _ := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	vpriv := voi.NewKeyFromSeed(priv.Seed())
	b.Run("sign/stdlib", func(b *testing.B) {
		for i := range b.N {
			ed25519.Sign(priv, msgs[i%verifyBatch])
		}
	})
	b.Run("sign/voi", func(b *testing.B) {
		for i := range b.N {
			voi.Sign(vpriv, msgs[i%verifyBatch])
		}
	})
	b.Run("verify/stdlib", func(b *testing.B) {
		for i := range b.N {
			if !ed25519.Verify(pub, msgs[i%verifyBatch], sigs[i%verifyBatch]) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("verify/voi-stdlib-rules", func(b *testing.B) {
		for i := range b.N {
			if !voi.VerifyWithOptions(voi.PublicKey(pub), msgs[i%verifyBatch], sigs[i%verifyBatch], stdOpts) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("verify/voi-expanded-stdlib-rules", func(b *testing.B) {
		for i := range b.N {
			if !voi.VerifyExpandedWithOptions(xk, msgs[i%verifyBatch], sigs[i%verifyBatch], stdOpts) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run(fmt.Sprintf("verify/voi-batch%d-cofactored", verifyBatch), func(b *testing.B) {
		bv := voi.NewBatchVerifierWithCapacity(verifyBatch)
		for i := 0; i < b.N; i += verifyBatch {
			bv.Reset()
			for j := range verifyBatch {
				bv.AddExpandedWithOptions(xk, msgs[j], sigs[j], batchOpts)
			}
			if !bv.VerifyBatchOnly(nil) {
				b.Fatal("rejected")
			}
		}
	})
}

// BenchmarkEd25519Ceiling signs and verifies 1 KiB packets on every core
// at once (b.RunParallel), as a pair of stacks does for each packet, with
// no I/O: packets/s is the reference profile's crypto ceiling with each
// verifier.
func BenchmarkEd25519Ceiling(b *testing.B) {
	priv, msgs, _ := benchPackets(verifyBatch)
	pub := priv.Public().(ed25519.PublicKey)
	xk, _ := voi.NewExpandedPublicKey(voi.PublicKey(pub))
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "packets/s")
	}
	b.Run("stdlib", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				m := msgs[i%verifyBatch]
				if !ed25519.Verify(pub, m, ed25519.Sign(priv, m)) {
					b.Error("rejected")
				}
				i++
			}
		})
		report(b)
	})
	vpriv := voi.NewKeyFromSeed(priv.Seed())
	b.Run("voi-stdlib-rules", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				m := msgs[i%verifyBatch]
				if !voi.VerifyWithOptions(voi.PublicKey(pub), m, voi.Sign(vpriv, m), stdOpts) {
					b.Error("rejected")
				}
				i++
			}
		})
		report(b)
	})
	b.Run(fmt.Sprintf("stdlib-sign-voi-batch%d", verifyBatch), func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			bv := voi.NewBatchVerifierWithCapacity(verifyBatch)
			i := 0
			for pb.Next() {
				m := msgs[i%verifyBatch]
				bv.AddExpandedWithOptions(xk, m, ed25519.Sign(priv, m), batchOpts)
				if i++; i%verifyBatch == 0 {
					if !bv.VerifyBatchOnly(nil) {
						b.Error("rejected")
					}
					bv.Reset()
				}
			}
		})
		report(b)
	})
}
