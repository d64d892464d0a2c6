package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	kcp "github.com/xtaci/kcp-go/v5"

	"github.com/raet-go/raet/codec"
	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/road"
)

// A transport carries messages from a client to a server on loopback; the
// server answers each message with a small ack carrying its id. send is
// called from one goroutine, recvAck from another; recvAck returns the id
// of each message whose ack arrived (every message is acked once).
type transport interface {
	send(id uint64, payload []byte) error
	recvAck() (uint64, error)
	close()
}

// A peer makes a fresh client/server pair for one measurement.
type peer struct {
	name string
	dial func() (transport, error)
}

func peers(raetFastMPS int) []peer {
	ps := []peer{
		{"udp", dialUDP},
		{"kcp-go aes-gcm", dialKCP},
		{"quic-go 1 stream", dialQUIC},
		{"raet reference", func() (transport, error) { return dialRaet(road.ProfileReference, 0) }},
		{"raet fast", func() (transport, error) { return dialRaet(road.ProfileAuto, 0) }},
	}
	if raetFastMPS > 0 {
		ps = append(ps, peer{fmt.Sprintf("raet fast mps %d", raetFastMPS),
			func() (transport, error) { return dialRaet(road.ProfileAuto, raetFastMPS) }})
	}
	return ps
}

// result is one measurement: one peer, one size.
type result struct {
	Peer     string  `json:"peer"`
	Size     int     `json:"size"`
	Count    int     `json:"count"`
	Errors   int     `json:"errors"`
	MsgsPerS float64 `json:"msgs_per_s"`
	MBPerS   float64 `json:"mb_per_s"`
	RTTP50us float64 `json:"rtt_p50_us"`
	RTTP99us float64 `json:"rtt_p99_us"`
	// IdleP50us is the RTT p50 of a separate, shorter run with one message
	// in flight (latency without queueing).
	IdleP50us float64 `json:"idle_rtt_p50_us"`
	ErrorText string  `json:"error,omitempty"`
}

// measure sends messages of size bytes for dur (at least one message),
// window in flight, and waits for their acks.
func measure(p peer, size, window int, dur, timeout time.Duration) result {
	r := result{Peer: p.name, Size: size}
	t, err := p.dial()
	if err != nil {
		r.Errors, r.ErrorText = 1, err.Error()
		return r
	}
	defer t.close()
	payload := []byte(strings.Repeat("x", size))
	sem := make(chan struct{}, window)
	var mu sync.Mutex
	starts := map[uint64]time.Time{}
	var rtts []time.Duration
	sent := make(chan uint64, 1) // total sent, once the sender stops
	sendErr := make(chan error, 1)
	t0 := time.Now()
	go func() {
		var id uint64
		for time.Since(t0) < dur || id == 0 {
			sem <- struct{}{}
			mu.Lock()
			starts[id] = time.Now()
			mu.Unlock()
			if err := t.send(id, payload); err != nil {
				sendErr <- err
				break
			}
			id++
		}
		sent <- id
	}()
	acks := make(chan uint64, window)
	recvErr := make(chan error, 1)
	go func() {
		for {
			id, err := t.recvAck()
			if err != nil {
				recvErr <- err
				return
			}
			acks <- id
		}
	}()
	total := uint64(1 << 63)
	got := uint64(0)
	deadline := time.NewTimer(dur + timeout)
	defer deadline.Stop()
	for got < total {
		select {
		case id := <-acks:
			now := time.Now()
			mu.Lock()
			st, ok := starts[id]
			delete(starts, id)
			mu.Unlock()
			if ok {
				rtts = append(rtts, now.Sub(st))
				got++
			}
			<-sem
		case n := <-sent:
			total = n
		case err := <-sendErr:
			r.ErrorText = "send: " + err.Error()
			total = got
		case err := <-recvErr:
			r.ErrorText = "receive: " + err.Error()
			total = got
		case <-deadline.C:
			r.ErrorText = "timeout waiting for acks"
			total = got
		}
	}
	el := time.Since(t0)
	mu.Lock()
	r.Errors = len(starts)
	if r.ErrorText != "" && r.Errors == 0 {
		r.Errors = 1
	}
	mu.Unlock()
	r.Count = len(rtts)
	r.MsgsPerS = float64(r.Count) / el.Seconds()
	r.MBPerS = r.MsgsPerS * float64(size) / 1e6
	if len(rtts) > 0 {
		slices.Sort(rtts)
		r.RTTP50us = float64(rtts[len(rtts)/2].Nanoseconds()) / 1e3
		r.RTTP99us = float64(rtts[len(rtts)*99/100].Nanoseconds()) / 1e3
	}
	return r
}

