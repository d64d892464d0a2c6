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
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

// serial is a transport whose send and recvAck must be called from one
// goroutine (a ZeroMQ socket): the harness interleaves them.
type serial interface{ serial() }

// A peer makes a fresh client/server pair for one measurement: dial for the
// windowed mode, oneWay for the one-way mode; either may be nil (a
// pattern that has no such mode, as PUSH/PULL has no answers).
type peer struct {
	name   string
	dial   func() (transport, error)
	oneWay func() (oneWay, error)
	// ceiling, for a row of the windowed mode that measures no transport
	// (ceiling.go), measures size bytes for dur.
	ceiling func(size int, dur time.Duration) result
}

func peers(raetFastMPS int) []peer {
	raet := func(o raetOpts) peer {
		name := "raet fast"
		switch {
		case o.prof == road.ProfileReference:
			name = "raet reference"
		case o.mps > 0:
			name = fmt.Sprintf("raet fast mps %d", o.mps)
		case o.noBundle:
			name = "raet fast no bundling"
		case o.mapping:
			name = "raet fast json"
		}
		dial := func() (transport, error) {
			t, err := dialRaet(o, true)
			if err != nil {
				return nil, err
			}
			return t, nil
		}
		return peer{name: name, dial: dial, oneWay: func() (oneWay, error) { return dialRaetOneWay(o) }}
	}
	ps := []peer{
		{name: udpPeer, dial: dialUDP, oneWay: dialUDPOneWay},
		{name: "kcp-go aes-gcm", dial: dialKCP, oneWay: func() (oneWay, error) { return dialOneWayStream(dialKCPStreams) }},
		{name: "quic-go 1 stream", dial: dialQUIC, oneWay: func() (oneWay, error) { return dialOneWayStream(dialQUICStreams) }},
	}
	ps = append(ps, withCC(peer{name: "zeromq push/pull", oneWay: dialZMQPushPull})...)
	ps = append(ps, withCC(peer{name: "zeromq req/rep", dial: dialZMQReqRep})...)
	ps = append(ps, withCC(peer{name: "nats core", dial: dialNATSReqRep, oneWay: dialNATSPubSub})...)
	ps = append(ps, raet(raetOpts{prof: road.ProfileReference, mapping: true}))
	ps = append(ps, ceilingPeers()...) // measured right after the row they bound
	ps = append(ps,
		raet(raetOpts{prof: road.ProfileAuto}),
		raet(raetOpts{prof: road.ProfileAuto, mapping: true}),
		raet(raetOpts{prof: road.ProfileAuto, noBundle: true}),
		peer{name: "raet bus req/rep", dial: dialBusReqRep},
	)
	if raetFastMPS > 0 {
		ps = append(ps, raet(raetOpts{prof: road.ProfileAuto, mps: raetFastMPS}))
	}
	return ps
}

const (
	modeWindowed = "windowed"
	modeOneWay   = "one-way"
)

// cpuTime is the CPU time this process (every thread: both ends of a
// peer, and an in-process server) has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// result is one measurement: one peer, one size, one mode.
type result struct {
	Peer   string `json:"peer"`
	Mode   string `json:"mode"`
	Size   int    `json:"size"`
	Subs   int    `json:"subs,omitempty"` // fan-out: subscribers
	Count  int    `json:"count"`
	Errors int    `json:"errors"`
	// Lost counts the messages a lossy peer (raw UDP, one-way) lost.
	Lost     int     `json:"lost,omitempty"`
	MsgsPerS float64 `json:"msgs_per_s"`
	MBPerS   float64 `json:"mb_per_s"`
	// CPUusPerMsg is the process's CPU time (both ends) per message counted.
	CPUusPerMsg float64 `json:"cpu_us_per_msg"`
	// PktsPerMsg is how many datagrams both ends sent per message (the
	// road stack and raw UDP, windowed; the ceiling rows: the packets
	// signed and verified per message).
	PktsPerMsg float64 `json:"pkts_per_msg,omitempty"`
	// OfCeiling is, for the reference profile's row, its msgs/s over its
	// crypto ceiling's in the same run, and for the batch ceiling's row,
	// its msgs/s over the road verifier's ceiling (ceiling.go).
	OfCeiling float64 `json:"of_ceiling,omitempty"`
	// OfCeilingIO is, for the reference profile's row, its msgs/s over
	// the ceiling with the I/O floor added (ioBound) in the same run.
	OfCeilingIO float64 `json:"of_ceiling_io,omitempty"`
	RTTP50us    float64 `json:"rtt_p50_us,omitempty"`
	RTTP99us    float64 `json:"rtt_p99_us,omitempty"`
	RTTP999us   float64 `json:"rtt_p999_us,omitempty"`
	// BulkMbitPerS is the goodput of the TCP bulk flow that ran beside
	// the measurement over a link (-bulk), over the row's whole time.
	BulkMbitPerS float64 `json:"bulk_mbit_per_s,omitempty"`
	// IdleP50us is the RTT p50 of a separate, shorter run with one message
	// in flight (latency without queueing).
	IdleP50us float64 `json:"idle_rtt_p50_us,omitempty"`
	ErrorText string  `json:"error,omitempty"`
}

