package main

// The reference profile's crypto ceiling: how many messages per second
// this machine could carry if the road did nothing but sign and verify
// their Ed25519 feet, on every core, with no I/O. It takes the packets one
// windowed message really makes (captured with road.Config.Tap from a
// message sent between two reference-profile stacks: its segments, any
// ack or resend, and its done, with their real sizes), and signs and
// verifies each of them on every core, as the two ends of a run do
// between them. "raet reference ceiling" verifies with the verifier the
// road uses (packet.NaClFoot: curve25519-voi with the standard library's
// rules); "raet ref ceiling voi batch" verifies in batches of up to 64
// with curve25519-voi's batch verifier, which the road does not use (it is
// cofactored and answers differently on edge vectors; see
// packet.stdlibRules).

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/packet"
	"github.com/raet-go/raet/road"
)

// The names of the ceiling rows, and the row they are the ceiling of.
const (
	ceilingPeer      = "raet reference ceiling"
	batchCeilingPeer = "raet ref ceiling voi batch"
	ceilingOf        = "raet reference"
	udpPeer          = "udp" // the I/O floor per datagram (ioBound)
)

// ceilingBatch is how many signatures the batch verifier takes at once.
const ceilingBatch = 64

// messagePackets sends one message of size bytes (the body the windowed
// mode sends) between two reference-profile stacks and returns every
// datagram of its transaction either stack sent, in the order they went.
func messagePackets(size int) ([][]byte, error) {
	var (
		mu   sync.Mutex
		pkts [][]byte
		on   atomic.Bool
	)
	tap := func(p road.TapPacket) {
		var pk packet.Packet
		// Only the message's own: the end of the join's allow (its last
		// ack, an alive) may still be under way.
		if !p.Out || !on.Load() || packet.Parse(p.Data, &pk) != nil || pk.Head.TransactionKind != codec.TransactionKindMessage {
			return
		}
		mu.Lock()
		pkts = append(pkts, append([]byte(nil), p.Data...))
		mu.Unlock()
	}
	t, err := dialRaet(raetOpts{prof: road.ProfileReference, tap: tap}, true)
	if err != nil {
		return nil, err
	}
	defer t.close()
	on.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Send returns at the done, which the receiver's tap saw before it
	// went out: everything the message made is in pkts.
	if err := t.o.Send(ctx, t.to, map[string]any{"data": strings.Repeat("x", size)}); err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	on.Store(false)
	mu.Lock()
	defer mu.Unlock()
	for _, p := range pkts {
		var pk packet.Packet
		if err := packet.Parse(p, &pk); err != nil || pk.Head.FootKind != codec.FootKindNaCl {
			return nil, fmt.Errorf("a datagram without an Ed25519 foot (%v)", err)
		}
	}
	if len(pkts) == 0 {
		return nil, errors.New("the message made no datagram")
	}
	return pkts, nil
}

// ceilingPeers are the two ceiling rows of the windowed mode.
func ceilingPeers() []peer {
	return []peer{
		{name: ceilingPeer, ceiling: func(size int, dur time.Duration) result { return measureCeiling(ceilingPeer, size, dur, false) }},
		{name: batchCeilingPeer, ceiling: func(size int, dur time.Duration) result { return measureCeiling(batchCeilingPeer, size, dur, true) }},
	}
}

