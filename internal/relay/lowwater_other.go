//go:build !linux

package relay

import "net"

// lowWaterFor sets nothing: off Linux a read pause leaves the socket's
// low-water mark alone (not every kernel's poll honours the mark).
func lowWaterFor(net.Conn) (set func(int) error, mark int) { return nil, 0 }