// measure sends messages of size bytes for dur (at least one message),
// window in flight, and waits for their acks.
func measure(p peer, size, window int, dur, timeout time.Duration) (r result) {
	r = result{Peer: p.name, Size: size, Mode: modeWindowed}
	cpu0 := cpuTime()
	t, err := p.dial()
	if err != nil {
		r.Errors, r.ErrorText = 1, err.Error()
		return r
	}
	defer t.close()
	payload := []byte(strings.Repeat("x", size))
	if _, ok := t.(serial); ok {
		return measureSerial(r, t, payload, window, dur, timeout, cpu0)
	}
	if pc, ok := t.(packetCounter); ok {
		p0 := pc.packets()
		defer func() {
			if r.Count > 0 {
				r.PktsPerMsg = float64(pc.packets()-p0) / float64(r.Count)
			}
		}()
	}
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
	missing := len(starts)
	mu.Unlock()
	return summarize(r, rtts, missing, el, cpuTime()-cpu0)
}

// measureSerial is measure for a serial transport: one goroutine sends
// while fewer than window are in flight (and time is left), else waits
// for an ack.
func measureSerial(r result, t transport, payload []byte, window int, dur, timeout time.Duration, cpu0 time.Duration) result {
	starts := map[uint64]time.Time{}
	var rtts []time.Duration
	t0 := time.Now()
	var id uint64
	for {
		sending := time.Since(t0) < dur || id == 0
		if sending && len(starts) < window {
			starts[id] = time.Now()
			if err := t.send(id, payload); err != nil {
				r.ErrorText = "send: " + err.Error()
				break
			}
			id++
			continue
		}
		if len(starts) == 0 {
			break
		}
		if time.Since(t0) > dur+timeout {
			r.ErrorText = "timeout waiting for acks"
			break
		}
		got, err := t.recvAck()
		if err != nil {
			r.ErrorText = "receive: " + err.Error()
			break
		}
		if st, ok := starts[got]; ok {
			rtts = append(rtts, time.Since(st))
			delete(starts, got)
		}
	}
	return summarize(r, rtts, len(starts), time.Since(t0), cpuTime()-cpu0)
}

// summarize fills in a windowed result from its round trips; missing
// messages were never acked.
func summarize(r result, rtts []time.Duration, missing int, el, cpu time.Duration) result {
	r.Errors = missing
	if r.ErrorText != "" && r.Errors == 0 {
		r.Errors = 1
	}
	r.Count = len(rtts)
	r.MsgsPerS = float64(r.Count) / el.Seconds()
	r.MBPerS = r.MsgsPerS * float64(r.Size) / 1e6
	if len(rtts) > 0 {
		slices.Sort(rtts)
		r.RTTP50us = float64(rtts[len(rtts)/2].Nanoseconds()) / 1e3
		r.RTTP99us = float64(rtts[len(rtts)*99/100].Nanoseconds()) / 1e3
		r.RTTP999us = float64(rtts[len(rtts)*999/1000].Nanoseconds()) / 1e3
		r.CPUusPerMsg = float64(cpu.Nanoseconds()) / 1e3 / float64(len(rtts))
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
	sent    atomic.Uint64 // datagrams both ends sent (packets)
}

// udpLoopback is a server socket on loopback and a client connected to it,
// both with 8 MiB buffers.
func udpLoopback() (c, s *net.UDPConn, err error) {
	if err = onServer(func() (err error) {
		s, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(link.serverIP), 0)))
		return err
	}); err != nil {
		return nil, nil, err
	}
	c, err = net.DialUDP("udp", nil, s.LocalAddr().(*net.UDPAddr))
	if err != nil {
		s.Close()
		return nil, nil, err
	}
	for _, x := range []*net.UDPConn{s, c} {
		x.SetReadBuffer(8 << 20)
		x.SetWriteBuffer(8 << 20)
	}
	return c, s, nil
}