// ---- raw UDP: one datagram per message (messages over maxDatagram are
// sent as several datagrams, each acked; the message is done when all are).

const maxDatagram = 65000

type udpTransport struct {
	c, s    *net.UDPConn
	pending map[uint64]int // acks still missing per message
	mu      sync.Mutex
	buf     []byte
	wg      sync.WaitGroup
}

func dialUDP() (transport, error) {
	s, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	c, err := net.DialUDP("udp", nil, s.LocalAddr().(*net.UDPAddr))
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, x := range []*net.UDPConn{s, c} {
		x.SetReadBuffer(8 << 20)
		x.SetWriteBuffer(8 << 20)
	}
	t := &udpTransport{c: c, s: s, pending: map[uint64]int{}, buf: make([]byte, 64)}
	t.wg.Add(1)
	go func() { // the server: ack every datagram with its message id
		defer t.wg.Done()
		b := make([]byte, 1<<16)
		for {
			n, from, err := s.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			if n >= 8 {
				s.WriteToUDPAddrPort(b[:8], from)
			}
		}
	}()
	return t, nil
}

func (t *udpTransport) send(id uint64, p []byte) error {
	n := max(1, (len(p)+maxDatagram-1)/maxDatagram)
	t.mu.Lock()
	t.pending[id] = n
	t.mu.Unlock()
	for i := range n {
		chunk := p[min(i*maxDatagram, len(p)):min((i+1)*maxDatagram, len(p))]
		d := make([]byte, 8+len(chunk))
		binary.BigEndian.PutUint64(d, id)
		copy(d[8:], chunk)
		if _, err := t.c.Write(d); err != nil {
			return err
		}
	}
	return nil
}

func (t *udpTransport) recvAck() (uint64, error) {
	for {
		t.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := t.c.Read(t.buf)
		if err != nil {
			return 0, err
		}
		if n < 8 {
			continue
		}
		id := binary.BigEndian.Uint64(t.buf)
		t.mu.Lock()
		t.pending[id]--
		done := t.pending[id] == 0
		if done {
			delete(t.pending, id)
		}
		t.mu.Unlock()
		if done {
			return id, nil
		}
	}
}

func (t *udpTransport) close() { t.c.Close(); t.s.Close(); t.wg.Wait() }

// ---- streams (kcp-go, quic-go): frames [id u64][len u32][payload], acks [id u64].

type streamTransport struct {
	w       io.Writer
	r       io.Reader
	hdr     [12]byte
	ack     [8]byte
	closeFn func()
}

func (t *streamTransport) send(id uint64, p []byte) error {
	binary.BigEndian.PutUint64(t.hdr[:], id)
	binary.BigEndian.PutUint32(t.hdr[8:], uint32(len(p)))
	if _, err := t.w.Write(t.hdr[:]); err != nil {
		return err
	}
	_, err := t.w.Write(p)
	return err
}

func (t *streamTransport) recvAck() (uint64, error) {
	if _, err := io.ReadFull(t.r, t.ack[:]); err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(t.ack[:]), nil
}

func (t *streamTransport) close() { t.closeFn() }

// serveStream reads frames from rw and acks each.
func serveStream(rw io.ReadWriter) {
	var hdr [12]byte
	buf := make([]byte, 1<<20)
	for {
		if _, err := io.ReadFull(rw, hdr[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(hdr[8:]))
		if n > len(buf) {
			buf = make([]byte, n)
		}
		if _, err := io.ReadFull(rw, buf[:n]); err != nil {
			return
		}
		if _, err := rw.Write(hdr[:8]); err != nil {
			return
		}
	}
}

// kcpTune is a low-latency configuration (kcptun's "fast2"-like turbo
// mode), large windows, no FEC.
func kcpTune(s *kcp.UDPSession) {
	s.SetNoDelay(1, 10, 2, 1)
	s.SetWindowSize(1024, 1024)
	s.SetStreamMode(true)
	s.SetWriteDelay(false)
	s.SetACKNoDelay(true)
	s.SetReadBuffer(8 << 20)
	s.SetWriteBuffer(8 << 20)
}

func dialKCP() (transport, error) {
	key := make([]byte, 32)
	rand.Read(key)
	bs, err := kcp.NewAESGCMCrypt(key)
	if err != nil {
		return nil, err
	}
	bc, _ := kcp.NewAESGCMCrypt(key)
	ln, err := kcp.ListenWithOptions("127.0.0.1:0", bs, 0, 0)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	srv := make(chan *kcp.UDPSession, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s, err := ln.AcceptKCP()
		if err != nil {
			close(srv)
			return
		}
		kcpTune(s)
		srv <- s
		serveStream(s)
	}()
	c, err := kcp.DialWithOptions(ln.Addr().String(), bc, 0, 0)
	if err != nil {
		ln.Close()
		return nil, err
	}
	kcpTune(c)
	closeFn := func() {
		c.Close()
		ln.Close()
		select {
		case s, ok := <-srv:
			if ok {
				s.Close()
			}
		case <-time.After(time.Second):
		}
		wg.Wait()
	}
	return &streamTransport{w: c, r: c, closeFn: closeFn}, nil
}

func selfSigned() (tls.Certificate, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: k}, nil
}

