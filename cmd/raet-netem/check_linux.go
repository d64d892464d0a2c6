package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raet-go/raet/netsim"
)

// ipUDPHeaders is what IPv4 and UDP add to a probe's payload on the link.
const ipUDPHeaders = 28

// probePort is where probes are received, on each end's address.
const probePort = 47530

// tolerance is how far a measured figure may be from the configured one.
const tolerance = 0.05

// measure is one figure of a check, as a JSON line.
type measure struct {
	Event      string  `json:"event"` // "check"
	Proto      string  `json:"proto"` // udp or tcp
	Way        string  `json:"way"`
	What       string  `json:"what"` // delay_ms, jitter_sd_ms, loss, rate_bps, rtt_ms
	Configured float64 `json:"configured"`
	Measured   float64 `json:"measured"`
	Packets    int     `json:"packets"`
	OK         bool    `json:"ok"`
	Note       string  `json:"note,omitempty"`
	// Bridge is what the bridge's way did meanwhile, when it tells where
	// packets went missing: before it (read < sent), in netsim's engine
	// (lost, queue drops) or after it (written > received).
	Bridge *wayCounts `json:"bridge,omitempty"`
}

func newMeasure(proto, way, what string, configured, measured float64, packets int) measure {
	ok := math.Abs(measured-configured) <= tolerance*configured
	if configured == 0 {
		ok = measured == 0
	}
	return measure{Event: "check", Proto: proto, Way: way, What: what, Configured: configured, Measured: measured, Packets: packets, OK: ok}
}

// listenIn opens a UDP socket on addr inside namespace ns.
func listenIn(ns string, addr netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := inNetns(ns, func() error {
		var err error
		c, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(addr))
		return err
	})
	return c, err
}

// serialization is how long imp's rate takes to send size bytes.
func serialization(imp netsim.Impairment, size int) time.Duration {
	if imp.Rate == 0 {
		return 0
	}
	return time.Duration(float64(size) * 8 / imp.Rate * float64(time.Second))
}

// expectedLoss is the fraction imp loses in the long run.
func expectedLoss(imp netsim.Impairment) float64 {
	return imp.Loss + (1-imp.Loss)*imp.Bursts.MeanLoss()
}

// udpProbe sends n probes of size bytes from one end to the other, pps a
// second, and measures their one-way delay (both ends are in this process,
// so one clock times them), its spread and the loss.
type udpProbe struct {
	received int
	median   time.Duration // of the one-way delays
	iqr      time.Duration // their interquartile range
	p999     time.Duration
	loss     float64
	span     time.Duration // from the first probe's arrival to the last's
}

func probeUDP(from, to *end, n, size int, pps float64, settle time.Duration) (udpProbe, error) {
	var r udpProbe
	rx, err := listenIn(to.ns, netip.AddrPortFrom(to.addr, probePort))
	if err != nil {
		return r, fmt.Errorf("probe receiver: %w", err)
	}
	defer rx.Close()
	tx, err := listenIn(from.ns, netip.AddrPortFrom(from.addr, 0))
	if err != nil {
		return r, fmt.Errorf("probe sender: %w", err)
	}
	defer tx.Close()
	_ = rx.SetReadBuffer(4 << 20)
	// The kernel stamps each probe as it arrives, so that how late this
	// process reads it does not count as the link's delay.
	raw, err := rx.SyscallConn()
	if err != nil {
		return r, err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	}); err != nil || serr != nil {
		return r, fmt.Errorf("SO_TIMESTAMPNS: %w", errors.Join(err, serr))
	}

	seen := make([]bool, n)
	delays := make([]time.Duration, 0, n)
	var first, last int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 65536)
		oob := make([]byte, 128)
		for {
			m, oobn, _, _, err := rx.ReadMsgUDP(buf, oob)
			if err != nil {
				return
			}
			at, ok := rxStamp(oob[:oobn])
			if m < 12 || !ok {
				continue
			}
			seq := binary.BigEndian.Uint32(buf)
			if int(seq) >= n || seen[seq] {
				continue
			}
			seen[seq] = true
			delays = append(delays, time.Duration(at-int64(binary.BigEndian.Uint64(buf[4:]))))
			if r.received == 0 {
				first = at
			}
			last = at
			r.received++
		}
	}()
	msg := make([]byte, size)
	dst := netip.AddrPortFrom(to.addr, probePort)
	gap := time.Duration(float64(time.Second) / pps)
	next := time.Now()
	for i := range n {
		// Pace against a schedule, catching up a late sleep's packets but
		// never in a burst longer than 8 (which the link's queue, not its
		// loss, would drop).
		if wait := time.Until(next); wait > 0 {
			time.Sleep(wait)
		} else if -wait > 8*gap {
			next = time.Now()
		}
		next = next.Add(gap)
		binary.BigEndian.PutUint32(msg, uint32(i))
		binary.BigEndian.PutUint64(msg[4:], uint64(time.Now().UnixNano()))
		if _, err := tx.WriteToUDPAddrPort(msg, dst); err != nil && !errors.Is(err, syscall.ENOBUFS) {
			return r, fmt.Errorf("probe send: %w", err)
		}
	}
	time.Sleep(settle)
	_ = rx.Close()
	wg.Wait()
	if r.received > 0 {
		slices.Sort(delays)
		q := func(f float64) time.Duration { return delays[int(f*float64(len(delays)-1))] }
		r.median, r.iqr, r.p999 = q(0.5), q(0.75)-q(0.25), q(0.999)
		r.span = time.Duration(last - first)
	}
	r.loss = 1 - float64(r.received)/float64(n)
	return r, nil
}

