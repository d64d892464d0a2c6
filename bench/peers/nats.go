package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// natsEnv is a real NATS server started in this process, listening on
// loopback TCP, and the client connections made to it. It is the one NATS
// implementation the rows share: publish/subscribe one-way and
// request/reply windowed here, fan-out and queue groups for the pattern
// benchmarks (connect more clients).
type natsEnv struct {
	srv   *server.Server
	conns []*nats.Conn
}

const natsTimeout = 5 * time.Second

func startNATS() (*natsEnv, error) {
	srv, err := server.NewServer(&server.Options{Host: link.clientIP, Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server: not ready")
	}
	return &natsEnv{srv: srv}, nil
}

// connect opens one more client connection.
func (e *natsEnv) connect(name string) (*nats.Conn, error) {
	nc, err := nats.Connect(e.srv.ClientURL(), nats.Name(name), nats.NoReconnect())
	if err != nil {
		return nil, fmt.Errorf("nats connect: %w", err)
	}
	e.conns = append(e.conns, nc)
	return nc, nil
}

func (e *natsEnv) close() {
	for _, nc := range e.conns {
		nc.Close()
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// natsFrame is a message's data: its id, then the payload.
func natsFrame(id uint64, p []byte) []byte {
	b := make([]byte, 8+len(p))
	binary.BigEndian.PutUint64(b, id)
	copy(b[8:], p)
	return b
}

func natsUnframe(m *nats.Msg) (uint64, []byte, error) {
	if len(m.Data) < 8 {
		return 0, nil, fmt.Errorf("nats: %d-byte message", len(m.Data))
	}
	return binary.BigEndian.Uint64(m.Data), m.Data[8:], nil
}

// subscribeSync subscribes nc to subject for NextMsg, with no pending limit
// (the harness bounds what is in flight; the default limit would drop).
func subscribeSync(nc *nats.Conn, subject string) (*nats.Subscription, error) {
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return nil, fmt.Errorf("nats subscribe: %w", err)
	}
	if err := sub.SetPendingLimits(-1, -1); err != nil {
		return nil, fmt.Errorf("nats pending limits: %w", err)
	}
	// The subscription reaches the server before anything is published.
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("nats flush: %w", err)
	}
	return sub, nil
}

// ---- publish/subscribe, one-way: one publisher, one subscriber, one subject.

type natsPubSub struct {
	env *natsEnv
	pub *nats.Conn
	sub *nats.Subscription
}

func dialNATSPubSub() (oneWay, error) {
	env, err := startNATS()
	if err != nil {
		return nil, err
	}
	t := &natsPubSub{env: env}
	if t.pub, err = env.connect("pub"); err != nil {
		env.close()
		return nil, err
	}
	var sc *nats.Conn
	if err := onServer(func() (err error) {
		sc, err = env.connect("sub") // across the link
		return err
	}); err != nil {
		env.close()
		return nil, err
	}
	if t.sub, err = subscribeSync(sc, "bench.oneway"); err != nil {
		env.close()
		return nil, err
	}
	return t, nil
}

func (t *natsPubSub) send(id uint64, p []byte) error {
	return t.pub.Publish("bench.oneway", natsFrame(id, p))
}

func (t *natsPubSub) recv() (uint64, []byte, error) {
	m, err := t.sub.NextMsg(natsTimeout)
	if err != nil {
		return 0, nil, err
	}
	return natsUnframe(m)
}

func (t *natsPubSub) close() { t.env.close() }

// ---- request/reply, windowed: the client publishes requests with a
// reply subject it subscribes to; a responder on another connection answers
// each with its id.

type natsReqRep struct {
	env  *natsEnv
	cli  *nats.Conn
	acks *nats.Subscription
}

func dialNATSReqRep() (transport, error) {
	env, err := startNATS()
	if err != nil {
		return nil, err
	}
	var rc *nats.Conn
	if err := onServer(func() (err error) {
		rc, err = env.connect("responder") // across the link
		return err
	}); err != nil {
		env.close()
		return nil, err
	}
	if _, err := rc.Subscribe("bench.req", func(m *nats.Msg) {
		if len(m.Data) >= 8 {
			rc.Publish(m.Reply, m.Data[:8])
		}
	}); err != nil {
		env.close()
		return nil, fmt.Errorf("nats subscribe: %w", err)
	}
	if err := rc.Flush(); err != nil {
		env.close()
		return nil, fmt.Errorf("nats flush: %w", err)
	}
	t := &natsReqRep{env: env}
	if t.cli, err = env.connect("requester"); err != nil {
		env.close()
		return nil, err
	}
	if t.acks, err = subscribeSync(t.cli, "bench.ack"); err != nil {
		env.close()
		return nil, err
	}
	return t, nil
}

func (t *natsReqRep) send(id uint64, p []byte) error {
	return t.cli.PublishRequest("bench.req", "bench.ack", natsFrame(id, p))
}

func (t *natsReqRep) recvAck() (uint64, error) {
	m, err := t.acks.NextMsg(natsTimeout)
	if err != nil {
		return 0, err
	}
	if len(m.Data) != 8 {
		return 0, fmt.Errorf("nats: %d-byte reply", len(m.Data))
	}
	return binary.BigEndian.Uint64(m.Data), nil
}

func (t *natsReqRep) close() { t.env.close() }