func dialQUIC() (transport, error) {
	cert, err := selfSigned()
	if err != nil {
		return nil, err
	}
	qc := &quic.Config{MaxStreamReceiveWindow: 16 << 20, MaxConnectionReceiveWindow: 32 << 20, MaxIdleTimeout: time.Minute}
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"raet-bench"}}, qc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := ln.Accept(ctx)
		if err != nil {
			return
		}
		defer conn.CloseWithError(0, "")
		st, err := conn.AcceptStream(ctx)
		if err != nil {
			return
		}
		serveStream(st)
	}()
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	conn, err := quic.DialAddr(dctx, ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"raet-bench"}}, qc)
	if err != nil {
		cancel()
		ln.Close()
		wg.Wait()
		return nil, err
	}
	st, err := conn.OpenStreamSync(dctx)
	if err != nil {
		conn.CloseWithError(0, "")
		cancel()
		ln.Close()
		wg.Wait()
		return nil, err
	}
	closeFn := func() {
		conn.CloseWithError(0, "")
		cancel()
		ln.Close()
		wg.Wait()
	}
	return &streamTransport{w: st, r: st, closeFn: closeFn}, nil
}

// ---- this stack: Send until done is the message and its ack.

type raetTransport struct {
	m, o   *road.Stack
	to     string
	acks   chan uint64
	errs   chan error
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	body   map[string]any
	plen   int
}

func dialRaet(prof road.Profile, fastMPS int) (transport, error) {
	mk := func(name string, main bool) (*road.Stack, error) {
		s, err := road.New(&road.Config{
			Name: name, Main: main, Auto: keep.AutoAlways, Listen: "127.0.0.1:0", AlivePeriod: -1,
			Profile: prof, FastMaxPacketSize: fastMPS, HeadKind: codec.HeadKindRaet, BodyKind: codec.BodyKindJSON,
		})
		if err != nil {
			return nil, err
		}
		return s, s.Start()
	}
	m, err := mk("main", true)
	if err != nil {
		return nil, err
	}
	o, err := mk("other", false)
	if err != nil {
		m.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	jctx, jcancel := context.WithTimeout(ctx, 10*time.Second)
	rem, err := o.Join(jctx, m.Addr().String())
	jcancel()
	if err != nil {
		cancel()
		o.Close()
		m.Close()
		return nil, fmt.Errorf("join: %w", err)
	}
	t := &raetTransport{m: m, o: o, to: rem.Name, acks: make(chan uint64, 1024), errs: make(chan error, 1), ctx: ctx, cancel: cancel}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.Receive():
			}
		}
	}()
	return t, nil
}

func (t *raetTransport) send(id uint64, p []byte) error {
	if t.body == nil || t.plen != len(p) {
		t.body, t.plen = map[string]any{"data": string(p)}, len(p)
	}
	body := t.body
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		if err := t.o.Send(t.ctx, t.to, body); err != nil {
			select {
			case t.errs <- err:
			default:
			}
			return
		}
		select {
		case t.acks <- id:
		case <-t.ctx.Done():
		}
	}()
	return nil
}

func (t *raetTransport) recvAck() (uint64, error) {
	select {
	case id := <-t.acks:
		return id, nil
	case err := <-t.errs:
		return 0, err
	case <-t.ctx.Done():
		return 0, errors.New("closed")
	}
}

func (t *raetTransport) close() {
	t.cancel()
	t.o.Close()
	t.m.Close()
	t.wg.Wait()
}