// rxStamp finds the kernel's receive time (SCM_TIMESTAMPNS, wall clock in
// nanoseconds) in a datagram's control messages.
func rxStamp(oob []byte) (int64, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0, false
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			sec := int64(binary.NativeEndian.Uint64(m.Data))
			nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
			return sec*1e9 + nsec, true
		}
	}
	return 0, false
}

// checkUDP measures delay, jitter and loss both ways with n probes each,
// sent at the same time. While it runs, jitter may reorder, so that the
// probes can be sent closer together than the jitter and still show its
// configured spread.
func checkUDP(br *bridge, sc *netsim.Scenario, n int) ([]measure, error) {
	const size = 64
	imps := [2]netsim.Impairment{sc.AToB, sc.BToA}
	imps[1].Seed ^= 0xb2a
	var out []measure
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, w := range br.ways {
		imp := imps[i]
		free := imp
		free.JitterReorders = true
		if err := br.set(i, free); err != nil {
			return nil, err
		}
		// Stay under half the link's rate, so that no probe waits in its queue.
		pps := 20000.0
		if imp.Rate > 0 {
			pps = min(pps, imp.Rate/2/float64(8*(size+ipUDPHeaders)))
		}
		settle := 2*(imp.Delay+imp.Jitter+imp.ReorderDelay) + 500*time.Millisecond
		before := w.counts()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := probeUDP(w.from, w.to, n, size, pps, settle)
			delta := w.counts().minus(before)
			if err != nil {
				errs[i] = err
				return
			}
			want := imp.Delay + serialization(imp, size+ipUDPHeaders)
			got := []measure{
				newMeasure("udp", w.name, "delay_ms", ms(want), ms(r.median), r.received),
				newMeasure("udp", w.name, "jitter_iqr_ms", ms(imp.Jitter), ms(r.iqr), r.received),
				newMeasure("udp", w.name, "loss", expectedLoss(imp), r.loss, n),
			}
			got[2].Bridge = &delta
			got[0].Note = fmt.Sprintf("median of the one-way delays (kernel receive stamps); p99.9 %.3f ms", ms(r.p999))
			if imp.Jitter > 0 {
				got[1].Note = "interquartile range of the one-way delays: uniform within delay ± jitter gives jitter"
			}
			if imp.Jitter == 0 {
				// No configured spread: the bridge's own must stay small.
				got[1].OK = r.iqr <= max(want/20, 200*time.Microsecond)
				got[1].Note = "no jitter configured: the spread must stay under 5% of the delay or 0.2 ms"
			}
			if imp.Delay == 0 {
				got[0].OK = r.median <= time.Millisecond
				got[0].Note = "no delay configured: the bridge must add under 1 ms"
			}
			mu.Lock()
			out = append(out, got...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for i := range br.ways {
		if err := br.set(i, imps[i]); err != nil {
			return nil, err
		}
	}
	return out, errors.Join(errs...)
}

// checkRate floods a_to_b with UDP at 1.2 times its rate for dur and
// measures the rate that arrives, headers included.
func checkRate(br *bridge, sc *netsim.Scenario, dur time.Duration) (measure, error) {
	const size = 1200
	imp := sc.AToB
	pps := 1.2 * imp.Rate / float64(8*(size+ipUDPHeaders))
	n := int(pps * dur.Seconds())
	w := br.ways[0]
	if err := br.set(0, lossless(imp)); err != nil {
		return measure{}, err
	}
	defer func() { _ = br.set(0, imp) }()
	r, err := probeUDP(w.from, w.to, n, size, pps, 2*imp.Delay+time.Second)
	if err != nil {
		return measure{}, err
	}
	rate := 0.0
	if r.span > 0 {
		rate = float64(r.received-1) * 8 * (size + ipUDPHeaders) / r.span.Seconds()
	}
	m := newMeasure("udp", w.name, "rate_bps", imp.Rate, rate, r.received)
	m.Note = "offered 1.2x the rate, loss off; IP bytes counted"
	return m, nil
}

// tcpPair connects a TCP connection from side a to side b with congestion
// control cc, returning both ends.
func tcpPair(br *bridge, cc string) (client, server net.Conn, err error) {
	a, b := br.ways[0].from, br.ways[0].to
	var ln net.Listener
	if err := inNetns(b.ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(b.addr, probePort).String())
		return err
	}); err != nil {
		return nil, nil, fmt.Errorf("tcp probe listener: %w", err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	if err := inNetns(a.ns, func() error {
		d := net.Dialer{Timeout: 10 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
			var serr error
			if err := rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, cc)
			}); err != nil {
				return err
			}
			return serr
		}}
		var err error
		client, err = d.Dial("tcp4", netip.AddrPortFrom(b.addr, probePort).String())
		return err
	}); err != nil {
		_ = ln.Close()
		<-accepted
		return nil, nil, fmt.Errorf("tcp probe connect (%s): %w", cc, err)
	}
	server = <-accepted
	if server == nil {
		_ = client.Close()
		return nil, nil, errors.New("tcp probe: accept failed")
	}
	return client, server, nil
}

