package relay

import (
	"net"
	"syscall"
)

// lowWaterFor returns a function that sets the receive low-water mark
// (SO_RCVLOWAT) of conn's TCP socket, and the mark a read pause raises it
// to: pauseLowWater, or a quarter of the socket's receive buffer where
// that is less, because a mark the buffer cannot hold twice over makes
// the kernel grow the buffer and clamp the TCP window to the mark. set is
// nil when conn is not a TCP socket, or its buffer holds too little for a
// mark worth raising.
func lowWaterFor(conn net.Conn) (set func(int) error, mark int) {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil, 0
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, 0
	}
	var rcvbuf int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		rcvbuf, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	}); err != nil || gerr != nil {
		return nil, 0
	}
	mark = min(pauseLowWater, rcvbuf/4)
	if mark < minPauseLowWater {
		return nil, 0
	}
	return func(n int) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
		}); err != nil {
			return err
		}
		return serr
	}, mark
}