func dialUDP() (transport, error) {
	c, s, err := udpLoopback()
	if err != nil {
		return nil, err
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
				// Counted before it goes, so that the client that counts
				// the message done on this ack finds it counted.
				t.sent.Add(1)
				if _, err := s.WriteToUDPAddrPort(b[:8], from); err != nil {
					t.sent.Add(^uint64(0))
				}
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
		t.sent.Add(1) // before it goes, as the server's acks
		if _, err := t.c.Write(d); err != nil {
			t.sent.Add(^uint64(0))
			return err
		}
	}
	return nil
}

// packets is how many datagrams both ends sent: the messages' and the
// acks' (the I/O floor of the reference row, ioBound, is per datagram).
func (t *udpTransport) packets() uint64 { return t.sent.Load() }

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

// udpOneWay sends each message as datagrams [id u64][chunk u16][chunks u16]
// [up to maxDatagram bytes]; the receiver puts a message together from its
// chunks in order, and a message missing a chunk is lost.
type udpOneWay struct {
	c, s *net.UDPConn
	out  []byte
	in   []byte
	msg  []byte
}

func dialUDPOneWay() (oneWay, error) {
	c, s, err := udpLoopback()
	if err != nil {
		return nil, err
	}
	return &udpOneWay{c: c, s: s, out: make([]byte, 12+maxDatagram), in: make([]byte, 1<<16)}, nil
}

func (*udpOneWay) lossy() {}

func (t *udpOneWay) send(id uint64, p []byte) error {
	n := max(1, (len(p)+maxDatagram-1)/maxDatagram)
	for i := range n {
		chunk := p[min(i*maxDatagram, len(p)):min((i+1)*maxDatagram, len(p))]
		binary.BigEndian.PutUint64(t.out, id)
		binary.BigEndian.PutUint16(t.out[8:], uint16(i))
		binary.BigEndian.PutUint16(t.out[10:], uint16(n))
		if _, err := t.c.Write(t.out[:12+copy(t.out[12:], chunk)]); err != nil {
			return err
		}
	}
	return nil
}

func (t *udpOneWay) recv() (uint64, []byte, error) {
	var cur uint64
	have := 0 // chunks of cur put together
	for {
		t.s.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := t.s.Read(t.in)
		if err != nil {
			return 0, nil, err
		}
		if n < 12 {
			continue
		}
		id := binary.BigEndian.Uint64(t.in)
		i, chunks := int(binary.BigEndian.Uint16(t.in[8:])), int(binary.BigEndian.Uint16(t.in[10:]))
		switch {
		case i == 0:
			cur, have, t.msg = id, 0, t.msg[:0]
		case id != cur || i != have:
			have = -1 // a chunk went missing: wait for the next message
			continue
		}
		t.msg = append(t.msg, t.in[12:n]...)
		have++
		if have == chunks {
			return id, t.msg, nil
		}
	}
}

func (t *udpOneWay) close() { t.c.Close(); t.s.Close() }

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
	var f frameReader
	for {
		id, _, err := f.read(rw)
		if err != nil {
			return
		}
		var ack [8]byte
		binary.BigEndian.PutUint64(ack[:], id)
		if _, err := rw.Write(ack[:]); err != nil {
			return
		}
	}
}

// frameReader reads the frames streamTransport.send writes; the payload it
// returns is valid until the next read.
type frameReader struct {
	hdr [12]byte
	buf []byte
}

func (f *frameReader) read(r io.Reader) (uint64, []byte, error) {
	if _, err := io.ReadFull(r, f.hdr[:]); err != nil {
		return 0, nil, err
	}
	n := int(binary.BigEndian.Uint32(f.hdr[8:]))
	if n > 64<<20 {
		return 0, nil, fmt.Errorf("a %d-byte frame", n)
	}
	if n > len(f.buf) {
		f.buf = make([]byte, n)
	}
	if _, err := io.ReadFull(r, f.buf[:n]); err != nil {
		return 0, nil, err
	}
	return binary.BigEndian.Uint64(f.hdr[:]), f.buf[:n], nil
}

