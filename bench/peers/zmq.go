package main

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"time"

	zmq "github.com/pebbe/zmq4"
)

// zmqPair is two ZeroMQ sockets of a pattern on one context, connected
// over TCP on loopback: server binds, client connects. It is the one
// ZeroMQ implementation the rows share: PUSH/PULL (one-way), DEALER/REP
// (request/reply) and, for the pattern benchmarks, PUB/SUB (more clients
// connect with dialClient). A socket belongs to one goroutine at a time,
// as libzmq wants.
type zmqPair struct {
	ctx      *zmq.Context
	endpoint string
	server   *zmq.Socket
	clients  []*zmq.Socket
}

// zmqTimeout bounds every blocking receive, so that a lost peer fails a
// measurement instead of hanging it.
const zmqTimeout = 5 * time.Second

func newZMQPair(serverType, clientType zmq.Type) (*zmqPair, error) {
	ctx, err := zmq.NewContext()
	if err != nil {
		return nil, fmt.Errorf("zmq context: %w", err)
	}
	p := &zmqPair{ctx: ctx}
	if p.server, err = p.socket(serverType); err != nil {
		p.close()
		return nil, err
	}
	// libzmq binds in the calling thread (and connects in its own).
	if err := onServer(func() error { return p.server.Bind("tcp://" + link.serverIP + ":*") }); err != nil {
		p.close()
		return nil, fmt.Errorf("zmq bind: %w", err)
	}
	if p.endpoint, err = p.server.GetLastEndpoint(); err != nil {
		p.close()
		return nil, fmt.Errorf("zmq endpoint: %w", err)
	}
	if _, err := p.dialClient(clientType); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// socket makes a socket that drops nothing on its side (no high-water
// mark: the harness bounds what is in flight) and does not linger on close.
func (p *zmqPair) socket(t zmq.Type) (*zmq.Socket, error) {
	s, err := p.ctx.NewSocket(t)
	if err != nil {
		return nil, fmt.Errorf("zmq socket: %w", err)
	}
	for _, set := range []func() error{
		func() error { return s.SetLinger(0) },
		func() error { return s.SetSndhwm(0) },
		func() error { return s.SetRcvhwm(0) },
		func() error { return s.SetRcvtimeo(zmqTimeout) },
	} {
		if err := set(); err != nil {
			s.Close()
			return nil, fmt.Errorf("zmq option: %w", err)
		}
	}
	return s, nil
}

// dialClient connects one more client socket to the server.
func (p *zmqPair) dialClient(t zmq.Type) (*zmq.Socket, error) {
	s, err := p.socket(t)
	if err != nil {
		return nil, err
	}
	if err := s.Connect(p.endpoint); err != nil {
		s.Close()
		return nil, fmt.Errorf("zmq connect: %w", err)
	}
	p.clients = append(p.clients, s)
	return s, nil
}

func (p *zmqPair) close() {
	for _, s := range p.clients {
		s.Close()
	}
	if p.server != nil {
		p.server.Close()
	}
	p.ctx.Term()
}

// zmqSend sends one message as two frames: the id, then the payload. more
// prefixes frames (an empty delimiter for REP's envelope).
func zmqSend(s *zmq.Socket, id uint64, payload []byte, more ...[]byte) error {
	var hdr [8]byte
	binary.BigEndian.PutUint64(hdr[:], id)
	for _, f := range more {
		if _, err := s.SendBytes(f, zmq.SNDMORE); err != nil {
			return err
		}
	}
	if _, err := s.SendBytes(hdr[:], zmq.SNDMORE); err != nil {
		return err
	}
	_, err := s.SendBytes(payload, 0)
	return err
}

// zmqRecv receives a message zmqSend sent, skipping skip leading frames.
func zmqRecv(s *zmq.Socket, skip int) (uint64, []byte, error) {
	fs, err := s.RecvMessageBytes(0)
	if err != nil {
		return 0, nil, err
	}
	if len(fs) != skip+2 || len(fs[skip]) != 8 {
		return 0, nil, fmt.Errorf("zmq: %d frames, want %d", len(fs), skip+2)
	}
	return binary.BigEndian.Uint64(fs[skip]), fs[skip+1], nil
}

// ---- PUSH/PULL, one-way.

type zmqPushPull struct{ p *zmqPair }

func dialZMQPushPull() (oneWay, error) {
	p, err := newZMQPair(zmq.PULL, zmq.PUSH)
	if err != nil {
		return nil, err
	}
	return zmqPushPull{p}, nil
}

func (z zmqPushPull) send(id uint64, b []byte) error { return zmqSend(z.p.clients[0], id, b) }
func (z zmqPushPull) recv() (uint64, []byte, error)  { return zmqRecv(z.p.server, 0) }
func (z zmqPushPull) close()                         { z.p.close() }
func (zmqPushPull) ownRecv()                         {}

// ---- REQ/REP, windowed: the client is a DEALER speaking REQ's envelope
// (an empty delimiter frame), so that it can have a window of requests
// outstanding where a REQ socket allows one; the server is a REP socket.
// A DEALER is one socket for both directions, so the harness drives it
// from one goroutine (serial).

type zmqReqRep struct {
	p    *zmqPair
	wg   chan struct{}
	stop chan struct{}
}

func dialZMQReqRep() (transport, error) {
	p, err := newZMQPair(zmq.REP, zmq.DEALER)
	if err != nil {
		return nil, err
	}
	// The server wakes this often to see whether it should stop.
	if err := p.server.SetRcvtimeo(50 * time.Millisecond); err != nil {
		p.close()
		return nil, fmt.Errorf("zmq option: %w", err)
	}
	z := &zmqReqRep{p: p, wg: make(chan struct{}), stop: make(chan struct{})}
	go func() { // the server: answer each request with its id
		defer close(z.wg)
		for {
			id, _, err := zmqRecv(p.server, 0)
			if err != nil {
				if zmq.AsErrno(err) == zmq.Errno(syscall.EAGAIN) { // the receive timeout
					select {
					case <-z.stop:
						return
					default:
						continue
					}
				}
				return
			}
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], id)
			if _, err := p.server.SendBytes(b[:], 0); err != nil {
				return
			}
		}
	}()
	return z, nil
}

func (z *zmqReqRep) serial() {}

func (z *zmqReqRep) send(id uint64, b []byte) error {
	return zmqSend(z.p.clients[0], id, b, nil)
}

func (z *zmqReqRep) recvAck() (uint64, error) {
	fs, err := z.p.clients[0].RecvMessageBytes(0)
	if err != nil {
		return 0, err
	}
	if len(fs) != 2 || len(fs[0]) != 0 || len(fs[1]) != 8 {
		return 0, fmt.Errorf("zmq: bad reply (%d frames)", len(fs))
	}
	return binary.BigEndian.Uint64(fs[1]), nil
}

func (z *zmqReqRep) close() {
	close(z.stop)
	<-z.wg // the server goroutine leaves within 50 ms
	z.p.close()
}
