//go:build !linux

package relay

import "net"

// lowWaterFunc is nil off Linux: there a read pause leaves the socket's
// low-water mark alone (other kernels' polls do not all honour it).
func lowWaterFunc(net.Conn) func(int) error { return nil }