// oneWayStream streams frames over a client stream; the receiver reads
// them from the server's end.
type oneWayStream struct {
	streamTransport
	srv  chan io.ReadWriter // the server's end, once accepted
	rd   io.Reader
	f    frameReader
	quit chan struct{}
}

func dialOneWayStream(dial dialStreams) (oneWay, error) {
	t := &oneWayStream{srv: make(chan io.ReadWriter, 1), quit: make(chan struct{})}
	c, closeFn, err := dial(func(rw io.ReadWriter) {
		t.srv <- rw
		<-t.quit // the receiver reads rw until close
	})
	if err != nil {
		return nil, err
	}
	t.streamTransport = streamTransport{w: c, r: c, closeFn: closeFn}
	return t, nil
}

func (t *oneWayStream) recv() (uint64, []byte, error) {
	if t.rd == nil {
		select {
		case t.rd = <-t.srv:
		case <-time.After(10 * time.Second):
			return 0, nil, errors.New("the server's end was never accepted")
		}
	}
	return t.f.read(t.rd)
}

func (t *oneWayStream) close() { close(t.quit); t.closeFn() }

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

func dialKCP() (transport, error) { return dialStreamTransport(dialKCPStreams) }

func dialQUIC() (transport, error) { return dialStreamTransport(dialQUICStreams) }

// dialStreams connects a client stream to a server that runs serve on its
// end; closeFn ends both (serve must return once its stream fails).
type dialStreams func(serve func(io.ReadWriter)) (client io.ReadWriter, closeFn func(), err error)

func dialStreamTransport(dial dialStreams) (transport, error) {
	c, closeFn, err := dial(serveStream)
	if err != nil {
		return nil, err
	}
	return &streamTransport{w: c, r: c, closeFn: closeFn}, nil
}

func dialKCPStreams(serve func(io.ReadWriter)) (io.ReadWriter, func(), error) {
	key := make([]byte, 32)
	rand.Read(key)
	bs, err := kcp.NewAESGCMCrypt(key)
	if err != nil {
		return nil, nil, err
	}
	bc, _ := kcp.NewAESGCMCrypt(key)
	var ln *kcp.Listener
	if err := onServer(func() (err error) {
		ln, err = kcp.ListenWithOptions(anyPort(link.serverIP), bs, 0, 0)
		return err
	}); err != nil {
		return nil, nil, err
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
		serve(s)
	}()
	c, err := kcp.DialWithOptions(ln.Addr().String(), bc, 0, 0)
	if err != nil {
		ln.Close()
		return nil, nil, err
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
	return c, closeFn, nil
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

func dialQUICStreams(serve func(io.ReadWriter)) (io.ReadWriter, func(), error) {
	cert, err := selfSigned()
	if err != nil {
		return nil, nil, err
	}
	qc := &quic.Config{MaxStreamReceiveWindow: 16 << 20, MaxConnectionReceiveWindow: 32 << 20, MaxIdleTimeout: time.Minute}
	var ln *quic.Listener
	if err := onServer(func() (err error) {
		ln, err = quic.ListenAddr(anyPort(link.serverIP), &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"raet-bench"}}, qc)
		return err
	}); err != nil {
		return nil, nil, err
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
		serve(st)
	}()
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	conn, err := quic.DialAddr(dctx, ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"raet-bench"}}, qc)
	if err != nil {
		cancel()
		ln.Close()
		wg.Wait()
		return nil, nil, err
	}
	st, err := conn.OpenStreamSync(dctx)
	if err != nil {
		conn.CloseWithError(0, "")
		cancel()
		ln.Close()
		wg.Wait()
		return nil, nil, err
	}
	closeFn := func() {
		conn.CloseWithError(0, "")
		cancel()
		ln.Close()
		wg.Wait()
	}
	return st, closeFn, nil
}