// measureCeiling signs and verifies the packets of one message of size
// bytes over and over for dur on every core (one goroutine each), and
// counts the messages.
func measureCeiling(name string, size int, dur time.Duration, batch bool) result {
	r := result{Peer: name, Size: size, Mode: modeWindowed}
	pkts, err := messagePackets(size)
	if err != nil {
		r.Errors, r.ErrorText = 1, "capture: "+err.Error()
		return r
	}
	var seed [32]byte
	rand.Read(seed[:])
	pub := voi.NewKeyFromSeed(seed[:]).Public().(voi.PublicKey)
	xk, err := voi.NewExpandedPublicKey(pub)
	if err != nil {
		r.Errors, r.ErrorText = 1, err.Error()
		return r
	}
	key := (*[32]byte)(pub)
	foot := packet.NewNaClFoot(&seed, func(uint32) (*[32]byte, bool) { return key, true })
	workers := runtime.GOMAXPROCS(0)
	var (
		msgs, fails atomic.Int64
		wg          sync.WaitGroup
	)
	cpu0 := cpuTime()
	t0 := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newCeilingWorker(pkts, batch)
			for time.Since(t0) < dur {
				fails.Add(int64(w.message(foot, xk)))
				msgs.Add(1)
			}
			fails.Add(int64(w.flush()))
		}()
	}
	wg.Wait()
	el, cpu := time.Since(t0), cpuTime()-cpu0
	r.Count = int(msgs.Load())
	if n := fails.Load(); n > 0 {
		r.Errors, r.ErrorText = int(n), fmt.Sprintf("%d signatures did not verify", n)
	}
	r.MsgsPerS = float64(r.Count) / el.Seconds()
	r.MBPerS = r.MsgsPerS * float64(size) / 1e6
	r.PktsPerMsg = float64(len(pkts))
	if r.Count > 0 {
		r.CPUusPerMsg = float64(cpu.Nanoseconds()) / 1e3 / float64(r.Count)
	}
	return r
}

// ceilingWorker is one core's copies of a message's packets; with batch,
// as many copies as a batch spans, since a pending batch entry points
// into its packet.
type ceilingWorker struct {
	copies [][][]byte
	next   int
	bv     *voi.BatchVerifier // nil: one verification per packet
	queued int
	sigs   [ceilingBatch][packet.NaClFootSize]byte // the queued signatures
}

func newCeilingWorker(pkts [][]byte, batch bool) *ceilingWorker {
	n := 1
	w := &ceilingWorker{}
	if batch {
		n = max(1, (ceilingBatch+len(pkts)-1)/len(pkts))
		w.bv = voi.NewBatchVerifierWithCapacity(ceilingBatch)
	}
	for range n {
		c := make([][]byte, len(pkts))
		for i, p := range pkts {
			c[i] = append([]byte(nil), p...)
		}
		w.copies = append(w.copies, c)
	}
	return w
}

// batchOpts are the verification rules closest to the standard library's
// that batch verification allows.
var batchOpts = &voi.Options{Verify: &voi.VerifyOptions{AllowSmallOrderA: true, AllowSmallOrderR: true, AllowNonCanonicalA: true}}

// message signs and verifies (or queues for the batch) every packet of
// one message, and returns how many failed to verify.
func (w *ceilingWorker) message(foot *packet.NaClFoot, xk *voi.ExpandedPublicKey) int {
	fails := 0
	if w.bv != nil && w.next == 0 {
		fails += w.flush() // the copies are about to be signed again
	}
	pkts := w.copies[w.next]
	w.next = (w.next + 1) % len(w.copies)
	for _, p := range pkts {
		n := len(p) - packet.NaClFootSize
		signed, _ := foot.Sign(p[:n])
		if w.bv == nil {
			if foot.Verify(signed[:n], signed[n:], 0) != nil {
				fails++
			}
			continue
		}
		if w.queued == ceilingBatch {
			fails += w.flush()
		}
		// The signed message is head || coat || zeros (the reference's
		// rule): the signature moves out, the zeros back in.
		sig := w.sigs[w.queued][:]
		copy(sig, signed[n:])
		clear(signed[n:])
		w.bv.AddExpandedWithOptions(xk, signed, sig, batchOpts)
		w.queued++
	}
	return fails
}

// flush verifies the queued batch; it returns how many failed (the whole
// batch when it does not verify).
func (w *ceilingWorker) flush() int {
	if w.bv == nil || w.queued == 0 {
		return 0
	}
	n := w.queued
	ok := w.bv.VerifyBatchOnly(nil)
	w.bv.Reset()
	w.queued = 0
	if !ok {
		return n
	}
	return 0
}
