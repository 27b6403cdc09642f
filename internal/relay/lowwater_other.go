//go:build !linux

package relay

import "net"

// lowWaterFor sets nothing off Linux: there a read pause leaves the
// socket's low-water mark alone (other kernels' polls do not all honour
// it).
func lowWaterFor(net.Conn) (set func(int) error, mark int) { return nil, 0 }
