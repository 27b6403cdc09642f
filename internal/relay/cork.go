package relay

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxCorked is how many bytes a corked connection collects before it
// writes them out anyway.
const maxCorked = 256 << 10

// readAhead is the most one read from the socket takes: the websocket
// library reads 4 kB at a time, and a relay sending a page of events has
// far more waiting.
const readAhead = 64 << 10

// pauseLowWater is a socket's receive low-water mark during a read pause:
// the kernel reports the socket readable, and wakes a thread waiting for
// it, only once this much is waiting (or the connection ends). Half the
// read-ahead: a relay that sends this much in a pause has the rest read
// at once after it. A socket with less than four times this in its
// receive buffer gets a quarter of the buffer (lowWaterFor); Linux's
// default buffer (tcp_rmem, 128 kB) holds the whole mark.
const pauseLowWater = readAhead / 2

// minPauseLowWater is the least mark worth raising during a pause.
const minPauseLowWater = 4 << 10

// readBufs lend read-ahead buffers: a connection holds one only while it
// has bytes read and not yet taken, so idle connections hold none.
var readBufs = sync.Pool{New: func() any { b := make([]byte, readAhead); return &b }}

// corkConn is a relay connection's socket: reads take whatever is
// waiting, up to readAhead, in one syscall, and one that emptied the
// socket makes the next wait ReadPause; each message Conn.write
// sends goes out in one write (the websocket writes a message through a
// 4 kB buffer: a 100 kB REQ was 25 writes); and with
// Options.CoalesceWrites, between Cork and Uncork its writes collect in
// buf and go out in one write (several EVENT messages per syscall, and a
// TLS connection's records too).
type corkConn struct {
	net.Conn
	coalesce bool
	timeout  time.Duration // bounds the writes of what collected

	// read side (the websocket's one reader at a time)
	rbuf     *[]byte
	r, w     int
	rerr     error
	pause    time.Duration       // Options.ReadPause, once the handshake is done
	sleep    func(time.Duration) // time.Sleep; a test's hook
	lowWater func(int) error     // sets the socket's SO_RCVLOWAT; nil: no socket to set
	lowMark  int                 // the mark a pause raises it to (lowWaterFor)
	drained  bool                // the last read took all that was waiting

	mu     sync.Mutex
	corked bool
	held   atomic.Bool // corked, for Conn.write without the lock
	msgs   int         // messages being written (beginMsg, endMsg)
	buf    []byte      // what collected: a corkBufs buffer
}

// corkBufs lend the buffers writes collect in: a connection that does not
// coalesce holds one only while a message is being written.
var corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, maxCorked); return &b }}

func (c *corkConn) Read(p []byte) (int, error) {
	if c.rbuf == nil {
		if c.rerr != nil || len(p) >= readAhead {
			if err := c.rerr; err != nil {
				return 0, err
			}
			n, err := c.Conn.Read(p)
			c.drained = err == nil && n < len(p)
			return n, err
		}
		if c.drained && c.pause > 0 {
			if err := c.pauseRead(); err != nil {
				c.rerr = err
				return 0, err
			}
		}
		bp := readBufs.Get().(*[]byte)
		n, err := c.Conn.Read(*bp)
		// A failed read is not followed by a pause: the error (a closed
		// socket) is reported at once.
		c.drained = err == nil && n < len(*bp)
		if n <= len(p) {
			copy(p, (*bp)[:n])
			readBufs.Put(bp)
			return n, err
		}
		c.rbuf, c.r, c.w, c.rerr = bp, 0, n, err
	}
	n := copy(p, (*c.rbuf)[c.r:c.w])
	c.r += n
	if c.r == c.w {
		readBufs.Put(c.rbuf)
		c.rbuf = nil
	}
	return n, nil
}