// ---- this stack: a message until its done is the message and its ack.
//
// The road rows send with Stack.Go, as a user who wants speed would: one
// goroutine keeps the window in flight and the outcomes come back on one
// channel. Send blocks until its message is done, so keeping 16 (or 1024)
// in flight with it takes a goroutine per message, and those goroutines'
// start and stack growth cost more CPU than the message itself does.
// The payloads are the other peers', and every message is still done by
// the receiver (windowed) or counted and checked there (one-way).
//
// The fast rows send the payload as bytes (a []byte body: body kind raw),
// as every other peer moves it: a mapping body costs a JSON encoding and
// decoding and their copies per message that no other peer pays, so it
// would measure encoding/json beside their transports. "raet fast json"
// sends mapping bodies ({"data": payload}, as JSON) to show that cost; so
// does "raet reference", which stands for the reference's wire as its
// users (Salt) speak it: mappings. One-way, a raw body is [id u64][payload],
// as the udp peer frames it; a mapping body {"id": id, "data": payload}.

type raetTransport struct {
	m, o *road.Stack
	opts raetOpts
	to   string
	// done receives the outcomes; ids maps each Call to the id sent (the
	// windowed body carries only the payload, as the other peers' do).
	done   chan *road.Call
	mu     sync.Mutex
	ids    map[*road.Call]uint64
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	body   map[string]any // the last mapping body sent (windowed), for its payload length
	plen   int
	out    []byte // the last raw body sent (one-way)
}

// inFlight runs each send in a goroutine of its own and gives recvAck its
// id once it is done, or else its error (the first: the run ends at it).
type inFlight struct {
	acks   chan uint64
	errs   chan error
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (f *inFlight) init() {
	f.acks, f.errs = make(chan uint64, 1024), make(chan error, 1)
	f.ctx, f.cancel = context.WithCancel(context.Background())
}

// run calls send in a goroutine; with ack, id goes to recvAck once it is done.
func (f *inFlight) run(id uint64, ack bool, send func(ctx context.Context) error) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		if err := send(f.ctx); err != nil {
			select {
			case f.errs <- err:
			default:
			}
			return
		}
		if !ack {
			return
		}
		select {
		case f.acks <- id:
		case <-f.ctx.Done():
		}
	}()
}

func (f *inFlight) recvAck() (uint64, error) {
	select {
	case id := <-f.acks:
		return id, nil
	case err := <-f.errs:
		return 0, err
	case <-f.ctx.Done():
		return 0, errors.New("closed")
	}
}

// raetOpts is how the benchmarks' road estates differ: the profile, the
// fast profile's packet size (0: the default), whether they bundle,
// whether the messages are mappings (else raw bytes), and a tap that sees
// their datagrams (road.Config.Tap), if not nil.
type raetOpts struct {
	prof     road.Profile
	mps      int
	noBundle bool
	mapping  bool
	tap      func(road.TapPacket)
}

// raetSendQueue is the road estates' Config.SendQueue: room for the
// one-way window (1024 counted at the receiver) and the dones still on
// their way back.
const raetSendQueue = 4096

// newRaetStack starts a road estate on loopback for the benchmarks (over
// a link: the main estate, the receiver, on the server's side).
func newRaetStack(name string, main bool, o raetOpts) (*road.Stack, error) {
	host := link.clientIP
	if main {
		host = link.serverIP
	}
	s, err := road.New(&road.Config{
		Name: name, Main: main, Auto: keep.AutoAlways, Listen: anyPort(host), AlivePeriod: -1,
		Profile: o.prof, FastMaxPacketSize: o.mps, NoBundling: o.noBundle,
		HeadKind: codec.HeadKindRaet, BodyKind: codec.BodyKindJSON, Tap: o.tap, SendQueue: raetSendQueue,
	})
	if err != nil {
		return nil, err
	}
	if main {
		return s, onServer(s.Start)
	}
	return s, s.Start()
}