// lossless returns imp without its loss.
func lossless(imp netsim.Impairment) netsim.Impairment {
	imp.Loss, imp.Bursts = 0, netsim.GilbertElliott{}
	return imp
}

// checkTCPRate runs a TCP bulk transfer from a to b for dur with
// congestion control cc, loss off (so that the congestion control shows
// the link's rate rather than its reaction to loss), and counts the IP
// bytes the bridge carried a to b after the first second.
func checkTCPRate(br *bridge, sc *netsim.Scenario, cc string, dur time.Duration) ([]measure, error) {
	client, server, err := tcpPair(br, cc)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	go func() {
		defer server.Close()
		_, _ = io.Copy(io.Discard, server)
	}()
	w := br.ways[0]
	imps := [2]netsim.Impairment{sc.AToB, sc.BToA}
	imps[1].Seed ^= 0xb2a
	for i := range br.ways {
		if err := br.set(i, lossless(imps[i])); err != nil {
			return nil, err
		}
	}
	defer func() {
		for i := range br.ways {
			_ = br.set(i, imps[i])
		}
	}()
	buf := make([]byte, 64<<10)
	stop := time.Now().Add(dur)
	warm := false
	var bytes0, pkts0 uint64
	var t1 time.Time
	_ = client.SetWriteDeadline(stop)
	for time.Now().Before(stop) {
		if _, err := client.Write(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("tcp probe write: %w", err)
		}
		if !warm && time.Until(stop) < dur-time.Second {
			warm, t1 = true, time.Now()
			bytes0, pkts0 = w.wroteBytes.Load(), w.written.Load()
		}
	}
	bytes, pkts := w.wroteBytes.Load()-bytes0, w.written.Load()-pkts0
	rate := float64(bytes) * 8 / time.Since(t1).Seconds()
	m := newMeasure("tcp", w.name, "rate_bps", sc.AToB.Rate, rate, int(pkts))
	m.Note = "congestion control " + cc + "; loss off; IP bytes the bridge carried after the first second"
	return []measure{m}, nil
}

// checkTCPRTT measures TCP's round trip: conns connections each bounce a
// small message rounds times, loss off (a retransmission is not the
// link's delay) and jitter free to reorder: the connections' packets
// leave together, and a link that keeps its order would give a burst the
// largest of its draws (each connection has one packet in flight, so its
// own order holds).
func checkTCPRTT(br *bridge, sc *netsim.Scenario, conns, rounds int) (measure, error) {
	imps := [2]netsim.Impairment{sc.AToB, sc.BToA}
	imps[1].Seed ^= 0xb2a
	for i := range br.ways {
		free := lossless(imps[i])
		free.JitterReorders = true
		if err := br.set(i, free); err != nil {
			return measure{}, err
		}
	}
	defer func() {
		for i := range br.ways {
			_ = br.set(i, imps[i])
		}
	}()
	var mu sync.Mutex
	var rtts []time.Duration
	var wg sync.WaitGroup
	errs := make([]error, conns)
	for i := range conns {
		client, server, err := tcpPair(br, "cubic")
		if err != nil {
			return measure{}, err
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			defer server.Close()
			_, _ = io.Copy(server, server)
		}()
		go func() {
			defer wg.Done()
			defer client.Close()
			msg := make([]byte, 8)
			for range rounds {
				t := time.Now()
				if _, err := client.Write(msg); err != nil {
					errs[i] = err
					return
				}
				if _, err := io.ReadFull(client, msg); err != nil {
					errs[i] = err
					return
				}
				d := time.Since(t)
				mu.Lock()
				rtts = append(rtts, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return measure{}, fmt.Errorf("tcp ping: %w", err)
	}
	// An 8-byte segment: IP, TCP with timestamps, payload.
	const segment = 20 + 32 + 8
	want := sc.RTT() + serialization(sc.AToB, segment) + serialization(sc.BToA, segment)
	slices.Sort(rtts)
	m := newMeasure("tcp", "round_trip", "rtt_ms", ms(want), ms(rtts[len(rtts)/2]), 2*len(rtts))
	m.Note = "median of small request/response round trips, loss off, jitter free to reorder"
	return m, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