// pauseRead waits the read pause: what a busy relay sends meanwhile is
// read with one system call, not one each (see Options.ReadPause). While
// it waits, the socket's receive low-water mark is raised (lowMark), so
// what arrives does not wake the process for nothing: the reader is not
// waiting on the socket, yet at the usual mark of one byte each arrival
// woke a thread that found no work (most of the sidecar's wake-ups; see
// BENCHMARKS.md, "Decisions the numbers justified"). A mark that cannot be
// put back ends the
// connection: at the raised mark a lone message would not be read until
// more came.
func (c *corkConn) pauseRead() error {
	raised := c.lowWater != nil && c.lowWater(c.lowMark) == nil
	c.sleep(c.pause)
	if raised {
		if err := c.lowWater(1); err != nil {
			return fmt.Errorf("read pause: reset the socket's receive low-water mark: %w", err)
		}
	}
	return nil
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked && c.msgs == 0 {
		return c.Conn.Write(p)
	}
	if len(c.buf)+len(p) <= maxCorked {
		if c.buf == nil {
			c.buf = (*corkBufs.Get().(*[]byte))[:0]
		}
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	// Too much held back: out it goes, within the write timeout
	// (Conn.write sets none while corked).
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.timeout))
	defer func() { _ = c.Conn.SetWriteDeadline(time.Time{}) }()
	if err := c.flushLocked(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// flushLocked writes what collected; a connection that does not coalesce
// gives its buffer back.
func (c *corkConn) flushLocked() error {
	if c.buf == nil {
		return nil
	}
	var err error
	if len(c.buf) > 0 {
		_, err = c.Conn.Write(c.buf)
	}
	c.buf = c.buf[:0]
	if !c.coalesce {
		b := c.buf
		corkBufs.Put(&b)
		c.buf = nil
	}
	return err
}

// flushDeadline is flushLocked within the write timeout.
func (c *corkConn) flushDeadline() error {
	if len(c.buf) == 0 {
		return c.flushLocked()
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.timeout))
	err := c.flushLocked()
	_ = c.Conn.SetWriteDeadline(time.Time{})
	return err
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.held.Store(true)
	c.mu.Unlock()
}

// uncork writes what collected, within the write timeout (unless a
// message is still being written: its endMsg does).
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	c.held.Store(false)
	if c.msgs > 0 {
		return nil
	}
	return c.flushDeadline()
}

// beginMsg collects the writes of one message (its frames, their TLS
// records) until endMsg.
func (c *corkConn) beginMsg() {
	c.mu.Lock()
	c.msgs++
	c.mu.Unlock()
}

// endMsg writes what collected for the message, within the write timeout,
// unless another message is being written or the connection is corked.
func (c *corkConn) endMsg() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs--
	if c.msgs > 0 || c.corked {
		return nil
	}
	return c.flushDeadline()
}

// corkingClient returns a copy of hc (nil: http.DefaultClient) whose
// connections are corkConns (coalescing writes when opts.CoalesceWrites is
// set, their flushes bounded by opts.WriteTimeout; Dial sets the read
// pause after the handshake),
// and where the one it dials is recorded; ok is false when hc's transport
// is not an *http.Transport (hc is then used as it is).
func corkingClient(hc *http.Client, opts Options, dialled **corkConn) (*http.Client, bool) {
	if hc == nil {
		hc = http.DefaultClient
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	tr, ok := rt.(*http.Transport)
	if !ok || tr.DialTLSContext != nil || tr.DialTLS != nil || tr.Dial != nil {
		return hc, false
	}
	tr = tr.Clone()
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	var mu sync.Mutex
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &corkConn{Conn: conn, coalesce: opts.CoalesceWrites, timeout: opts.WriteTimeout, sleep: time.Sleep}
		cc.lowWater, cc.lowMark = lowWaterFor(conn)
		mu.Lock()
		*dialled = cc
		mu.Unlock()
		return cc, nil
	}
	c := *hc
	c.Transport = tr
	return &c, true
}

// Cork holds the connection's writes back until Uncork, which writes them
// out together: for a burst of messages (the publisher filling its
// window). Without Options.CoalesceWrites it does nothing.
func (c *Conn) Cork() {
	if c.cork != nil && c.cork.coalesce {
		c.cork.cork()
	}
}

// Uncork writes out what Cork held back; a failure ends the connection.
func (c *Conn) Uncork() error {
	if c.cork == nil || !c.cork.coalesce {
		return nil
	}
	if err := c.cork.uncork(); err != nil {
		c.shutdown(fmt.Errorf("write: %w", err))
		return fmt.Errorf("write to %s: %w", c.url, err)
	}
	return nil
}
