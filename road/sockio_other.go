//go:build !linux

package road

import (
	"errors"
	"net"
)

func newMmsgIO(*net.UDPConn, bool) (packetIO, error) { return nil, errors.New("no recvmmsg here") }
