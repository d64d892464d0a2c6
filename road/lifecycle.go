package road

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/raet-go/raet/keep"
	"github.com/raet-go/raet/packet"
)

// Start opens the socket (or takes Config.PacketConn) and starts the
// stack's goroutines.
func (s *Stack) Start() error {
	err := ErrClosed
	s.startOnce.Do(func() {
		err = s.start()
	})
	return err
}

func (s *Stack) start() error {
	select {
	case <-s.closing:
		return ErrClosed
	default:
	}
	if err := s.openSocket(); err != nil {
		return err
	}
	s.writerDone = make(chan struct{})
	if s.keep != nil {
		s.kw = s.keep.StartWriter(&keep.WriterConfig{Queue: s.cfg.KeepQueue, OnDurable: s.keepDurable})
		if err := s.core.WriteBehind(s.kw); err != nil {
			s.kw.Close()
			s.conn.Close()
			return err
		}
	}
	s.core.Start(s.addr, time.Now())
	s.core.PublishKeys()
	s.startReaders()
	s.wg.Add(3)
	go s.writeLoop()
	go s.run()
	go s.decodeLoop()
	if bs, ok := s.ser.(packet.BatchSerializer); ok {
		s.wg.Add(1)
		go s.encodeLoop(bs)
	}
	if s.cfg.Queue != nil {
		s.wg.Add(1)
		go s.queueLoop()
	}
	close(s.started)
	s.resendQueued()
	return nil
}

// openSocket takes Config.PacketConn, or opens a socket on Config.Listen,
// and learns its address.
func (s *Stack) openSocket() error {
	if s.cfg.PacketConn != nil {
		s.conn = s.cfg.PacketConn
	} else {
		ua, err := net.ResolveUDPAddr("udp", s.cfg.Listen)
		if err != nil {
			return fmt.Errorf("raet: listen address %q: %w", s.cfg.Listen, err)
		}
		conn, err := net.ListenUDP("udp", ua)
		if err != nil {
			return fmt.Errorf("raet: listen: %w", err)
		}
		// Room for a burst of segments; the kernel caps it at rmem_max.
		_ = conn.SetReadBuffer(socketBuffer)
		_ = conn.SetWriteBuffer(socketBuffer)
		s.conn = conn
	}
	s.io = newPacketIO(s.conn, s.cfg.NoOffload)
	ap, err := addrPort(s.conn.LocalAddr())
	if err != nil {
		s.conn.Close()
		return fmt.Errorf("raet: local address: %w", err)
	}
	s.addr = ap
	return nil
}

// Close stops the stack as Shutdown does, with Config.Linger (default 1s)
// to write the replies already queued. It is safe to call more than once
// and from any goroutine; it always returns nil.
func (s *Stack) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Linger)
	defer cancel()
	s.stop(ErrClosed, ctx)
	return nil
}

// Shutdown stops the stack cleanly: it stops taking packets and calls,
// fails the calls still waiting with ErrClosed, writes every datagram
// already queued (the done of each message delivered, the acks) until ctx
// ends, and then closes the socket and stops every goroutine. So a peer
// whose messages were delivered does not resend them. It returns ctx's
// error when ctx ended before everything queued was written. Later calls
// (and Close) wait for the first to finish and return nil.
func (s *Stack) Shutdown(ctx context.Context) error {
	return s.stop(ErrClosed, ctx)
}

// stop ends the stack once, with cause as Err's value.
func (s *Stack) stop(cause error, ctx context.Context) error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closing)
		s.endLife(cause)
		if s.conn != nil {
			select {
			case <-s.writerDone:
			case <-ctx.Done():
				err = ctx.Err()
			}
			close(s.abort)
			s.conn.Close()
		}
		s.wg.Wait()
		// The owner, which starts the lookups, is gone: they end with life.
		s.hosts.lookups.Wait()
		close(s.recv) // nothing delivers any more: the owner is gone
		s.endCalls(ctx)
		if s.kw != nil {
			if kerr := s.kw.Close(); kerr != nil {
				s.keepErr.Store(&kerr)
			}
		}
		if s.keylogF != nil {
			s.keylogF.Close()
		}
		s.keepLock.Unlock()
	})
	return err
}

// Done returns a channel that is closed when the stack stops: Close,
// Shutdown, or a socket that failed for good (see Err).
func (s *Stack) Done() <-chan struct{} { return s.life.Done() }

// Err returns nil while the stack runs, and then why it stopped: ErrClosed
// after Close or Shutdown, or an error wrapping ErrSocket (and the
// system's error) when its socket failed for good. When the keep could not
// be written (a write failed, and the stack answered joins keep-busy from
// then on, see Config.KeepQueue), the error once Close returned also wraps
// keep.ErrWriterFailed and the cause.
func (s *Stack) Err() error {
	err := context.Cause(s.life)
	if kerr := s.keepErr.Load(); kerr != nil && err != nil {
		return fmt.Errorf("%w; and the keep failed: %w", err, *kerr)
	}
	return err
}

// Context returns a context that ends when the stack stops, with Err as
// its cause.
func (s *Stack) Context() context.Context { return s.life }

// fail stops the stack after its socket failed for good. Only the first
// failure counts: the owner, the writer and the readers may each meet it.
func (s *Stack) fail(err error) {
	select {
	case <-s.closing:
		return // stopping anyway
	default:
	}
	if !s.failed.CompareAndSwap(false, true) {
		return // stopping already
	}
	s.cfg.Logger.Error("raet: the socket failed; the stack stops", "addr", s.addr, "err", err)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Linger)
		defer cancel()
		s.stop(fmt.Errorf("%w: %w", ErrSocket, err), ctx)
	}()
}