// dialRaet joins two stacks; with discard, what the receiving one
// receives is read and discarded (the windowed mode), else it is left to
// the caller (the one-way mode reads it).
func dialRaet(opts raetOpts, discard bool) (*raetTransport, error) {
	mk := func(name string, main bool) (*road.Stack, error) { return newRaetStack(name, main, opts) }
	m, err := mk("main", true)
	if err != nil {
		return nil, err
	}
	o, err := mk("other", false)
	if err != nil {
		m.Close()
		return nil, err
	}
	jctx, jcancel := context.WithTimeout(context.Background(), 10*time.Second)
	rem, err := o.Join(jctx, m.Addr().String())
	jcancel()
	if err != nil {
		o.Close()
		m.Close()
		return nil, fmt.Errorf("join: %w", err)
	}
	t := &raetTransport{m: m, o: o, opts: opts, to: rem.Name, done: make(chan *road.Call, raetSendQueue), ids: map[*road.Call]uint64{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	if discard {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			for {
				select {
				case <-t.ctx.Done():
					return
				case <-m.Receive():
				}
			}
		}()
	}
	return t, nil
}

// send sends body to the receiver with Go; with ack, recvAck returns id
// once it is done.
func (t *raetTransport) goSend(id uint64, body any, ack bool) error {
	if ack {
		t.mu.Lock() // before Go: the outcome may come first
		defer t.mu.Unlock()
	}
	c, err := t.o.Go(t.ctx, t.to, body, t.done)
	if err != nil {
		return err
	}
	if ack {
		t.ids[c] = id
	}
	return nil
}

func (t *raetTransport) send(id uint64, p []byte) error {
	if !t.opts.mapping {
		return t.goSend(id, p, true) // Go copies p
	}
	if t.body == nil || t.plen != len(p) {
		t.body, t.plen = map[string]any{"data": string(p)}, len(p)
	}
	return t.goSend(id, t.body, true)
}

func (t *raetTransport) recvAck() (uint64, error) {
	select {
	case c := <-t.done:
		if c.Err != nil {
			return 0, c.Err
		}
		t.mu.Lock()
		id := t.ids[c]
		delete(t.ids, c)
		t.mu.Unlock()
		return id, nil
	case <-t.ctx.Done():
		return 0, errors.New("closed")
	}
}

// raetOneWay sends each message with Go, not waiting for its done (up to
// the credit the harness gives); the receiver reads them from the other
// stack's Receive, and a goroutine reads the outcomes (the first error
// ends the run).
type raetOneWay struct {
	*raetTransport
	data string
	errs chan error
}

func dialRaetOneWay(opts raetOpts) (oneWay, error) {
	t, err := dialRaet(opts, false)
	if err != nil {
		return nil, err
	}
	ow := &raetOneWay{raetTransport: t, errs: make(chan error, 1)}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for {
			select {
			case c := <-t.done:
				if c.Err != nil {
					select {
					case ow.errs <- c.Err:
					default:
					}
				}
			case <-t.ctx.Done():
				return
			}
		}
	}()
	return ow, nil
}

func (*raetOneWay) unordered() {}

func (t *raetOneWay) send(id uint64, p []byte) error {
	if !t.opts.mapping {
		t.out = binary.BigEndian.AppendUint64(t.out[:0], id)
		t.out = append(t.out, p...)
		return t.goSend(id, t.out, false) // Go copies t.out
	}
	if len(t.data) != len(p) {
		t.data = string(p)
	}
	return t.goSend(id, map[string]any{"id": id, "data": t.data}, false)
}

func (t *raetOneWay) recv() (uint64, []byte, error) {
	select {
	case m := <-t.m.Receive():
		if !t.opts.mapping {
			if m.Kind != codec.BodyKindRaw || len(m.Raw) < 8 {
				return 0, nil, fmt.Errorf("a %v body of %d bytes, not raw [id][payload]", m.Kind, len(m.Raw))
			}
			return binary.BigEndian.Uint64(m.Raw), m.Raw[8:], nil
		}
		id, err := bodyID(m.Body)
		data, ok := m.Body["data"].(string)
		if err != nil || !ok {
			return 0, nil, fmt.Errorf("a body without id (%T) or data (%T)", m.Body["id"], m.Body["data"])
		}
		return id, []byte(data), nil
	case err := <-t.errs:
		return 0, nil, err
	case <-t.ctx.Done():
		return 0, nil, errors.New("closed")
	}
}

// packetCounter is a transport that counts the datagrams it sends.
type packetCounter interface{ packets() uint64 }

// packets is how many datagrams both stacks sent (and sent again).
func (t *raetTransport) packets() uint64 {
	var n uint64
	for _, s := range []*road.Stack{t.m, t.o} {
		c, err := s.Counters(context.Background())
		if err != nil {
			return 0
		}
		for _, v := range c.PacketsOut {
			n += v
		}
		n += c.Retransmits
	}
	return n
}

func (t *raetTransport) close() {
	t.cancel()
	t.o.Close()
	t.m.Close()
	t.wg.Wait()
}
