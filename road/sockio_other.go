//go:build !linux

package road

import (
	"errors"
	"net"
)

func newMmsgIO(*net.UDPConn) (packetIO, error) { return nil, errors.New("no recvmmsg here") }
