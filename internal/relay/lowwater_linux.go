package relay

import (
	"net"
	"syscall"
)

// lowWaterFunc returns a function that sets the receive low-water mark
// (SO_RCVLOWAT) of conn's TCP socket, or nil when conn is not one.
func lowWaterFunc(conn net.Conn) func(int) error {
	tc, ok := conn.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	return func(n int) error {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT, n)
		}); err != nil {
			return err
		}
		return serr
	}
}
